#include "schedule/cron.h"

#include "core/status_macros.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include <array>
#include <cstdint>
#include <vector>

// The cron grammar is hand-written: Debian 12 packages no C++ cron parser
// (`apt-cache search cron | grep -i dev` lists only Go libraries), and the
// grammar is small. All calendar arithmetic (days per month, weekdays, month
// and day stepping) is Abseil's civil time, not ours.

namespace runloom {
namespace {

constexpr std::array<absl::string_view, 12> kMonthNames = {
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr std::array<absl::string_view, 7> kDayNames = {"SUN", "MON", "TUE", "WED",
                                                        "THU", "FRI", "SAT"};

// One cron field's range and, for month and day of week, its names (names[i]
// has the value first_name_value + i).
struct FieldInfo {
  absl::string_view name;
  int min;
  int max;
  const absl::string_view* names;
  int name_count;
  int first_name_value;
  absl::string_view name_hint;
};

constexpr FieldInfo kSecondField{"second", 0, 59, nullptr, 0, 0, ""};
constexpr FieldInfo kMinuteField{"minute", 0, 59, nullptr, 0, 0, ""};
constexpr FieldInfo kHourField{"hour", 0, 23, nullptr, 0, 0, ""};
constexpr FieldInfo kDayOfMonthField{"day of month", 1, 31, nullptr, 0, 0, ""};
constexpr FieldInfo kMonthField{"month", 1, 12, kMonthNames.data(), 12, 1, "JAN-DEC"};
// 7 is Sunday too; ParseField folds it onto 0.
constexpr FieldInfo kDayOfWeekField{"day of week", 0, 7, kDayNames.data(), 7, 0, "SUN-SAT"};

// Values are at most two digits; a longer run of digits is out of range
// without being converted.
constexpr size_t kMaxNumberDigits = 4;
// A leap year, for the longest length of each month.
constexpr absl::civil_year_t kLeapYear = 2000;

struct Macro {
  absl::string_view name;
  absl::string_view expansion;
};
constexpr std::array<Macro, 7> kMacros = {{{"@hourly", "0 * * * *"},
                                           {"@daily", "0 0 * * *"},
                                           {"@midnight", "0 0 * * *"},
                                           {"@weekly", "0 0 * * 0"},
                                           {"@monthly", "0 0 1 * *"},
                                           {"@yearly", "0 0 1 1 *"},
                                           {"@annually", "0 0 1 1 *"}}};

std::string Quoted(absl::string_view text) {
  return absl::StrCat("'", absl::CHexEscape(text), "'");
}

bool AllDigits(absl::string_view text) {
  if (text.empty()) {
    return false;
  }
  for (char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

// Where a field sits, for error messages.
class FieldContext {
 public:
  FieldContext(const FieldInfo& info, int position, absl::string_view expression)
      : info_(info), position_(position), expression_(expression) {}

  const FieldInfo& info() const { return info_; }

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("cron field ", position_, " (", info_.name,
                                                   "): ", what, " (in cron expression ",
                                                   Quoted(expression_), ")"));
  }

  std::string Range() const { return absl::StrCat(info_.min, "-", info_.max); }

 private:
  const FieldInfo& info_;
  const int position_;
  const absl::string_view expression_;
};

absl::StatusOr<int> ParseValue(const FieldContext& ctx, absl::string_view text,
                               absl::string_view item) {
  const FieldInfo& info = ctx.info();
  if (text.empty()) {
    return ctx.Error(absl::StrCat(Quoted(item), " is missing a value"));
  }
  if (AllDigits(text)) {
    int value = 0;
    if (text.size() > kMaxNumberDigits || !absl::SimpleAtoi(text, &value) || value < info.min ||
        value > info.max) {
      return ctx.Error(absl::StrCat(Quoted(text), " is out of range ", ctx.Range()));
    }
    return value;
  }
  if (info.names == nullptr) {
    return ctx.Error(absl::StrCat(Quoted(text), " is not a number"));
  }
  for (int i = 0; i < info.name_count; ++i) {
    if (absl::EqualsIgnoreCase(text, info.names[i])) {
      return info.first_name_value + i;
    }
  }
  return ctx.Error(absl::StrCat(Quoted(text), " is not a number or a name (", info.name_hint, ")"));
}

// One list item: `*`, `v`, `a-b`, `*/n` or `a-b/n`, as a bit mask.
absl::StatusOr<uint64_t> ParseItem(const FieldContext& ctx, absl::string_view item) {
  const FieldInfo& info = ctx.info();
  const std::vector<absl::string_view> slash = absl::StrSplit(item, '/');
  if (slash.size() > 2) {
    return ctx.Error(absl::StrCat(Quoted(item), " has more than one '/'"));
  }
  int low = info.min;
  int high = info.max;
  if (slash[0] != "*") {
    const std::vector<absl::string_view> dash = absl::StrSplit(slash[0], '-');
    if (dash.size() > 2) {
      return ctx.Error(absl::StrCat(Quoted(item), " is not a range: it has more than one '-'"));
    }
    RUNLOOM_ASSIGN_OR_RETURN(low, ParseValue(ctx, dash[0], item));
    high = low;
    if (dash.size() == 2) {
      RUNLOOM_ASSIGN_OR_RETURN(high, ParseValue(ctx, dash[1], item));
      if (low > high) {
        return ctx.Error(
            absl::StrCat("range ", Quoted(slash[0]), " is reversed (", low, " > ", high, ")"));
      }
    } else if (slash.size() == 2) {
      return ctx.Error(absl::StrCat("a step needs a range or '*': write ",
                                    Quoted(absl::StrCat(slash[0], "-", info.max, "/", slash[1])),
                                    " for ", Quoted(item)));
    }
  }
  int step = 1;
  if (slash.size() == 2) {
    const int span = info.max - info.min + 1;
    if (!AllDigits(slash[1])) {
      return ctx.Error(
          absl::StrCat("step ", Quoted(slash[1]), " in ", Quoted(item), " is not a number"));
    }
    if (slash[1].size() > kMaxNumberDigits || !absl::SimpleAtoi(slash[1], &step) || step < 1 ||
        step > span) {
      return ctx.Error(absl::StrCat("step ", Quoted(slash[1]), " in ", Quoted(item),
                                    " is out of range 1-", span));
    }
  }
  uint64_t mask = 0;
  for (int v = low; v <= high; v += step) {
    mask |= uint64_t{1} << v;
  }
  return mask;
}

// A whole field (a comma-separated list) as a bit mask.
absl::StatusOr<uint64_t> ParseField(const FieldContext& ctx, absl::string_view text) {
  uint64_t mask = 0;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    if (item.empty()) {
      return ctx.Error(absl::StrCat("the list ", Quoted(text), " has an empty item"));
    }
    RUNLOOM_ASSIGN_OR_RETURN(const uint64_t item_mask, ParseItem(ctx, item));
    mask |= item_mask;
  }
  if (&ctx.info() == &kDayOfWeekField && (mask & (uint64_t{1} << 7)) != 0) {
    mask = (mask & ~(uint64_t{1} << 7)) | 1;  // 7 is Sunday, like 0
  }
  return mask;
}

template <size_t N>
int NextSetBit(const std::bitset<N>& bits, int from) {
  for (int i = from; i < static_cast<int>(N); ++i) {
    if (bits[i]) {
      return i;
    }
  }
  return -1;
}

// Sunday = 0 ... Saturday = 6, as cron counts.
int CronWeekday(absl::CivilDay day) {
  constexpr int kDaysPerWeek = 7;
  // absl::Weekday counts from Monday = 0.
  return (static_cast<int>(absl::GetWeekday(day)) + 1) % kDaysPerWeek;
}

}  // namespace

// Parse's body, a friend of CronSpec so that it can fill the private fields.
class CronParser {
 public:
  static absl::StatusOr<CronSpec> Parse(absl::string_view expression);

