// A cron expression, parsed: which civil times (wall-clock readings, no time
// zone) a schedule matches. The time zone, and what happens at daylight-saving
// transitions, are fire_time.h's business; this file knows only civil time.
//
// Syntax (standard 5-field cron, plus an optional leading seconds field):
//
//   [second] minute hour day-of-month month day-of-week
//
//   field           range  names
//   second          0-59          (only when 6 fields are given; else 0)
//   minute          0-59
//   hour            0-23
//   day of month    1-31
//   month           1-12   JAN-DEC
//   day of week     0-7    SUN-SAT (0 and 7 are both Sunday)
//
// Fields are separated by spaces or tabs. Each field is a comma-separated list
// of items; an item is `*`, a value `5`, a range `1-5`, or one of the first
// and the last with a step: `*/15`, `10-50/20`. Names (case-insensitive) may
// stand wherever a value may in their field, also in ranges (`MON-FRI`). A
// step after a single value (`5/15`, which Quartz reads as `5-59/15`) is
// refused: cron implementations disagree on it, so it must be written as a
// range. `?`, `L`, `W` and `#` (Quartz extensions) are refused.
//
// Six fields mean a leading seconds field, as in Quartz and cron-utils:
// `*/10 * * * * *` fires every 10 seconds, `* * * * * *` every second. Five
// fields fire at second 0.
//
// Macros (the whole expression, case-insensitive):
//   @hourly = `0 * * * *`   @daily = @midnight = `0 0 * * *`
//   @weekly = `0 0 * * 0`   @monthly = `0 0 1 * *`   @yearly = @annually = `0 0 1 1 *`
// `@reboot` and any other macro are refused.
//
// Day of month and day of week combine as in Vixie cron (and Debian's cron):
// a day field whose text begins with `*` (`*`, `*/2`) is "unrestricted"; if
// either day field is unrestricted a day must match both, otherwise (both
// restricted) a day matching either one matches. So `0 0 1,15 * MON` fires on
// the 1st, the 15th and every Monday, while `0 0 */2 * MON` fires on Mondays
// that fall on an odd day of the month.
//
// Bounds: at most kMaxCronExpressionBytes bytes, 5 or 6 fields, values in
// their field's range, steps from 1 to the size of the field's range. An
// expression that can never fire (`0 0 30 2 *`: there is no February 30) is
// refused too, so NextFireTime always finds a next time.
//
// Thread-safety: CronSpec is an immutable value; every method is const and
// thread-safe. Parse is pure.
#pragma once

#include "absl/status/statusor.h"
#include "absl/time/civil_time.h"

#include <bitset>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace runloom {

// The longest cron expression Parse reads, in bytes (after trimming).
inline constexpr size_t kMaxCronExpressionBytes = 256;

class CronSpec {
 public:
  // Parses `expression` (see the file comment). Leading and trailing
  // whitespace is ignored.
  //
  // Returns kInvalidArgument for anything it cannot read, naming the field by
  // its position and name and quoting the expression, e.g.
  //   cron field 3 (day of month): '32' is out of range 1-31 (in cron expression '0 0 32 * *')
  //
  // Example:
  //   absl::StatusOr<CronSpec> spec = CronSpec::Parse("*/15 9-17 * * MON-FRI");
  static absl::StatusOr<CronSpec> Parse(std::string_view expression);

  // The expression as given to Parse, trimmed (a macro stays a macro).
  const std::string& expression() const { return expression_; }

  // True when the expression has a seconds field (6 fields).
  bool has_seconds() const { return has_seconds_; }

  // True for a "wall-clock" spec: its seconds (when given), minute or hour
  // field begins with `*` (as in Vixie cron; e.g. `*/15 * * * *`, @hourly).
  // False for a "fixed-time" spec (`30 2 * * *`, @daily). The two kinds differ
  // only at daylight-saving transitions; fire_time.h says how.
  bool follows_wall_clock() const { return follows_wall_clock_; }

  // True when the spec matches civil time `t` (every field matches, the day
  // fields combined as the file comment says).
  bool Matches(absl::CivilSecond t) const;

  // The first civil second at or after `from` that the spec matches, or
  // nullopt if there is none in a year up to and including `last_year`.
  // The search walks days (skipping months that do not match), so its cost
  // is bounded by the number of days up to `last_year`.
  std::optional<absl::CivilSecond> NextMatch(absl::CivilSecond from,
                                             absl::civil_year_t last_year) const;

 private:
  CronSpec() = default;

  bool DayMatches(absl::CivilDay day) const;
  // The first matching time of day at or after h:m:s on a matching day.
  std::optional<absl::CivilSecond> NextTimeInDay(absl::CivilDay day, int hour, int minute,
                                                 int second) const;

  // Constant after Parse. Bit i is set when value i matches (day of month and
  // month use bits 1-31 and 1-12; day of week 0-6, Sunday = 0).
  std::string expression_;
  std::bitset<60> seconds_;
  std::bitset<60> minutes_;
  std::bitset<24> hours_;
  std::bitset<32> days_of_month_;
  std::bitset<13> months_;
  std::bitset<7> days_of_week_;
  bool day_of_month_star_ = false;
  bool day_of_week_star_ = false;
  bool has_seconds_ = false;
  bool follows_wall_clock_ = false;

  friend class CronParser;
};

}  // namespace runloom
