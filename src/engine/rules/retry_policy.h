// Retry policy: the error class of a failed step attempt, whether another
// attempt follows, and the backoff before it (initial_delay, times
// multiplier per failed attempt, capped at max_delay; no jitter). Pure
// functions; the leaf-step loop (leaf_step.cc) applies them.
//
// Thread-safety: stateless.
#pragma once

#include "runloom/run.h"
#include "runloom/workflow.h"

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace runloom::engine_internal {

// The class of a status (runloom/step.h): kDeadlineExceeded -> timeout,
// kUnavailable -> unavailable, kResourceExhausted -> rate_limited,
// kInvalidArgument -> invalid, kCancelled -> cancelled, else error.
ErrorClass ClassOf(const absl::Status& s);

// The class a failed attempt is recorded with: ClassOf, except that
// kCancelled while the run is not stopping means the kind gave up on its own,
// which is an error.
ErrorClass AttemptErrorClass(const absl::Status& s);

// True when `p` retries `cls`: it is in p.retry_on. cancelled is never
// retried; invalid only when retry_on lists it (it is not in the default).
bool Retries(const RetryPolicy& p, ErrorClass cls);

// The delay after failed attempt number `failed_attempt` (1-based).
absl::Duration Backoff(const RetryPolicy& p, int failed_attempt);

// Whether attempt `attempt` (1-based), failed with `cls`, is followed by
// another: attempts are left, the policy retries the class, and the parallel
// branch the step runs in has not passed its deadline.
bool ShouldRetry(const RetryPolicy& p, int attempt, ErrorClass cls, bool branch_deadline_passed);

}  // namespace runloom::engine_internal
