// Rate-limit telemetry: what a provider says about its limits in the headers
// of each response (OpenAI-compatible names), read without ever failing the
// call it came with.
//
//   retry-after                     seconds (or "1.5s", "250ms") before retrying
//   x-ratelimit-limit-requests      requests allowed per minute
//   x-ratelimit-remaining-requests  requests left in the current minute
//
// A successful call carries it in LlmResponse::rate_limit; a failed one (429,
// 5xx) as a payload on its Status (AttachRateLimit / RateLimitOf), so the
// concurrency controller hears about a 429 that a provider's own retries hid.
//
// Thread-safety: plain values and free functions.
#pragma once

#include "absl/status/status.h"
#include "absl/time/time.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace runloom {

struct RateLimitTelemetry {
  std::optional<int64_t> limit_requests;      // per minute
  std::optional<int64_t> remaining_requests;  // left in this minute
  std::optional<absl::Duration> retry_after;

  bool empty() const { return !limit_requests && !remaining_requests && !retry_after; }
  // "limit=600/min remaining=0 retry-after=1s" (for log lines).
  std::string ToString() const;
};

// The telemetry in `headers` (names matched case-insensitively). A value that
// is not a bounded non-negative number is ignored: telemetry never fails.
RateLimitTelemetry ParseRateLimitHeaders(
    const std::vector<std::pair<std::string, std::string>>& headers);

// The headers a provider would send for `telemetry` (the fake provider's
// replies; tests).
std::vector<std::pair<std::string, std::string>> RateLimitHeaders(
    const RateLimitTelemetry& telemetry);

// Carries `telemetry` on a failed call's status (no-op on OK or empty).
void AttachRateLimit(absl::Status& status, const RateLimitTelemetry& telemetry);
// The telemetry a failed call carried; empty when none.
RateLimitTelemetry RateLimitOf(const absl::Status& status);

}  // namespace runloom
