// Leaf steps on a real SQLite store: retries with backoff, classes that are
// not retried, step timeouts.
#include "runloom/engine.h"

#include "engine/run/run_execution.h"
#include "testing/engine_test_util.h"
#include "testing/status_matchers.h"

#include "gtest/gtest.h"

#include <atomic>
#include <filesystem>
#include <thread>

namespace runloom {
namespace {

using ::runloom::testing::StatusIs;

TEST(Engine, RetryWithBackoffThenSuccess) {
  Harness h;
  RunRecord r = h.RunYaml(R"(
name: retry
steps:
  - id: flaky
    kind: fail
    times: 2
    class: unavailable
    retry: {max_attempts: 3, initial_delay: 10ms, multiplier: 2}
)");
  EXPECT_EQ(r.status, RunStatus::kCompleted);
  auto s = h.Steps(r.id);
  EXPECT_EQ(s["flaky"].attempt, 3);
  std::vector<int64_t> delays;
  for (const Event& e : h.Events(r.id)) {
    if (e.type == "step.failed") {
      EXPECT_TRUE(e.data["will_retry"].get<bool>());
      delays.push_back(e.data["retry_in_ms"].get<int64_t>());
    }
  }
  EXPECT_EQ(delays, (std::vector<int64_t>{10, 20}));
}

TEST(Engine, NonRetryableClassIsNotRetried) {
  Harness h;
  RunRecord r = h.RunYaml(R"(
name: noretry
steps:
  - id: bad_input
    kind: fail
    class: invalid
    retry: {max_attempts: 5, initial_delay: 1ms}
)");
  EXPECT_EQ(r.status, RunStatus::kFailed);
  EXPECT_EQ(h.Steps(r.id)["bad_input"].attempt, 1);
}

TEST(Engine, StepTimeoutIsTimeoutClass) {
  Harness h;
  RunRecord r = h.RunYaml(R"(
name: timeout
steps:
  - id: nap
    kind: sleep
    duration: 30s
    timeout: 100ms
)");
  EXPECT_EQ(r.status, RunStatus::kFailed);
  EXPECT_EQ(h.Steps(r.id)["nap"].error_class, ErrorClass::kTimeout);
}

}  // namespace
}  // namespace runloom
