// NextFireTime and LoadScheduleTimeZone: common specs, every-second ticks, and
// the DST rules of fire_time.h in real zones (Europe/Paris, America/New_York;
// their zone files come from Debian's tzdata package).
#include "schedule/fire_time.h"

#include "testing/status_matchers.h"

#include "absl/time/civil_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <cstdint>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace runloom {
namespace {

using ::runloom::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kZoneFilesHint[] =
    "no zone files? install Debian's tzdata (bash scripts/bootstrap.sh)";

absl::TimeZone Zone(std::string_view name) {
  absl::StatusOr<absl::TimeZone> zone = LoadScheduleTimeZone(name);
  EXPECT_OK(zone) << kZoneFilesHint;
  return zone.ok() ? *zone : absl::UTCTimeZone();
}

CronSpec Spec(std::string_view expression) {
  absl::StatusOr<CronSpec> spec = CronSpec::Parse(expression);
  EXPECT_OK(spec);
  return spec.ok() ? *spec : *CronSpec::Parse("* * * * *");
}

// A civil time in `zone` (its first occurrence if repeated).
absl::Time Civil(absl::TimeZone zone, int y, int mo, int d, int h, int mi, int s = 0) {
  return absl::FromCivil(absl::CivilSecond(y, mo, d, h, mi, s), zone);
}

std::string Show(absl::Time t, absl::TimeZone zone) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S %z", t, zone);
}

// The next `n` fire times after `after`, shown in `zone`.
std::vector<std::string> Fires(std::string_view expression, absl::TimeZone zone, absl::Time after,
                               int n) {
  const CronSpec spec = Spec(expression);
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    after = NextFireTime(spec, zone, after);
    out.push_back(Show(after, zone));
  }
  return out;
}

// Every fire time in [from, to).
std::vector<absl::Time> FiresBetween(const CronSpec& spec, absl::TimeZone zone, absl::Time from,
                                     absl::Time to) {
  std::vector<absl::Time> out;
  for (absl::Time t = NextFireTime(spec, zone, from - absl::Seconds(1)); t < to;
       t = NextFireTime(spec, zone, t)) {
    out.push_back(t);
  }
  return out;
}

TEST(ScheduleTimeZone, LoadsIanaZones) {
  for (std::string_view name : {"Europe/Paris", "America/New_York", "UTC", "Etc/GMT+5",
                                "America/Argentina/Buenos_Aires", "Australia/Lord_Howe"}) {
    EXPECT_OK(LoadScheduleTimeZone(name)) << name << ": " << kZoneFilesHint;
  }
  const absl::TimeZone paris = Zone("Europe/Paris");
  EXPECT_EQ(Show(Civil(paris, 2026, 7, 1, 12, 0), paris), "2026-07-01 12:00:00 +0200");
}

TEST(ScheduleTimeZone, UnknownZoneIsNamed) {
  EXPECT_THAT(LoadScheduleTimeZone("Europe/Pariss"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "time zone 'Europe/Pariss' is unknown; use an IANA name such as "
                       "Europe/Paris or UTC"));
}

TEST(ScheduleTimeZone, RefusesMalformedNamesBeforeLoading) {
  for (std::string_view name :
       {"/etc/passwd", "../etc/passwd", "Europe/../Paris", "Europe//Paris", "Europe/",
        "file:Europe/Paris", "Europe/Paris ", "Europe/Pa\nris", "1Europe", "Europe/.Paris"}) {
    EXPECT_THAT(LoadScheduleTimeZone(name),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is not an IANA zone name")))
        << name;
  }
  EXPECT_THAT(LoadScheduleTimeZone(""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("time zone name is empty")));
  EXPECT_THAT(LoadScheduleTimeZone(std::string(kMaxTimeZoneNameBytes + 1, 'A')),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("time zone name is 65 bytes; the limit is 64")));
  EXPECT_THAT(LoadScheduleTimeZone("localtime"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("depends on the server")));
}

