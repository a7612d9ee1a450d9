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
