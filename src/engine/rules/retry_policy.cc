#include "engine/rules/retry_policy.h"

#include "runloom/step.h"

#include <algorithm>

namespace runloom::engine_internal {

ErrorClass ClassOf(const absl::Status& s) { return ErrorClassOf(s); }

ErrorClass AttemptErrorClass(const absl::Status& s) {
  ErrorClass cls = ClassOf(s);
  return cls == ErrorClass::kCancelled ? ErrorClass::kError : cls;
}

bool Retries(const RetryPolicy& p, ErrorClass cls) {
  // invalid is not in the default list: bad config or input stays bad. A
  // step lists it when a new attempt can fix it (a model's reply that does
  // not match its response_schema).
  if (cls == ErrorClass::kCancelled) return false;
  for (ErrorClass c : p.retry_on) {
    if (c == cls) return true;
  }
  return false;
}

absl::Duration Backoff(const RetryPolicy& p, int failed_attempt) {
  absl::Duration d = p.initial_delay;
  for (int i = 1; i < failed_attempt; ++i) {
    d = d * p.multiplier;
    if (d >= p.max_delay) return p.max_delay;
  }
  return std::min(d, p.max_delay);
}

bool ShouldRetry(const RetryPolicy& p, int attempt, ErrorClass cls, bool branch_deadline_passed) {
  return attempt < p.max_attempts && Retries(p, cls) && !branch_deadline_passed;
}

}  // namespace runloom::engine_internal