TEST(ScheduleTimeZone, MissingZoneFilesSayInstallTzdata) {
  // absl reads $TZDIR on each load; a zone no other test loads is not cached.
  const char* old = std::getenv("TZDIR");
  const std::string saved = old != nullptr ? old : "";
  setenv("TZDIR", "/nonexistent/runloom-schedule-test", 1);
  const absl::StatusOr<absl::TimeZone> chatham = LoadScheduleTimeZone("Pacific/Chatham");
  const absl::StatusOr<absl::TimeZone> utc = LoadScheduleTimeZone("UTC");
  if (old != nullptr) {
    setenv("TZDIR", saved.c_str(), 1);
  } else {
    unsetenv("TZDIR");
  }
  EXPECT_THAT(chatham, StatusIs(absl::StatusCode::kFailedPrecondition,
                                HasSubstr("no zone files in /nonexistent/runloom-schedule-test "
                                          "(install Debian's tzdata package")));
  EXPECT_OK(utc);  // built in
}

TEST(CronNextFire, CommonSpecs) {
  const absl::TimeZone utc = absl::UTCTimeZone();
  const auto next = [&](std::string_view expr, absl::Time after) {
    return Show(NextFireTime(Spec(expr), utc, after), utc);
  };
  EXPECT_EQ(next("*/5 * * * *", Civil(utc, 2026, 3, 2, 10, 2, 30)), "2026-03-02 10:05:00 +0000");
  EXPECT_EQ(next("0 * * * *", Civil(utc, 2026, 3, 2, 10, 0)), "2026-03-02 11:00:00 +0000");
  EXPECT_EQ(next("0 * * * *", Civil(utc, 2026, 3, 2, 10, 0) - absl::Milliseconds(1)),
            "2026-03-02 10:00:00 +0000");
  EXPECT_EQ(next("0 * * * *", Civil(utc, 2026, 3, 2, 10, 0) + absl::Milliseconds(500)),
            "2026-03-02 11:00:00 +0000");
  EXPECT_EQ(next("0 9 * * MON-FRI", Civil(utc, 2026, 3, 13, 9, 0)), "2026-03-16 09:00:00 +0000");
  EXPECT_EQ(next("@monthly", Civil(utc, 2026, 1, 31, 23, 59, 59)), "2026-02-01 00:00:00 +0000");
  EXPECT_EQ(next("@yearly", Civil(utc, 2026, 6, 1, 0, 0)), "2027-01-01 00:00:00 +0000");
  EXPECT_EQ(next("@weekly", Civil(utc, 2026, 3, 2, 0, 0)), "2026-03-08 00:00:00 +0000");
  EXPECT_EQ(next("0 0 31 * *", Civil(utc, 2026, 1, 31, 0, 0)), "2026-03-31 00:00:00 +0000");
  EXPECT_EQ(next("59 23 31 12 *", Civil(utc, 2026, 1, 1, 0, 0)), "2026-12-31 23:59:00 +0000");
  EXPECT_EQ(next("*/10 * * * * *", Civil(utc, 2026, 3, 2, 10, 0, 5)), "2026-03-02 10:00:10 +0000");
  EXPECT_EQ(next("0 0 13 * FRI", Civil(utc, 2026, 3, 7, 0, 0)), "2026-03-13 00:00:00 +0000");
  EXPECT_EQ(next("0 0 13 * FRI", Civil(utc, 2026, 3, 13, 0, 0)), "2026-03-20 00:00:00 +0000");
  // 2100 is not a leap year: eight years between two February 29ths.
  EXPECT_EQ(next("0 0 29 2 *", Civil(utc, 2097, 3, 1, 0, 0)), "2104-02-29 00:00:00 +0000");
}

TEST(CronNextFire, SparseSpecsStillFire) {
  // Feb 29 on a Sunday (the '*' makes the day fields AND): years apart.
  const absl::TimeZone utc = absl::UTCTimeZone();
  absl::CivilDay want(2026, 1, 1);
  for (absl::civil_year_t y = 2026;; ++y) {
    const absl::CivilDay feb29(y, 2, 29);
    if (feb29.month() == 2 && absl::GetWeekday(feb29) == absl::Weekday::sunday) {
      want = feb29;
      break;
    }
  }
  const absl::Time fire = NextFireTime(Spec("0 0 29 2 */7"), utc, Civil(utc, 2026, 1, 1, 0, 0));
  EXPECT_EQ(absl::CivilDay(utc.At(fire).cs), want);
  EXPECT_GT(want.year(), 2030);
}

