// The graph walk on a real SQLite store: sequences, trigger rules and skip
// propagation, `when:`, the outcome template, loops, parallel deadlines.
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

TEST(Engine, SequentialStepsCompleteAndRecordOutputs) {
  Harness h;
  RunRecord r = h.RunYaml(R"(
name: seq
inputs:
  who: {type: string, default: world}
steps:
  - id: a
    kind: noop
    output: {greeting: "hello {{ inputs.who }}"}
  - id: b
    kind: count
    echo: "{{ steps.a.output.greeting }}"
)");
  EXPECT_EQ(r.status, RunStatus::kCompleted);
  EXPECT_EQ(r.outcome, "");  // no `outcome:`: the status alone
  auto steps = h.Steps(r.id);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps["b"].output["echo"], "hello world");
  EXPECT_TRUE(r.lease_token.empty());  // a terminal status releases the lease
}

TEST(Engine, TriggerRulesAndSkipPropagation) {
  Harness h;
  RunRecord r = h.RunYaml(R"(
name: dag
steps:
  - id: start
    kind: noop
  - id: bad
    kind: fail
    needs: [start]
  - id: after_bad
    kind: noop
    needs: [bad]
  - id: skipped_child
    kind: noop
    needs: [after_bad]
  - id: cleanup
    kind: noop
    needs: [bad, after_bad]
    trigger: all_done
  - id: either
    kind: noop
    needs: [start, bad]
    trigger: one_success
  - id: none_failed
    kind: noop
    needs: [after_bad, start]
    trigger: none_failed_min_one_success
)");
  EXPECT_EQ(r.status, RunStatus::kFailed);
  auto s = h.Steps(r.id);
  EXPECT_EQ(s["bad"].state, StepState::kFailed);
  EXPECT_EQ(s["after_bad"].state, StepState::kSkipped);
  EXPECT_EQ(s["skipped_child"].state, StepState::kSkipped);
  EXPECT_EQ(s["cleanup"].state, StepState::kSucceeded);
  EXPECT_EQ(s["either"].state, StepState::kSucceeded);
  EXPECT_EQ(s["none_failed"].state, StepState::kSucceeded);
  EXPECT_NE(r.error.find("bad"), std::string::npos) << r.error;
}

TEST(Engine, AllowFailureAndOutcomeTemplate) {
  Harness h;
  RunRecord r = h.RunYaml(R"(
name: outcome
outcome: "{{ steps.decide.output.verdict }}"
steps:
  - id: flaky
    kind: fail
    allow_failure: true
  - id: decide
    kind: noop
    needs: []
    output: {verdict: rejected}
)");
  EXPECT_EQ(r.status, RunStatus::kRejected);
  EXPECT_EQ(r.outcome, "rejected");
}

TEST(Engine, WhenFalseSkips) {
  Harness h;
  RunRecord r = h.RunYaml(R"(
name: when
inputs:
  mode: {type: string, default: fast}
steps:
  - id: slow_path
    kind: count
    when: 'inputs.mode == "slow"'
  - id: fast_path
    kind: count
    needs: []
    when: 'inputs.mode == "fast"'
)");
  EXPECT_EQ(r.status, RunStatus::kCompleted);
  EXPECT_EQ(h.kind->count.load(), 1);
  EXPECT_EQ(h.Steps(r.id)["slow_path"].state, StepState::kSkipped);
}

TEST(Engine, LoopRunsUntilConditionWithIterationPaths) {
  Harness h;
  RunRecord r = h.RunYaml(R"(
name: loop
steps:
  - id: refine
    kind: loop
    max_iterations: 5
    until: 'steps.edit.output.n == 3'
    body:
      - id: write
        kind: noop
        output: {round: "{{ loop.iteration }}"}
      - id: edit
        kind: count
  - id: publish
    kind: noop
    output: {rounds: "{{ steps.refine.output.iterations }}"}
)");
  EXPECT_EQ(r.status, RunStatus::kCompleted);
  auto s = h.Steps(r.id);
  EXPECT_TRUE(s.count("refine[1]/write"));
  EXPECT_TRUE(s.count("refine[3]/edit"));
  EXPECT_FALSE(s.count("refine[4]/edit"));
  EXPECT_EQ(s["refine[2]/write"].output["round"], 2);
  EXPECT_EQ(s["publish"].output["rounds"], 3);
  EXPECT_EQ(s["refine"].output["converged"], true);
}

TEST(Engine, ParallelBranchPastDeadlineIsFailedAndJoinFires) {
  Harness h;
  RunRecord r = h.RunYaml(R"(
name: par
steps:
  - id: fanout
    kind: parallel
    deadline: 300ms
    branches:
      - name: quick
        steps:
          - {id: q1, kind: noop, output: {v: 1}}
      - name: slow
        steps:
          - {id: s1, kind: sleep, duration: 30s}
          - {id: s2, kind: noop}
  - id: join
    kind: noop
    output: {quick: "{{ steps.q1.output.v }}", slow: "{{ steps.s1.status }}"}
)");
  EXPECT_EQ(r.status, RunStatus::kCompleted) << r.error;
  auto s = h.Steps(r.id);
  EXPECT_EQ(s["fanout[slow]/s1"].state, StepState::kFailed);
  EXPECT_EQ(s["fanout[slow]/s1"].error_class, ErrorClass::kTimeout);
  EXPECT_EQ(s["fanout[slow]/s2"].state, StepState::kSkipped);
  EXPECT_EQ(s["fanout[quick]/q1"].state, StepState::kSucceeded);
  EXPECT_EQ(s["join"].output["quick"], 1);
  EXPECT_EQ(s["join"].output["slow"], "failed");
  EXPECT_EQ(s["fanout"].output["failed"], 1);
}

// Reference 003: an error (not a deadline) inside one branch fails that
// branch only; the join fires with the branches that succeeded.
TEST(Engine, ErrorInAParallelBranchIsFailedAndJoinFires) {
  Harness h;
  RunRecord r = h.RunYaml(R"(
name: par_error
steps:
  - id: fanout
    kind: parallel
    branches:
      - name: good
        steps:
          - {id: g1, kind: noop, output: {v: 1}}
      - name: bad
        steps:
          - {id: b1, kind: fail, message: the specialist crashed}
          - {id: b2, kind: noop}
  - id: join
    kind: noop
    output: {good: "{{ steps.g1.output.v }}", bad: "{{ steps.b1.status }}"}
)");
  EXPECT_EQ(r.status, RunStatus::kCompleted) << r.error;
  auto s = h.Steps(r.id);
  EXPECT_EQ(s["fanout[bad]/b1"].state, StepState::kFailed);
  EXPECT_EQ(s["fanout[bad]/b1"].error_class, ErrorClass::kError);
  EXPECT_NE(s["fanout[bad]/b1"].error.find("the specialist crashed"), std::string::npos);
  EXPECT_EQ(s["fanout[bad]/b2"].state, StepState::kSkipped);
  EXPECT_EQ(s["fanout[good]/g1"].state, StepState::kSucceeded);
  EXPECT_EQ(s["fanout"].state, StepState::kSucceeded);
  EXPECT_EQ(s["fanout"].output["failed"], 1);
  EXPECT_EQ(s["join"].output["good"], 1);
  EXPECT_EQ(s["join"].output["bad"], "failed");
}

}  // namespace
}  // namespace runloom
