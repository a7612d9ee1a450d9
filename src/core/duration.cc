#include "core/duration.h"

#include "absl/strings/str_cat.h"

namespace runloom {

absl::StatusOr<absl::Duration> ParseDuration(std::string_view text) {
  absl::Duration d;
  if (text.empty() || !absl::ParseDuration(absl::string_view(text.data(), text.size()), &d) ||
      d < absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad duration '", std::string(text),
                     "': write a number with a unit, e.g. 250ms, 30s, 5m, 1h"));
  }
  return d;
}

absl::StatusOr<absl::Duration> ParseAge(std::string_view text) {
  constexpr int64_t kMaxDays = 100 * 366;  // a bound far past any policy, far below overflow
  if (text.size() >= 2 && text.back() == 'd') {
    int64_t days = 0;
    for (char c : text.substr(0, text.size() - 1)) {
      if (c < '0' || c > '9' || days > kMaxDays) {
        days = -1;
        break;
      }
      days = days * 10 + (c - '0');
    }
    if (days >= 0 && days <= kMaxDays) return absl::Hours(24 * days);
    return absl::InvalidArgumentError(
        absl::StrCat("bad duration '", std::string(text),
                     "': write whole days such as 30d (at most 36600d), or a duration such as "
                     "12h or 90m"));
  }
  absl::StatusOr<absl::Duration> d = ParseDuration(text);
  if (!d.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("bad duration '", std::string(text),
                                                   "': write days such as 30d, or 12h, 90m, 45s"));
  }
  return d;
}

std::string FormatDuration(absl::Duration d) { return absl::FormatDuration(d); }

absl::StatusOr<absl::Time> ParseTimestamp(std::string_view text) {
  constexpr size_t kMaxBytes = 64;
  absl::Time t;
  std::string err;
  if (text.size() > kMaxBytes ||
      !absl::ParseTime(absl::RFC3339_full, absl::string_view(text.data(), text.size()), &t,
                       &err)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad time '", std::string(text.substr(0, kMaxBytes)),
                     "': write an ISO 8601 time with its offset, e.g. 2026-12-24T18:00:00Z or "
                     "2026-12-24T19:00:00+01:00"));
  }
  return t;
}

}  // namespace runloom