TEST(CronNextFire, InfiniteAfterGivesInfiniteFuture) {
  const CronSpec spec = Spec("* * * * * *");
  EXPECT_EQ(NextFireTime(spec, absl::UTCTimeZone(), absl::InfiniteFuture()),
            absl::InfiniteFuture());
  EXPECT_EQ(NextFireTime(spec, absl::UTCTimeZone(), absl::InfinitePast()), absl::InfiniteFuture());
}

// The "1-second schedule": 1,000 consecutive ticks are 1 s apart, in
// UTC and across both of Paris's 2026 transitions.
TEST(CronNextFire, EverySecondThousandTicks) {
  const CronSpec spec = Spec("* * * * * *");
  const absl::TimeZone utc = absl::UTCTimeZone();
  const absl::TimeZone paris = Zone("Europe/Paris");
  const absl::Time starts[] = {
      Civil(utc, 2026, 12, 31, 23, 50),  // across a year end
      Civil(utc, 2026, 3, 29, 0, 52),    // across 02:00 CET -> 03:00 CEST (01:00Z)
      Civil(utc, 2026, 10, 25, 0, 52),   // across 03:00 CEST -> 02:00 CET (01:00Z)
  };
  for (absl::TimeZone zone : {utc, paris}) {
    for (absl::Time start : starts) {
      absl::Time t = start;
      for (int tick = 0; tick < 1000; ++tick) {
        const absl::Time next = NextFireTime(spec, zone, t);
        ASSERT_EQ(next - t, absl::Seconds(1)) << "tick " << tick << " after " << Show(t, zone);
        t = next;
      }
    }
  }
}

TEST(CronDst, ParisSpringForwardFixedTimeFiresOnceAtTheGapEnd) {
  const absl::TimeZone paris = Zone("Europe/Paris");
  EXPECT_THAT(Fires("30 2 * * *", paris, Civil(paris, 2026, 3, 27, 12, 0), 3),
              ElementsAre("2026-03-28 02:30:00 +0100", "2026-03-29 03:00:00 +0200",
                          "2026-03-30 02:30:00 +0200"));
  // Two skipped hours, and a time at the gap's end, fire once together.
  EXPECT_THAT(Fires("0 2,3 * * *", paris, Civil(paris, 2026, 3, 28, 12, 0), 2),
              ElementsAre("2026-03-29 03:00:00 +0200", "2026-03-30 02:00:00 +0200"));
}

TEST(CronDst, ParisFallBackFixedTimeFiresOnceAtTheFirstOccurrence) {
  const absl::TimeZone paris = Zone("Europe/Paris");
  EXPECT_THAT(Fires("30 2 * * *", paris, Civil(paris, 2026, 10, 24, 12, 0), 2),
              ElementsAre("2026-10-25 02:30:00 +0200", "2026-10-26 02:30:00 +0100"));
  // From inside the first pass of 02:00-02:59, and from inside the second.
  const absl::Time first_pass = absl::FromCivil(absl::CivilSecond(2026, 10, 25, 0, 10, 0),
                                                absl::UTCTimeZone());  // 02:10 CEST
  const absl::Time second_pass = first_pass + absl::Hours(1);          // 02:10 CET
  ASSERT_EQ(Show(second_pass, paris), "2026-10-25 02:10:00 +0100");
  EXPECT_THAT(Fires("30 2 * * *", paris, first_pass, 1), ElementsAre("2026-10-25 02:30:00 +0200"));
  EXPECT_THAT(Fires("30 2 * * *", paris, second_pass, 1), ElementsAre("2026-10-26 02:30:00 +0100"));
}

TEST(CronDst, ParisQuarterHourFollowsTheWallClock) {
  const absl::TimeZone paris = Zone("Europe/Paris");
  EXPECT_THAT(Fires("*/15 * * * *", paris, Civil(paris, 2026, 3, 29, 1, 20), 4),
              ElementsAre("2026-03-29 01:30:00 +0100", "2026-03-29 01:45:00 +0100",
                          "2026-03-29 03:00:00 +0200", "2026-03-29 03:15:00 +0200"));
  EXPECT_THAT(Fires("*/15 * * * *", paris, Civil(paris, 2026, 10, 25, 2, 20), 7),
              ElementsAre("2026-10-25 02:30:00 +0200", "2026-10-25 02:45:00 +0200",
                          "2026-10-25 02:00:00 +0100", "2026-10-25 02:15:00 +0100",
                          "2026-10-25 02:30:00 +0100", "2026-10-25 02:45:00 +0100",
                          "2026-10-25 03:00:00 +0100"));
}

