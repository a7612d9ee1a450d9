// Human durations in YAML and flags: "250ms", "30s", "5m", "2h", "1m30s".
#pragma once

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <string>
#include <string_view>

namespace runloom {

// Parses a positive-or-zero duration; kInvalidArgument names the bad text.
absl::StatusOr<absl::Duration> ParseDuration(std::string_view text);

// Shortest text that ParseDuration reads back to the same value.
std::string FormatDuration(absl::Duration d);

}  // namespace runloom
