// CronSpec::Parse and CronSpec::Matches: the grammar, its bounds, and the
// error text (each names the field and quotes the expression).
#include "schedule/cron.h"

#include "testing/status_matchers.h"

#include "absl/time/civil_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <string>

namespace runloom {
namespace {

using ::runloom::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

CronSpec MustParse(std::string_view expression) {
  absl::StatusOr<CronSpec> spec = CronSpec::Parse(expression);
  EXPECT_OK(spec);
  return spec.ok() ? *spec : *CronSpec::Parse("* * * * *");
}

// The expression's error message (empty when it parses).
std::string ParseError(std::string_view expression) {
  absl::StatusOr<CronSpec> spec = CronSpec::Parse(expression);
  EXPECT_THAT(spec, StatusIs(absl::StatusCode::kInvalidArgument)) << expression;
  return spec.ok() ? "" : std::string(spec.status().message());
}

absl::CivilSecond At(int y, int mo, int d, int h, int mi, int s = 0) {
  return absl::CivilSecond(y, mo, d, h, mi, s);
}

TEST(CronParse, AcceptsTheStandardForms) {
  for (std::string_view good : {"* * * * *",       "0 0 * * *",         "*/5 * * * *",
                                "0-59/15 * * * *", "5,10,15 1-3 * * *", "0 9-17/2 * * MON-FRI",
                                "0 0 1 JAN,jul *", "0 0 * * sun",       "0 0 * * 7",
                                "0 0 * * 0-7",     "  0\t0  1 1 *  ",   "@hourly",
                                "@daily",          "@midnight",         "@weekly",
                                "@monthly",        "@yearly",           "@annually",
                                "@DAILY",          "*/10 * * * * *",    "0 0 29 2 *",
                                "59 23 31 12 6"}) {
    EXPECT_OK(CronSpec::Parse(good)) << good;
  }
}

TEST(CronParse, KeepsTheTrimmedExpression) {
  EXPECT_EQ(MustParse("  */5 * * * *\n").expression(), "*/5 * * * *");
  EXPECT_EQ(MustParse("@daily").expression(), "@daily");
}

TEST(CronParse, FiveFieldsFireAtSecondZeroSixHaveASecondsField) {
  const CronSpec five = MustParse("* * * * *");
  EXPECT_FALSE(five.has_seconds());
  EXPECT_TRUE(five.Matches(At(2026, 1, 1, 10, 7, 0)));
  EXPECT_FALSE(five.Matches(At(2026, 1, 1, 10, 7, 1)));

  const CronSpec six = MustParse("*/20 * * * * *");
  EXPECT_TRUE(six.has_seconds());
  EXPECT_TRUE(six.Matches(At(2026, 1, 1, 10, 7, 40)));
  EXPECT_FALSE(six.Matches(At(2026, 1, 1, 10, 7, 30)));
}

TEST(CronParse, ListsRangesAndSteps) {
  const CronSpec spec = MustParse("5,20-30/5,50 * * * *");
  for (int minute = 0; minute < 60; ++minute) {
    const bool want = minute == 5 || minute == 20 || minute == 25 || minute == 30 || minute == 50;
    EXPECT_EQ(spec.Matches(At(2026, 1, 1, 0, minute)), want) << minute;
  }
  const CronSpec hours = MustParse("0 */7 * * *");  // 0, 7, 14, 21
  EXPECT_TRUE(hours.Matches(At(2026, 1, 1, 21, 0)));
  EXPECT_FALSE(hours.Matches(At(2026, 1, 1, 22, 0)));
}

TEST(CronParse, NamesAreCaseInsensitiveAndSevenIsSunday) {
  // 2026-03-01 is a Sunday.
  const absl::CivilSecond sunday = At(2026, 3, 1, 0, 0);
  const absl::CivilSecond monday = At(2026, 3, 2, 0, 0);
  for (std::string_view expr : {"0 0 * * 0", "0 0 * * 7", "0 0 * * SUN", "0 0 * * sun",
                                "0 0 * * Sun", "0 0 * * 6-7", "0 0 * * SAT-7"}) {
    const CronSpec spec = MustParse(expr);
    EXPECT_TRUE(spec.Matches(sunday)) << expr;
    EXPECT_FALSE(spec.Matches(monday)) << expr;
  }
  const CronSpec months = MustParse("0 0 1 feb-Apr,DEC *");
  EXPECT_TRUE(months.Matches(At(2026, 3, 1, 0, 0)));
  EXPECT_TRUE(months.Matches(At(2026, 12, 1, 0, 0)));
  EXPECT_FALSE(months.Matches(At(2026, 5, 1, 0, 0)));
}

TEST(CronParse, MacrosMatchTheirExpansions) {
  const struct {
    std::string_view macro;
    std::string_view expansion;
  } cases[] = {{"@hourly", "0 * * * *"},  {"@daily", "0 0 * * *"},   {"@midnight", "0 0 * * *"},
               {"@weekly", "0 0 * * 0"},  {"@monthly", "0 0 1 * *"}, {"@yearly", "0 0 1 1 *"},
               {"@annually", "0 0 1 1 *"}};
  for (const auto& c : cases) {
    const CronSpec macro = MustParse(c.macro);
    const CronSpec expansion = MustParse(c.expansion);
    EXPECT_EQ(macro.follows_wall_clock(), expansion.follows_wall_clock()) << c.macro;
    // Every hour of 2026's first eight days, and the hours of two month starts.
    for (int day = 1; day <= 8; ++day) {
      for (int hour = 0; hour < 24; ++hour) {
        const absl::CivilSecond t = At(2026, 1, day, hour, 0);
        EXPECT_EQ(macro.Matches(t), expansion.Matches(t)) << c.macro << " at " << t;
      }
    }
    EXPECT_EQ(macro.Matches(At(2026, 6, 1, 0, 0)), expansion.Matches(At(2026, 6, 1, 0, 0)));
  }
}

TEST(CronParse, DayOfMonthOrDayOfWeekWhenBothAreRestricted) {
  // Vixie cron: both restricted -> either matches. 2026-03-13 is a Friday,
  // 2026-03-06 a Friday, 2026-04-13 a Monday.
  const CronSpec either = MustParse("0 0 13 * FRI");
  EXPECT_TRUE(either.Matches(At(2026, 3, 13, 0, 0)));
  EXPECT_TRUE(either.Matches(At(2026, 3, 6, 0, 0)));
  EXPECT_TRUE(either.Matches(At(2026, 4, 13, 0, 0)));
  EXPECT_FALSE(either.Matches(At(2026, 3, 7, 0, 0)));

  // A day field starting with '*' is unrestricted (Vixie): then both must
  // match. */2 is the odd days; 2026-03-02 (even) and 2026-03-09 (odd) are Mondays.
  const CronSpec both = MustParse("0 0 */2 * MON");
  EXPECT_FALSE(both.Matches(At(2026, 3, 2, 0, 0)));
  EXPECT_TRUE(both.Matches(At(2026, 3, 9, 0, 0)));
  EXPECT_FALSE(both.Matches(At(2026, 3, 3, 0, 0)));

  const CronSpec weekdays = MustParse("0 0 * * MON-FRI");
  EXPECT_TRUE(weekdays.Matches(At(2026, 3, 9, 0, 0)));
  EXPECT_FALSE(weekdays.Matches(At(2026, 3, 8, 0, 0)));
}

TEST(CronParse, WallClockOrFixedTime) {
  for (std::string_view expr : {"*/15 * * * *", "0 * * * *", "* 2 * * *", "@hourly", "* * * * * *",
                                "*/5 30 2 * * *", "0 0 * * * *"}) {
    EXPECT_TRUE(MustParse(expr).follows_wall_clock()) << expr;
  }
  for (std::string_view expr :
       {"30 2 * * *", "@daily", "0 9 * * MON-FRI", "0 0-23 * * *", "0 30 2 * * *", "@yearly"}) {
    EXPECT_FALSE(MustParse(expr).follows_wall_clock()) << expr;
  }
}

TEST(CronParse, ErrorsNameTheFieldAndQuoteTheExpression) {
  EXPECT_EQ(ParseError("0 0 32 * *"),
            "cron field 3 (day of month): '32' is out of range 1-31 (in cron expression "
            "'0 0 32 * *')");
  // With a seconds field the day of month is field 4.
  EXPECT_THAT(ParseError("0 0 0 32 * *"), HasSubstr("cron field 4 (day of month): '32'"));
  EXPECT_THAT(ParseError("60 * * * *"),
              HasSubstr("cron field 1 (minute): '60' is out of range 0-59"));
  EXPECT_THAT(ParseError("* 24 * * *"), HasSubstr("cron field 2 (hour): '24' is out of range"));
  EXPECT_THAT(ParseError("* * 0 * *"), HasSubstr("cron field 3 (day of month): '0'"));
  EXPECT_THAT(ParseError("* * * 13 *"), HasSubstr("cron field 4 (month): '13' is out of range"));
  EXPECT_THAT(ParseError("* * * * 8"),
              HasSubstr("cron field 5 (day of week): '8' is out of range 0-7"));
  EXPECT_THAT(ParseError("60 * * * * *"), HasSubstr("cron field 1 (second): '60'"));
  EXPECT_THAT(ParseError("* * * * 99999999999999999999"),
              HasSubstr("cron field 5 (day of week): '99999999999999999999' is out of range"));
}

TEST(CronParse, RefusesEachKindOfBadItem) {
  const struct {
    std::string_view expression;
    std::string_view message;
  } cases[] = {
      {"1,,2 * * * *", "cron field 1 (minute): the list '1,,2' has an empty item"},
      {"1, * * * *", "cron field 1 (minute): the list '1,' has an empty item"},
      {"*/0 * * * *", "cron field 1 (minute): step '0' in '*/0' is out of range 1-60"},
      {"* */25 * * *", "cron field 2 (hour): step '25' in '*/25' is out of range 1-24"},
      {"* * */x * *", "cron field 3 (day of month): step 'x' in '*/x' is not a number"},
      {"* * * */ *", "cron field 4 (month): step '' in '*/' is not a number"},
      {"30-10 * * * *", "cron field 1 (minute): range '30-10' is reversed (30 > 10)"},
      {"* * * * FRI-MON", "cron field 5 (day of week): range 'FRI-MON' is reversed (5 > 1)"},
      {"* * * FOO *", "cron field 4 (month): 'FOO' is not a number or a name (JAN-DEC)"},
      {"* * * * MONDAY", "cron field 5 (day of week): 'MONDAY' is not a number or a name"},
      {"* MON * * *", "cron field 2 (hour): 'MON' is not a number"},
      {"* * JAN * *", "cron field 3 (day of month): 'JAN' is not a number"},
      {"5/15 * * * *",
       "cron field 1 (minute): a step needs a range or '*': write '5-59/15' for '5/15'"},
      {"1-2-3 * * * *", "cron field 1 (minute): '1-2-3' is not a range"},
      {"1/2/3 * * * *", "cron field 1 (minute): '1/2/3' has more than one '/'"},
      {"5- * * * *", "cron field 1 (minute): '5-' is missing a value"},
      {"-5 * * * *", "cron field 1 (minute): '-5' is missing a value"},
      {"? * * * *", "cron field 1 (minute): '?' is not a number"},
      {"* * L * *", "cron field 3 (day of month): 'L' is not a number"},
      {"* * * * 1#2", "cron field 5 (day of week): '1#2' is not a number or a name"},
      {"+5 * * * *", "cron field 1 (minute): '+5' is not a number"},
  };
  for (const auto& c : cases) {
    EXPECT_THAT(ParseError(c.expression),
                AllOf(HasSubstr(c.message), HasSubstr("(in cron expression '")))
        << c.expression;
  }
}

TEST(CronParse, RefusesWrongFieldCounts) {
  EXPECT_THAT(ParseError("* * * *"),
              HasSubstr("cron expression '* * * *' has 4 fields; want 5 (minute hour "
                        "day-of-month month day-of-week) or 6"));
  EXPECT_THAT(ParseError("* * * * * * *"), HasSubstr("has 7 fields"));
  EXPECT_THAT(ParseError(""), HasSubstr("has 0 fields"));
  EXPECT_THAT(ParseError("   "), HasSubstr("has 0 fields"));
}

TEST(CronParse, RefusesUnknownMacros) {
  EXPECT_THAT(ParseError("@reboot"), HasSubstr("unknown cron macro '@reboot'; use @hourly"));
  EXPECT_THAT(ParseError("@daily 5"), HasSubstr("unknown cron macro '@daily 5'"));
  EXPECT_THAT(ParseError("@"), HasSubstr("unknown cron macro '@'"));
}

TEST(CronParse, RefusesLongExpressions) {
  std::string padded = "0 0 * * *";
  while (padded.size() < kMaxCronExpressionBytes) {
    padded.insert(0, " ");
    padded += " ";
  }
  EXPECT_OK(CronSpec::Parse(padded));  // surrounding whitespace does not count

  std::string list = "0";
  while (list.size() <= kMaxCronExpressionBytes) {
    list += ",0";
  }
  EXPECT_THAT(ParseError(list + " * * * *"),
              AllOf(HasSubstr("bytes; the limit is 256"), HasSubstr("cron expression '0,0,0")));
  // Exactly at the limit parses.
  std::string at_limit = "0 0 * * *";
  at_limit.insert(1, kMaxCronExpressionBytes - at_limit.size(), ' ');
  ASSERT_EQ(at_limit.size(), kMaxCronExpressionBytes);
  EXPECT_OK(CronSpec::Parse(at_limit));
  at_limit.insert(1, " ");
  EXPECT_THAT(ParseError(at_limit), HasSubstr("257 bytes"));
}

TEST(CronParse, RefusesSpecsThatNeverFire) {
  EXPECT_EQ(ParseError("0 0 30 2 *"),
            "cron field 3 (day of month): none of its days occurs in the months of field 4 "
            "(month), so the expression never fires (in cron expression '0 0 30 2 *')");
  EXPECT_THAT(ParseError("0 0 31 4,6,9,11 *"), HasSubstr("never fires"));
  EXPECT_THAT(ParseError("0 0 0 30-31 FEB *"), HasSubstr("cron field 4 (day of month)"));
  EXPECT_THAT(ParseError("0 0 30 2 */2"), HasSubstr("never fires"));
  // Feb 29 exists in leap years; both day fields restricted means either
  // matches, so the day-of-week alone fires.
  EXPECT_OK(CronSpec::Parse("0 0 29 2 *"));
  EXPECT_OK(CronSpec::Parse("0 0 30 2 MON"));
  EXPECT_OK(CronSpec::Parse("0 0 31 2,3 *"));
}

TEST(CronParse, ControlCharactersAreEscapedInErrors) {
  EXPECT_THAT(ParseError("0 0 \x01 * *"), HasSubstr("'\\x01' is not a number"));
}

TEST(CronMatch, NextMatchWalksDaysAndStopsAtTheLastYear) {
  const CronSpec spec = MustParse("30 2 29 2 *");
  EXPECT_EQ(spec.NextMatch(At(2026, 1, 1, 0, 0), 2100), At(2028, 2, 29, 2, 30));
  EXPECT_EQ(spec.NextMatch(At(2028, 2, 29, 2, 30), 2100), At(2028, 2, 29, 2, 30));  // at or after
  EXPECT_EQ(spec.NextMatch(At(2028, 2, 29, 2, 30, 1), 2100), At(2032, 2, 29, 2, 30));
  EXPECT_EQ(spec.NextMatch(At(2026, 1, 1, 0, 0), 2027), std::nullopt);
  // 2100 is not a leap year.
  EXPECT_EQ(spec.NextMatch(At(2097, 1, 1, 0, 0), 2200), At(2104, 2, 29, 2, 30));
}

}  // namespace
}  // namespace runloom
