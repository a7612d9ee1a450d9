// When an HTTP provider sends a request again: which answers are retried,
// how long the server asked to wait (Retry-After), and the capped
// exponential backoff with jitter used when it did not say.
//
// Thread-safety: pure functions (the generator is the caller's).
#pragma once

#include "llm/config.h"

#include "absl/random/bit_gen_ref.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

#include <optional>

namespace runloom::llm_internal {

// 429 (rate limited), 408 (request timeout), 409 (conflict: OpenAI's "try
// again") and every 5xx (including Anthropic's 529 "overloaded").
bool IsRetryableHttpStatus(int status);

// The wait a response asks for: the `retry-after-ms` header (milliseconds,
// sent by OpenAI), else `retry-after` as delta-seconds ("2", "1.5") or as
// an HTTP-date ("Wed, 21 Oct 2026 07:28:00 GMT", relative to `now`; a date
// in the past is zero). nullopt when both are absent ("") or unreadable.
std::optional<absl::Duration> RetryAfter(absl::string_view retry_after_ms,
                                         absl::string_view retry_after, absl::Time now);

// The wait before retry number `retry` (1 = the first retry) when the server
// named none: d = min(max_delay, initial_delay * 2^(retry-1)), then "equal
// jitter": d/2 plus a uniform draw from [0, d/2], so concurrent callers
// spread out but each still waits at least half the backoff.
absl::Duration BackoffWithJitter(const ProviderRetry& policy, int retry, absl::BitGenRef gen);

}  // namespace runloom::llm_internal
