#include "llm/internal/retry.h"

#include "absl/random/distributions.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace runloom::llm_internal {
namespace {

constexpr int kTooManyRequests = 429;
constexpr int kRequestTimeout = 408;
constexpr int kConflict = 409;
constexpr int kServerErrorFirst = 500;
constexpr int kServerErrorLast = 599;
// A wait longer than a day is not a wait but a misreading; refused.
constexpr double kMaxSeconds = 86400;

}  // namespace

bool IsRetryableHttpStatus(int status) {
  return status == kTooManyRequests || status == kRequestTimeout || status == kConflict ||
         (status >= kServerErrorFirst && status <= kServerErrorLast);
}

std::optional<absl::Duration> RetryAfter(absl::string_view retry_after_ms,
                                         absl::string_view retry_after, absl::Time now) {
  double value = 0;
  const std::string ms(absl::StripAsciiWhitespace(retry_after_ms));
  if (!ms.empty() && absl::SimpleAtod(ms, &value) && std::isfinite(value) && value >= 0 &&
      value <= kMaxSeconds * 1000) {
    return absl::Milliseconds(value);
  }
  const std::string text(absl::StripAsciiWhitespace(retry_after));
  if (text.empty()) return std::nullopt;
  if (absl::SimpleAtod(text, &value)) {
    if (!std::isfinite(value) || value < 0 || value > kMaxSeconds) return std::nullopt;
    return absl::Seconds(value);
  }
  absl::Time at;
  std::string err;
  if (!absl::ParseTime("%a, %d %b %Y %H:%M:%S GMT", text, absl::UTCTimeZone(), &at, &err)) {
    return std::nullopt;
  }
  const absl::Duration wait = at - now;
  if (wait > absl::Seconds(kMaxSeconds)) return std::nullopt;
  return std::max(wait, absl::ZeroDuration());
}

absl::Duration BackoffWithJitter(const ProviderRetry& policy, int retry, absl::BitGenRef gen) {
  absl::Duration d = policy.initial_delay;
  for (int i = 1; i < retry && d < policy.max_delay; ++i) d *= 2;
  d = std::min(d, policy.max_delay);
  const double half = absl::ToDoubleSeconds(d) / 2;
  return absl::Seconds(half + absl::Uniform(absl::IntervalClosedClosed, gen, 0.0, half));
}

}  // namespace runloom::llm_internal
