// The retry policy as pure functions: status -> class, which classes are
// retried, the attempt cap and branch deadline, and the backoff curve.
#include "engine/rules/retry_policy.h"

#include "gtest/gtest.h"

namespace runloom::engine_internal {
namespace {

TEST(RetryPolicy, ClassOfMapsEveryCode) {
  EXPECT_EQ(ClassOf(absl::DeadlineExceededError("")), ErrorClass::kTimeout);
  EXPECT_EQ(ClassOf(absl::UnavailableError("")), ErrorClass::kUnavailable);
  EXPECT_EQ(ClassOf(absl::ResourceExhaustedError("")), ErrorClass::kRateLimited);
  EXPECT_EQ(ClassOf(absl::InvalidArgumentError("")), ErrorClass::kInvalid);
  EXPECT_EQ(ClassOf(absl::CancelledError("")), ErrorClass::kCancelled);
  EXPECT_EQ(ClassOf(absl::InternalError("")), ErrorClass::kError);
  EXPECT_EQ(ClassOf(absl::UnknownError("")), ErrorClass::kError);
  EXPECT_EQ(ClassOf(absl::FailedPreconditionError("")), ErrorClass::kError);
}

TEST(RetryPolicy, AKindThatGivesUpOnItsOwnIsAnError) {
  EXPECT_EQ(AttemptErrorClass(absl::CancelledError("")), ErrorClass::kError);
  EXPECT_EQ(AttemptErrorClass(absl::DeadlineExceededError("")), ErrorClass::kTimeout);
  EXPECT_EQ(AttemptErrorClass(absl::InvalidArgumentError("")), ErrorClass::kInvalid);
}

TEST(RetryPolicy, RetriesOnlyListedClassesAndNeverInvalidOrCancelled) {
  RetryPolicy p;  // default retry_on: error, timeout, unavailable, rate_limited
  EXPECT_TRUE(Retries(p, ErrorClass::kError));
  EXPECT_TRUE(Retries(p, ErrorClass::kTimeout));
  EXPECT_TRUE(Retries(p, ErrorClass::kUnavailable));
  EXPECT_TRUE(Retries(p, ErrorClass::kRateLimited));
  EXPECT_FALSE(Retries(p, ErrorClass::kInvalid));
  EXPECT_FALSE(Retries(p, ErrorClass::kCancelled));
  p.retry_on = {ErrorClass::kTimeout, ErrorClass::kInvalid, ErrorClass::kCancelled};
  EXPECT_TRUE(Retries(p, ErrorClass::kTimeout));
  EXPECT_FALSE(Retries(p, ErrorClass::kError));
  EXPECT_TRUE(Retries(p, ErrorClass::kInvalid));     // only when listed (a model's bad reply)
  EXPECT_FALSE(Retries(p, ErrorClass::kCancelled));  // listed, still never
}

TEST(RetryPolicy, ShouldRetryNeedsAttemptsLeftAndNoBranchDeadline) {
  RetryPolicy p;
  p.max_attempts = 3;
  EXPECT_TRUE(ShouldRetry(p, 1, ErrorClass::kError, false));
  EXPECT_TRUE(ShouldRetry(p, 2, ErrorClass::kError, false));
  EXPECT_FALSE(ShouldRetry(p, 3, ErrorClass::kError, false));  // the cap
  EXPECT_FALSE(ShouldRetry(p, 1, ErrorClass::kInvalid, false));
  EXPECT_FALSE(ShouldRetry(p, 1, ErrorClass::kError, true));  // branch past its deadline
  RetryPolicy none;                                           // max_attempts 1: no retry
  EXPECT_FALSE(ShouldRetry(none, 1, ErrorClass::kError, false));
}

TEST(RetryPolicy, BackoffGrowsByTheMultiplierUpToTheCap) {
  RetryPolicy p;
  p.initial_delay = absl::Seconds(1);
  p.multiplier = 2.0;
  p.max_delay = absl::Seconds(5);
  EXPECT_EQ(Backoff(p, 1), absl::Seconds(1));
  EXPECT_EQ(Backoff(p, 2), absl::Seconds(2));
  EXPECT_EQ(Backoff(p, 3), absl::Seconds(4));
  EXPECT_EQ(Backoff(p, 4), absl::Seconds(5));
  EXPECT_EQ(Backoff(p, 100), absl::Seconds(5));  // capped, no overflow
  p.initial_delay = absl::Seconds(9);            // above the cap from the start
  EXPECT_EQ(Backoff(p, 1), absl::Seconds(5));
  p.initial_delay = absl::Milliseconds(100);
  p.multiplier = 1.0;  // constant
  EXPECT_EQ(Backoff(p, 7), absl::Milliseconds(100));
}

}  // namespace
}  // namespace runloom::engine_internal
