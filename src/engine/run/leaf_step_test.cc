// Leaf steps on a real SQLite store: retries with backoff, classes that are
// not retried, step timeouts.
#include "runloom/engine.h"

#include "engine/run/run_execution.h"
#include "testing/engine_test_util.h"
#include "testing/status_matchers.h"

#include "absl/strings/str_cat.h"
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

// Issue 25, bounded steps: a kind that never ends by itself.
class HangingKind final : public StepKind {
 public:
  explicit HangingKind(absl::Duration default_timeout) : default_timeout_(default_timeout) {}
  absl::Status Validate(const StepDef&) const override { return absl::OkStatus(); }
  absl::Duration DefaultTimeout() const override { return default_timeout_; }
  absl::StatusOr<StepOutput> Execute(StepContext& ctx, const nlohmann::json&) override {
    while (!ctx.Stopping()) ctx.SleepUntil(ctx.clock()->Now() + absl::Milliseconds(10));
    return absl::CancelledError("stopped");
  }

 private:
  const absl::Duration default_timeout_;
};

EngineOptions WithHangingKind(absl::Duration default_timeout) {
  EngineOptions opts;
  opts.registry = StepRegistry::WithBuiltins();
  opts.registry->Register("hang", std::make_shared<HangingKind>(default_timeout));
  return opts;
}

TEST(Engine, AStepWithNoTimeoutIsBoundedByItsKindsDefault) {
  Harness h(WithHangingKind(absl::Milliseconds(100)));
  RunRecord r = h.RunYaml("name: hung\nsteps:\n  - id: h\n    kind: hang\n");
  EXPECT_EQ(r.status, RunStatus::kFailed);
  EXPECT_EQ(h.Steps(r.id)["h"].error_class, ErrorClass::kTimeout);
  EXPECT_NE(h.Steps(r.id)["h"].error.find("timed out after 100ms (the step kind's default"),
            std::string::npos)
      << h.Steps(r.id)["h"].error;
}

TEST(Engine, StepTimeoutsOverrideAKindsDefaultAndTheWorkflowOverridesBoth) {
  EngineOptions opts = WithHangingKind(absl::Hours(1));
  opts.step_timeouts["hang"] = absl::Milliseconds(100);
  opts.step_timeouts["exec"] = absl::Milliseconds(100);
  Harness h(std::move(opts));
  RunRecord hung = h.RunYaml("name: hung\nsteps:\n  - id: h\n    kind: hang\n");
  EXPECT_EQ(hung.status, RunStatus::kFailed);
  EXPECT_EQ(h.Steps(hung.id)["h"].error_class, ErrorClass::kTimeout);
  // The workflow's own bound wins over the operator's: a step's timeout,
  // defaults.timeout, and `none` written out.
  for (const char* head : {"name: own\nsteps:\n  - id: e\n    timeout: 5s\n",
                           "name: own\nsteps:\n  - id: e\n    timeout: none\n",
                           "name: own\ndefaults: {timeout: none}\nsteps:\n  - id: e\n"}) {
    const std::string yaml =
        absl::StrCat(head, "    kind: exec\n    command: [sh, -c, 'sleep 0.3; echo {}']\n");
    EXPECT_EQ(h.RunYaml(yaml).status, RunStatus::kCompleted) << yaml;
  }
  RunRecord bounded = h.RunYaml(
      "name: bounded\nsteps:\n  - id: e\n    kind: exec\n"
      "    command: [sh, -c, 'sleep 5; echo {}']\n");
  EXPECT_EQ(bounded.status, RunStatus::kFailed);
  EXPECT_EQ(h.Steps(bounded.id)["e"].error_class, ErrorClass::kTimeout);
}

}  // namespace
}  // namespace runloom