 private:
  static absl::Status CheckCanFire(const CronSpec& spec, const FieldContext& day_of_month,
                                   int month_position);
};

absl::StatusOr<CronSpec> CronParser::Parse(absl::string_view expression) {
  const absl::string_view trimmed = absl::StripAsciiWhitespace(expression);
  if (trimmed.size() > kMaxCronExpressionBytes) {
    constexpr size_t kShown = 64;
    return absl::InvalidArgumentError(
        absl::StrCat("cron expression ", Quoted(trimmed.substr(0, kShown)), "... is ",
                     trimmed.size(), " bytes; the limit is ", kMaxCronExpressionBytes));
  }
  absl::string_view body = trimmed;
  if (absl::StartsWith(trimmed, "@")) {
    body = {};
    for (const Macro& macro : kMacros) {
      if (absl::EqualsIgnoreCase(trimmed, macro.name)) {
        body = macro.expansion;
      }
    }
    if (body.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown cron macro ", Quoted(trimmed),
                       "; use @hourly, @daily, @midnight, @weekly, @monthly, @yearly or "
                       "@annually, or five fields"));
    }
  }
  const std::vector<absl::string_view> fields =
      absl::StrSplit(body, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  constexpr size_t kFieldsWithoutSeconds = 5;
  constexpr size_t kFieldsWithSeconds = 6;
  if (fields.size() != kFieldsWithoutSeconds && fields.size() != kFieldsWithSeconds) {
    return absl::InvalidArgumentError(
        absl::StrCat("cron expression ", Quoted(trimmed), " has ", fields.size(),
                     " fields; want 5 (minute hour day-of-month month day-of-week) or 6 (a leading "
                     "second field, then those 5)"));
  }
  CronSpec spec;
  spec.expression_ = std::string(trimmed);
  spec.has_seconds_ = fields.size() == kFieldsWithSeconds;
  // Field i of the five standard ones is at position i + 1 + offset in the text.
  const int offset = spec.has_seconds_ ? 1 : 0;
  spec.seconds_ = 1;  // second 0, unless a seconds field says otherwise
  if (spec.has_seconds_) {
    const FieldContext ctx(kSecondField, 1, trimmed);
    RUNLOOM_ASSIGN_OR_RETURN(const uint64_t mask, ParseField(ctx, fields[0]));
    spec.seconds_ = std::bitset<60>(mask);
    spec.follows_wall_clock_ = absl::StartsWith(fields[0], "*");
  }
  const std::array<const FieldInfo*, 5> standard = {&kMinuteField, &kHourField, &kDayOfMonthField,
                                                    &kMonthField, &kDayOfWeekField};
  std::array<uint64_t, 5> masks{};
  for (size_t i = 0; i < standard.size(); ++i) {
    const FieldContext ctx(*standard[i], static_cast<int>(i) + 1 + offset, trimmed);
    RUNLOOM_ASSIGN_OR_RETURN(masks[i], ParseField(ctx, fields[i + offset]));
  }
  spec.minutes_ = std::bitset<60>(masks[0]);
  spec.hours_ = std::bitset<24>(masks[1]);
  spec.days_of_month_ = std::bitset<32>(masks[2]);
  spec.months_ = std::bitset<13>(masks[3]);
  spec.days_of_week_ = std::bitset<7>(masks[4]);
  spec.follows_wall_clock_ = spec.follows_wall_clock_ || absl::StartsWith(fields[offset], "*") ||
                             absl::StartsWith(fields[offset + 1], "*");
  spec.day_of_month_star_ = absl::StartsWith(fields[offset + 2], "*");
  spec.day_of_week_star_ = absl::StartsWith(fields[offset + 4], "*");
  RUNLOOM_RETURN_IF_ERROR(
      CheckCanFire(spec, FieldContext(kDayOfMonthField, 3 + offset, trimmed), 4 + offset));
  return spec;
}