TEST(CronDst, ParisHourlyFiresEachRealHour) {
  const absl::TimeZone paris = Zone("Europe/Paris");
  EXPECT_THAT(Fires("0 * * * *", paris, Civil(paris, 2026, 3, 29, 0, 30), 3),
              ElementsAre("2026-03-29 01:00:00 +0100", "2026-03-29 03:00:00 +0200",
                          "2026-03-29 04:00:00 +0200"));
  EXPECT_THAT(Fires("@hourly", paris, Civil(paris, 2026, 10, 25, 1, 30), 3),
              ElementsAre("2026-10-25 02:00:00 +0200", "2026-10-25 02:00:00 +0100",
                          "2026-10-25 03:00:00 +0100"));
}

TEST(CronDst, NewYorkTransitions) {
  // 2026-03-08 02:00 EST -> 03:00 EDT; 2026-11-01 02:00 EDT -> 01:00 EST.
  const absl::TimeZone ny = Zone("America/New_York");
  EXPECT_THAT(Fires("30 2 * * *", ny, Civil(ny, 2026, 3, 7, 12, 0), 2),
              ElementsAre("2026-03-08 03:00:00 -0400", "2026-03-09 02:30:00 -0400"));
  EXPECT_THAT(Fires("30 1 * * *", ny, Civil(ny, 2026, 10, 31, 12, 0), 2),
              ElementsAre("2026-11-01 01:30:00 -0400", "2026-11-02 01:30:00 -0500"));
  EXPECT_THAT(Fires("*/15 * * * *", ny, Civil(ny, 2026, 3, 8, 1, 40), 2),
              ElementsAre("2026-03-08 01:45:00 -0500", "2026-03-08 03:00:00 -0400"));
  EXPECT_THAT(Fires("*/15 * * * *", ny, Civil(ny, 2026, 11, 1, 1, 40), 3),
              ElementsAre("2026-11-01 01:45:00 -0400", "2026-11-01 01:00:00 -0500",
                          "2026-11-01 01:15:00 -0500"));
}

// A daily fixed-time spec fires exactly once on every local day of a year,
// whatever the transitions (Lord Howe shifts by 30 minutes, Santiago at midnight).
TEST(CronDst, DailyFixedTimeFiresOncePerLocalDay) {
  for (std::string_view zone_name :
       {"Europe/Paris", "America/New_York", "Australia/Lord_Howe", "America/Santiago"}) {
    const absl::TimeZone zone = Zone(zone_name);
    for (std::string_view expr : {"0 0 * * *", "0 1 * * *", "30 1 * * *", "0 2 * * *", "30 2 * * *",
                                  "59 2 * * *", "0 3 * * *", "0 30 2 * * *"}) {
      const std::vector<absl::Time> fires = FiresBetween(
          Spec(expr), zone, Civil(zone, 2026, 1, 1, 0, 0), Civil(zone, 2027, 1, 1, 0, 0));
      std::set<absl::CivilDay> days;
      for (absl::Time t : fires) {
        days.insert(absl::CivilDay(zone.At(t).cs));
      }
      EXPECT_EQ(fires.size(), 365u) << zone_name << " " << expr;
      EXPECT_EQ(days.size(), 365u) << zone_name << " " << expr;
    }
  }
}

