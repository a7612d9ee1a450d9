// Human durations in YAML and flags: "250ms", "30s", "5m", "2h", "1m30s".
#pragma once

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <string>
#include <string_view>

namespace runloom {

// Parses a positive-or-zero duration; kInvalidArgument names the bad text.
absl::StatusOr<absl::Duration> ParseDuration(std::string_view text);

// A duration that may be counted in days, for retention ("30d", "12h",
// "90m", "1d12h" is not accepted: days stand alone): a whole number of days
// with "d", else what ParseDuration reads. kInvalidArgument names the text.
absl::StatusOr<absl::Duration> ParseAge(std::string_view text);

// Shortest text that ParseDuration reads back to the same value.
std::string FormatDuration(absl::Duration d);

// An ISO 8601 / RFC 3339 time with its offset: "2026-12-24T18:00:00Z",
// "2026-12-24T19:00:00+01:00", fractions of a second allowed (a sleep's
// `until:`). kInvalidArgument names the bad text (at most 64 bytes read).
absl::StatusOr<absl::Time> ParseTimestamp(std::string_view text);

}  // namespace runloom