// Refuses a spec that never fires: only possible when a day must match the
// day of month (one day field unrestricted) and no month listed has one of
// the days listed (`0 0 30 2 *`). Any date that exists falls on every weekday
// within one 400-year Gregorian cycle, so every other spec fires.
absl::Status CronParser::CheckCanFire(const CronSpec& spec, const FieldContext& day_of_month,
                                      int month_position) {
  if (!spec.day_of_month_star_ && !spec.day_of_week_star_) {
    return absl::OkStatus();  // either day field matches: some weekday comes every week
  }
  for (int month = 1; month <= 12; ++month) {
    if (!spec.months_[month]) {
      continue;
    }
    const int longest = absl::CivilDay(kLeapYear, month + 1, 0).day();  // day 0: the last day
    for (int day = 1; day <= longest; ++day) {
      if (spec.days_of_month_[day]) {
        return absl::OkStatus();
      }
    }
  }
  return day_of_month.Error(absl::StrCat("none of its days occurs in the months of field ",
                                         month_position,
                                         " (month), so the expression never fires"));
}

absl::StatusOr<CronSpec> CronSpec::Parse(std::string_view expression) {
  return CronParser::Parse(absl::string_view(expression.data(), expression.size()));
}

bool CronSpec::DayMatches(absl::CivilDay day) const {
  const bool day_of_month = days_of_month_[day.day()];
  const bool day_of_week = days_of_week_[CronWeekday(day)];
  if (day_of_month_star_ || day_of_week_star_) {
    return day_of_month && day_of_week;
  }
  return day_of_month || day_of_week;
}

bool CronSpec::Matches(absl::CivilSecond t) const {
  return seconds_[t.second()] && minutes_[t.minute()] && hours_[t.hour()] && months_[t.month()] &&
         DayMatches(absl::CivilDay(t));
}

std::optional<absl::CivilSecond> CronSpec::NextTimeInDay(absl::CivilDay day, int hour, int minute,
                                                         int second) const {
  for (int h = NextSetBit(hours_, hour); h >= 0; h = NextSetBit(hours_, h + 1)) {
    const int minute_from = h == hour ? minute : 0;
    for (int m = NextSetBit(minutes_, minute_from); m >= 0; m = NextSetBit(minutes_, m + 1)) {
      const int s = NextSetBit(seconds_, h == hour && m == minute ? second : 0);
      if (s >= 0) {
        return absl::CivilSecond(day.year(), day.month(), day.day(), h, m, s);
      }
    }
  }
  return std::nullopt;
}

std::optional<absl::CivilSecond> CronSpec::NextMatch(absl::CivilSecond from,
                                                     absl::civil_year_t last_year) const {
  absl::CivilDay day(from);
  int hour = from.hour();
  int minute = from.minute();
  int second = from.second();
  while (day.year() <= last_year) {
    if (!months_[day.month()]) {
      day = absl::CivilDay(absl::CivilMonth(day) + 1);
    } else {
      if (DayMatches(day)) {
        if (std::optional<absl::CivilSecond> t = NextTimeInDay(day, hour, minute, second)) {
          return t;
        }
      }
      ++day;
    }
    hour = minute = second = 0;  // later days start at midnight
  }
  return std::nullopt;
}

}  // namespace runloom