// A wall-clock spec fires at every real instant whose reading matches: over a
// year its fires are evenly spaced in absolute time (no gap, no duplicate),
// and each one reads as a match on the zone's clock.
TEST(CronDst, WallClockSpecsAreEvenlySpacedInAbsoluteTime) {
  const struct {
    std::string_view expression;
    absl::Duration spacing;
  } cases[] = {{"*/15 * * * *", absl::Minutes(15)}, {"0 * * * *", absl::Hours(1)}};
  for (std::string_view zone_name : {"Europe/Paris", "America/New_York"}) {
    const absl::TimeZone zone = Zone(zone_name);
    for (const auto& c : cases) {
      const CronSpec spec = Spec(c.expression);
      const std::vector<absl::Time> fires =
          FiresBetween(spec, zone, Civil(zone, 2026, 1, 1, 0, 0), Civil(zone, 2027, 1, 1, 0, 0));
      ASSERT_FALSE(fires.empty());
      for (size_t i = 0; i < fires.size(); ++i) {
        ASSERT_TRUE(spec.Matches(zone.At(fires[i]).cs)) << Show(fires[i], zone);
        if (i > 0) {
          ASSERT_EQ(fires[i] - fires[i - 1], c.spacing)
              << zone_name << " " << c.expression << " at " << Show(fires[i], zone);
        }
      }
      EXPECT_EQ(static_cast<int64_t>(fires.size()),
                absl::ToInt64Hours(absl::Hours(24 * 365)) * (absl::Hours(1) / c.spacing))
          << zone_name << " " << c.expression;
    }
  }
}

// The rules restated as brute force, minute by minute (the specs below have no
// seconds field, and these zones' offsets are whole minutes).
absl::Time OracleNextFire(const CronSpec& spec, absl::TimeZone zone, absl::Time after) {
  constexpr int64_t kWindowMinutes = 3 * 24 * 60;
  if (spec.follows_wall_clock()) {
    // Every instant whose reading matches.
    const absl::Time minute = absl::FromUnixSeconds(absl::ToUnixSeconds(after) / 60 * 60);
    for (int64_t i = 0; i <= kWindowMinutes; ++i) {
      const absl::Time t = minute + absl::Minutes(i);
      if (t > after && spec.Matches(zone.At(t).cs)) {
        return t;
      }
    }
    return absl::InfiniteFuture();
  }
  // The earliest FromCivil(c) after `after` over the matching readings c.
  absl::Time best = absl::InfiniteFuture();
  const absl::CivilMinute start = absl::CivilMinute(zone.At(after).cs) - 6 * 60;
  for (int64_t i = 0; i <= kWindowMinutes; ++i) {
    const absl::CivilSecond c = start + i;
    if (spec.Matches(c)) {
      const absl::Time t = absl::FromCivil(c, zone);
      if (t > after && t < best) {
        best = t;
      }
    }
  }
  return best;
}

TEST(CronDst, MatchesABruteForceOracleAroundTransitions) {
  constexpr uint64_t kSeed = 23;
  SCOPED_TRACE(::testing::Message() << "seed " << kSeed);
  std::mt19937_64 random(kSeed);
  std::uniform_int_distribution<int64_t> offset_seconds(-6 * 3600, 6 * 3600);
  for (std::string_view zone_name : {"Europe/Paris", "America/New_York", "Australia/Lord_Howe"}) {
    const absl::TimeZone zone = Zone(zone_name);
    // Each 2026 transition of the zone.
    std::vector<absl::Time> transitions;
    absl::Time t = Civil(zone, 2026, 1, 1, 0, 0);
    absl::TimeZone::CivilTransition transition;
    while (zone.NextTransition(t, &transition) && t < Civil(zone, 2027, 1, 1, 0, 0)) {
      t = zone.At(transition.to).trans;
      transitions.push_back(t);
    }
    ASSERT_GE(transitions.size(), 2u) << zone_name;
    for (std::string_view expr : {"*/15 * * * *", "0 * * * *", "* 2 * * *", "*/20 1-3 * * *",
                                  "30 2 * * *", "0 2,3 * * *", "15,45 1-3 * * *", "0 0 * * *"}) {
      const CronSpec spec = Spec(expr);
      for (absl::Time trans : transitions) {
        for (int i = 0; i < 15; ++i) {
          const absl::Time after = trans + absl::Seconds(offset_seconds(random));
          ASSERT_EQ(Show(NextFireTime(spec, zone, after), zone),
                    Show(OracleNextFire(spec, zone, after), zone))
              << zone_name << " " << expr << " after " << Show(after, zone);
        }
      }
    }
  }
}

}  // namespace
}  // namespace runloom
