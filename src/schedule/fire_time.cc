#include "schedule/fire_time.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/civil_time.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>

namespace runloom {
namespace {

constexpr absl::string_view kZoneHint = "use an IANA name such as Europe/Paris or UTC";
constexpr absl::string_view kDefaultZoneDir = "/usr/share/zoneinfo";

// '/'-separated parts, each starting with a letter, of [A-Za-z0-9_+-]. This
// keeps absl::LoadTimeZone (which would open an absolute path, follow "..",
// or read "file:" names) on names inside the zone directory.
bool IsZoneName(absl::string_view name) {
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (part.empty() || !absl::ascii_isalpha(static_cast<unsigned char>(part[0]))) {
      return false;
    }
    for (char c : part) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '+' && c != '-') {
        return false;
      }
    }
  }
  return true;
}

// Where absl's zone loader looks for zone files ($TZDIR overrides the default,
// as in cctz).
std::string ZoneDirectory() {
  const char* dir = std::getenv("TZDIR");
  return dir != nullptr && *dir != '\0' ? std::string(dir) : std::string(kDefaultZoneDir);
}

// A fixed-time spec fires at FromCivil(c) for each matching civil time c: the
// first instant the wall clock reads c or later. FromCivil is monotone in c,
// so the answer is the first matching c whose instant is not before `first`.
absl::Time NextFixedTimeFire(const CronSpec& spec, absl::TimeZone zone, absl::Time first,
                             absl::civil_year_t last_year) {
  absl::CivilSecond from = zone.At(first).cs;
  // Inside the second pass of a repeated (fall-back) range, every reading up
  // to the one before the clock went back has had its first occurrence.
  const absl::TimeZone::TimeInfo info = zone.At(from);
  if (info.kind == absl::TimeZone::TimeInfo::REPEATED && first >= info.trans) {
    from = std::max(from, zone.At(info.trans - absl::Seconds(1)).cs + 1);
  }
  // The loop only runs again if zones with unusual transitions break the
  // skip above; `from` grows, and NextMatch stops at last_year.
  for (;;) {
    const std::optional<absl::CivilSecond> c = spec.NextMatch(from, last_year);
    if (!c) {
      return absl::InfiniteFuture();
    }
    const absl::Time t = absl::FromCivil(*c, zone);
    if (t >= first) {
      return t;
    }
    from = *c + 1;
  }
}

// A wall-clock spec fires at each instant whose reading matches. Between two
// transitions the offset is fixed, so readings and instants advance together:
// find the next matching reading in the current segment, or move to the next.
absl::Time NextWallClockFire(const CronSpec& spec, absl::TimeZone zone, absl::Time first,
                             absl::civil_year_t last_year) {
  absl::Time start = first;
  for (;;) {
    const absl::CivilSecond reading = zone.At(start).cs;
    const std::optional<absl::CivilSecond> c = spec.NextMatch(reading, last_year);
    if (!c) {
      return absl::InfiniteFuture();
    }
    const absl::Time t = start + absl::Seconds(*c - reading);
    absl::TimeZone::CivilTransition transition;
    if (!zone.NextTransition(start, &transition)) {
      return t;  // no offset change ahead (UTC, fixed zones)
    }
    const absl::Time segment_end = zone.At(transition.to).trans;
    // NextTransition reports transitions strictly after `start`; a zone file
    // that broke this would loop here, so stop rather than spin.
    if (t < segment_end || segment_end <= start) {
      return t;
    }
    start = segment_end;
  }
}

}  // namespace

absl::StatusOr<absl::TimeZone> LoadScheduleTimeZone(std::string_view zone_name) {
  const absl::string_view name(zone_name.data(), zone_name.size());
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("time zone name is empty; ", kZoneHint));
  }
  if (name.size() > kMaxTimeZoneNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("time zone name is ", name.size(),
                                                   " bytes; the limit is ", kMaxTimeZoneNameBytes,
                                                   "; ", kZoneHint));
  }
  const std::string quoted = absl::StrCat("'", absl::CHexEscape(name), "'");
  if (!IsZoneName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("time zone ", quoted, " is not an IANA zone name; ", kZoneHint));
  }
  if (name == "localtime") {
    return absl::InvalidArgumentError(
        absl::StrCat("time zone 'localtime' depends on the server; name the zone: ", kZoneHint));
  }
  absl::TimeZone zone;
  if (absl::LoadTimeZone(name, &zone)) {
    return zone;
  }
  const std::string dir = ZoneDirectory();
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    return absl::FailedPreconditionError(
        absl::StrCat("time zone ", quoted, " cannot be loaded: there are no zone files in ", dir,
                     " (install Debian's tzdata package; scripts/bootstrap.sh does)"));
  }
  return absl::InvalidArgumentError(absl::StrCat("time zone ", quoted, " is unknown; ", kZoneHint));
}

absl::Time NextFireTime(const CronSpec& spec, absl::TimeZone zone, absl::Time after) {
  if (after == absl::InfiniteFuture() || after == absl::InfinitePast()) {
    return absl::InfiniteFuture();
  }
  // Fire times are whole seconds: the first candidate is the next whole
  // second after `after` (ToUnixSeconds rounds down).
  const absl::Time first = absl::FromUnixSeconds(absl::ToUnixSeconds(after)) + absl::Seconds(1);
  const absl::civil_year_t last_year = zone.At(first).cs.year() + kMaxFireSearchYears;
  if (spec.follows_wall_clock()) {
    return NextWallClockFire(spec, zone, first, last_year);
  }
  return NextFixedTimeFire(spec, zone, first, last_year);
}

}  // namespace runloom
