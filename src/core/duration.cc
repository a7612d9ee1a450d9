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

}  // namespace runloom
