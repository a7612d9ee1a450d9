#include "llm/internal/retry.h"

#include "absl/random/random.h"
#include "gtest/gtest.h"

namespace runloom::llm_internal {
namespace {

TEST(RetryTest, RetryableStatuses) {
  for (int s : {429, 408, 409, 500, 502, 503, 504, 529}) EXPECT_TRUE(IsRetryableHttpStatus(s)) << s;
  for (int s : {200, 400, 401, 403, 404, 422}) EXPECT_FALSE(IsRetryableHttpStatus(s)) << s;
}

TEST(RetryTest, RetryAfterForms) {
  const absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  EXPECT_EQ(RetryAfter("", "2", now), absl::Seconds(2));
  EXPECT_EQ(RetryAfter("", " 1.5 ", now), absl::Milliseconds(1500));
  EXPECT_EQ(RetryAfter("250", "2", now), absl::Milliseconds(250));  // ms wins
  EXPECT_EQ(RetryAfter("junk", "3", now), absl::Seconds(3));
  EXPECT_EQ(RetryAfter("", "", now), std::nullopt);
  EXPECT_EQ(RetryAfter("", "soon", now), std::nullopt);
  EXPECT_EQ(RetryAfter("", "-1", now), std::nullopt);
  EXPECT_EQ(RetryAfter("", "1e30", now), std::nullopt);
  // 1'800'000'000 is Fri, 15 Jan 2027 08:00:00 GMT.
  EXPECT_EQ(RetryAfter("", "Fri, 15 Jan 2027 08:00:07 GMT", now), absl::Seconds(7));
  EXPECT_EQ(RetryAfter("", "Fri, 15 Jan 2027 07:00:00 GMT", now), absl::ZeroDuration());
}

TEST(RetryTest, BackoffDoublesUpToTheCapWithJitter) {
  absl::BitGen gen(std::seed_seq{7});
  const ProviderRetry p{.max_attempts = 10,
                        .initial_delay = absl::Milliseconds(100),
                        .max_delay = absl::Milliseconds(500)};
  for (int i = 0; i < 200; ++i) {
    absl::Duration d1 = BackoffWithJitter(p, 1, gen);
    EXPECT_GE(d1, absl::Milliseconds(50));
    EXPECT_LE(d1, absl::Milliseconds(100));
    absl::Duration d3 = BackoffWithJitter(p, 3, gen);
    EXPECT_GE(d3, absl::Milliseconds(200));
    EXPECT_LE(d3, absl::Milliseconds(400));
    absl::Duration d9 = BackoffWithJitter(p, 9, gen);
    EXPECT_GE(d9, absl::Milliseconds(250));
    EXPECT_LE(d9, absl::Milliseconds(500));
  }
  // The jitter spreads: not every draw is the same.
  EXPECT_NE(BackoffWithJitter(p, 2, gen), BackoffWithJitter(p, 2, gen));
}

}  // namespace
}  // namespace runloom::llm_internal
