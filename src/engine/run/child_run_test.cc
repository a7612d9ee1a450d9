// Child runs (issue 23): a `kind: run` step admits its child under a key
// derived from the parent, the step's path and revision (a resumed parent
// never starts a second child), parks the parent without a lease until the
// child ends, and takes the child's terminal status as its result. The
// child's end wakes the parent by one signal; if that signal is lost, the
// parent's poll timer finds the end. Cancelling a parent cancels its
// children (at once, or by the sweeper's orphan pass); the child's budget is
// carved from the parent's; a depth limit stops recursion.
#include "engine/run/child_run.h"

#include "testing/engine_test_util.h"
#include "testing/status_matchers.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace runloom {
namespace child_run_test {

using ::runloom::testing::StatusIs;

constexpr char kChild[] = R"(
name: summarize
inputs:
  topic: {type: string}
steps:
  - id: write
    kind: noop
    output: {summary: "about {{ inputs.topic }}"}
)";

constexpr char kParent[] = R"(
name: digest
inputs:
  topic: {type: string}
steps:
  - {id: before, kind: noop}
  - id: sum
    kind: run
    workflow: summarize
    inputs: {topic: "{{ inputs.topic }}!"}
  - id: after
    kind: noop
    output: {got: "{{ steps.sum.output.outputs.write.summary }}"}
)";

Workflow Load(const std::string& yaml) {
  absl::StatusOr<Workflow> wf = LoadWorkflowYaml(yaml, "test.yaml");
  EXPECT_OK(wf);
  return wf.ok() ? *wf : Workflow{};
}

std::string Start(Harness& h, const std::string& yaml, nlohmann::json inputs = {{"topic", "x"}},
                  std::optional<int64_t> budget = std::nullopt) {
  auto started = h.engine->StartRun(
      {.workflow = Load(yaml), .inputs = std::move(inputs), .budget_micros = budget});
  EXPECT_OK(started);
  return started.ok() ? started->run.id : "";
}

std::vector<RunRecord> Children(Harness& h, const std::string& parent) {
  RunFilter f;
  f.parent_run_id = parent;
  f.limit = 0;
  absl::StatusOr<std::vector<RunRecord>> runs = h.engine->store()->ListRuns(f);
  EXPECT_OK(runs);
  return runs.ok() ? *runs : std::vector<RunRecord>{};
}

TEST(ChildRuns, ARunStepStartsItsChildParksAndTakesItsOutputs) {
  SimulatedClock clock;
  Harness h({}, &clock);
  ASSERT_OK(h.engine->RegisterWorkflow(Load(kChild)));
  const std::string id = Start(h, kParent);
  absl::StatusOr<RunRecord> parked = h.engine->ExecuteRun(id);
  ASSERT_OK(parked);
  ASSERT_EQ(parked->status, RunStatus::kWaiting);
  EXPECT_TRUE(parked->lease_token.empty());
  std::vector<RunRecord> children = Children(h, id);
  ASSERT_EQ(children.size(), 1u);
  const RunRecord& child = children[0];
  EXPECT_EQ(child.workflow_name, "summarize");
  EXPECT_EQ(child.parent_run_id, id);
  EXPECT_EQ(child.idempotency_key, engine_internal::ChildKey(id, 1, "sum", 1));
  EXPECT_EQ(child.inputs, (nlohmann::json{{"topic", "x!"}}));
  EXPECT_EQ(child.context["parent"]["depth"], 1);
  EXPECT_EQ(parked->wait_signal, engine_internal::ChildSignalName(child.id));
  std::vector<Event> events = h.Events(id);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().type, "run.waiting");
  EXPECT_EQ(events.back().data["for"], "child");
  EXPECT_EQ(events.back().data["child_run_id"], child.id);
  EXPECT_EQ(h.Events(child.id).front().data["parent_run_id"], id);

  // The child's end wakes the parent (one compare-and-set, as a signal).
  absl::StatusOr<RunRecord> child_done = h.engine->ExecuteRun(child.id);
  ASSERT_OK(child_done);
  EXPECT_EQ(child_done->status, RunStatus::kCompleted);
  EXPECT_EQ(h.Run(id).status, RunStatus::kQueued);
  absl::StatusOr<RunRecord> done = h.engine->ExecuteRun(id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCompleted);
  std::map<std::string, StepRecord> steps = h.Steps(id);
  EXPECT_EQ(steps["sum"].output,
            (nlohmann::json{{"run_id", child.id},
                            {"status", "completed"},
                            {"outputs", {{"write", {{"summary", "about x!"}}}}}}));
  EXPECT_EQ(steps["after"].output, (nlohmann::json{{"got", "about x!"}}));
  EXPECT_EQ(steps["before"].attempt, 1);
  EXPECT_EQ(Children(h, id).size(), 1u);
  // The end signal was consumed: nothing is left in the mailbox.
  absl::StatusOr<std::vector<SignalRecord>> mailbox = h.engine->store()->ListSignals(id, 0, 10);
  ASSERT_OK(mailbox);
  ASSERT_EQ(mailbox->size(), 1u);
  EXPECT_FALSE(mailbox->front().consumed_by.empty());
}

TEST(ChildRuns, AResumedParentFindsTheChildItStartedAndALostEndIsFoundByItsPoll) {
  SimulatedClock clock;
  Harness h({}, &clock);
  ASSERT_OK(h.engine->RegisterWorkflow(Load(kChild)));
  const std::string id = Start(h, kParent);
  ASSERT_EQ(h.engine->ExecuteRun(id)->status, RunStatus::kWaiting);
  const std::string child = Children(h, id).at(0).id;
  // The poll timer wakes the parent while the child still runs: it parks
  // again on the same child, starting no other.
  for (int i = 0; i < 3; ++i) {
    clock.Advance(absl::Minutes(2));
    ASSERT_OK(h.engine->SweepOnce());
    ASSERT_EQ(h.Run(id).status, RunStatus::kQueued);
    ASSERT_EQ(h.engine->ExecuteRun(id)->status, RunStatus::kWaiting);
  }
  ASSERT_EQ(Children(h, id).size(), 1u);
  // The child ends without its parent being told (its process died between
  // the two commits): written to the store directly.
  RunWrite w;
  w.run_id = child;
  w.party = Party::kCancel;
  w.expected = {RunStatus::kQueued};
  w.new_status = RunStatus::kCancelled;
  w.error = "cancelled by test";
  w.events.push_back(RunFinishedEvent(child, {.status = RunStatus::kCancelled, .error = *w.error}));
  ASSERT_OK(h.engine->store()->Commit(w));
  EXPECT_EQ(h.Run(id).status, RunStatus::kWaiting);
  clock.Advance(absl::Minutes(2));
  ASSERT_OK(h.engine->SweepOnce());
  absl::StatusOr<RunRecord> done = h.engine->ExecuteRun(id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kFailed);
  std::map<std::string, StepRecord> steps = h.Steps(id);
  EXPECT_EQ(steps["sum"].state, StepState::kFailed);
  EXPECT_EQ(steps["sum"].error_class, ErrorClass::kError);
  EXPECT_THAT(steps["sum"].error, ::testing::HasSubstr("ended cancelled"));
  EXPECT_EQ(Children(h, id).size(), 1u);
}

TEST(ChildRuns, AFailedChildFailsTheStepAndTheRetryPolicyStartsANewChild) {
  Harness h;
  ASSERT_OK(h.engine->RegisterWorkflow(Load(R"(
name: flaky
steps:
  - {id: boom, kind: fail, message: nope}
)")));
  const std::string id = Start(h, R"(
name: parent
steps:
  - id: try
    kind: run
    workflow: flaky
    retry: {max_attempts: 2}
)",
                               nlohmann::json::object());
  for (int round = 0; round < 2; ++round) {
    ASSERT_EQ(h.engine->ExecuteRun(id)->status, RunStatus::kWaiting);
    std::vector<RunRecord> children = Children(h, id);
    ASSERT_EQ(children.size(), static_cast<size_t>(round + 1));
    const std::string newest = children.front().id;  // newest first
    EXPECT_EQ(children.front().idempotency_key, engine_internal::ChildKey(id, 1, "try", round + 1));
    EXPECT_EQ(h.engine->ExecuteRun(newest)->status, RunStatus::kFailed);
  }
  absl::StatusOr<RunRecord> done = h.engine->ExecuteRun(id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kFailed);
  std::map<std::string, StepRecord> steps = h.Steps(id);
  EXPECT_EQ(steps["try"].attempt, 2);
  EXPECT_EQ(steps["try"].error_class, ErrorClass::kError);
  EXPECT_THAT(steps["try"].error, ::testing::HasSubstr("ended failed"));
  // Each failed attempt is told once, however often the parent walked past
  // it (it executed three times).
  int failed_events = 0;
  for (const Event& e : h.Events(id)) {
    if (e.type == "step.failed") {
      ++failed_events;
      EXPECT_EQ(e.data["will_retry"], e.data["attempt"] == 1) << e.data.dump();
    }
  }
  EXPECT_EQ(failed_events, 2);
  // Both end signals were consumed (one with the retry, one with the result).
  absl::StatusOr<std::vector<SignalRecord>> mailbox = h.engine->store()->ListSignals(id, 0, 10);
  ASSERT_OK(mailbox);
  ASSERT_EQ(mailbox->size(), 2u);
  for (const SignalRecord& s : *mailbox) EXPECT_FALSE(s.consumed_by.empty()) << s.name;
}

TEST(ChildRuns, CancellingAParentCancelsItsChildrenAndTheSweeperCatchesThoseItMissed) {
  Harness h;
  ASSERT_OK(h.engine->RegisterWorkflow(Load(kChild)));
  const std::string a = Start(h, kParent);
  ASSERT_EQ(h.engine->ExecuteRun(a)->status, RunStatus::kWaiting);
  const std::string a_child = Children(h, a).at(0).id;
  ASSERT_OK(h.engine->Cancel(a, "operator:eve"));
  EXPECT_EQ(h.Run(a).status, RunStatus::kCancelled);
  EXPECT_EQ(h.Run(a_child).status, RunStatus::kCancelled);
  EXPECT_THAT(h.Run(a_child).error, ::testing::HasSubstr("via parent " + a));

  // A parent cancelled behind the engine's back (its canceller died before
  // reaching the children): the sweeper's orphan pass cancels the child.
  const std::string b = Start(h, kParent);
  ASSERT_EQ(h.engine->ExecuteRun(b)->status, RunStatus::kWaiting);
  const std::string b_child = Children(h, b).at(0).id;
  RunWrite w;
  w.run_id = b;
  w.party = Party::kCancel;
  w.expected = {RunStatus::kWaiting};
  w.new_status = RunStatus::kCancelled;
  w.error = "cancelled by test";
  w.events.push_back(RunFinishedEvent(b, {.status = RunStatus::kCancelled, .error = *w.error}));
  ASSERT_OK(h.engine->store()->Commit(w));
  absl::StatusOr<std::vector<std::string>> orphans =
      h.engine->store()->ListOrphanedChildren(10);
  ASSERT_OK(orphans);
  EXPECT_THAT(*orphans, ::testing::ElementsAre(b_child));
  ASSERT_OK(h.engine->SweepOnce());
  EXPECT_EQ(h.Run(b_child).status, RunStatus::kCancelled);
  orphans = h.engine->store()->ListOrphanedChildren(10);
  ASSERT_OK(orphans);
  EXPECT_TRUE(orphans->empty());
}

TEST(ChildRuns, ARerunOfAParentWaitingForItsChildCancelsThatChild) {
  Harness h;
  ASSERT_OK(h.engine->RegisterWorkflow(Load(kChild)));
  const std::string id = Start(h, R"(
name: phased
steps:
  - {id: before, kind: noop, phase: start}
  - {id: sum, kind: run, workflow: summarize, inputs: {topic: x}, phase: child}
)",
                               nlohmann::json::object());
  ASSERT_EQ(h.engine->ExecuteRun(id)->status, RunStatus::kWaiting);
  const std::string old_child = Children(h, id).at(0).id;
  absl::StatusOr<RunRecord> rerun = h.engine->Rerun(id, "child", "", "operator:eve");
  ASSERT_OK(rerun);
  EXPECT_EQ(rerun->revision, 2);
  EXPECT_EQ(h.Run(old_child).status, RunStatus::kCancelled);
  // The new revision starts a child of its own, which the cancel spares.
  ASSERT_EQ(h.engine->ExecuteRun(id)->status, RunStatus::kWaiting);
  std::vector<RunRecord> children = Children(h, id);
  ASSERT_EQ(children.size(), 2u);
  EXPECT_EQ(children.front().idempotency_key, engine_internal::ChildKey(id, 2, "sum", 1));
  EXPECT_EQ(children.front().status, RunStatus::kQueued);
}

TEST(ChildRuns, AChildsBudgetIsCarvedFromWhatItsParentHasLeft) {
  Harness h;
  ASSERT_OK(h.engine->RegisterWorkflow(Load(R"(
name: summarize
budget: 5
inputs:
  topic: {type: string}
steps:
  - {id: write, kind: noop}
)")));
  const std::string id = Start(h, kParent, {{"topic", "x"}}, /*budget=*/1500);
  ASSERT_EQ(h.engine->ExecuteRun(id)->status, RunStatus::kWaiting);
  const RunRecord child = Children(h, id).at(0);
  EXPECT_EQ(child.context["budget"]["limit_micros"], 1500);  // not the child's own $5
}

TEST(ChildRuns, ADepthLimitStopsAWorkflowThatStartsItself) {
  Harness h;
  constexpr char kSelf[] = R"(
name: forever
steps:
  - {id: again, kind: run, workflow: forever}
)";
  ASSERT_OK(h.engine->RegisterWorkflow(Load(kSelf)));
  std::vector<std::string> chain = {Start(h, kSelf, nlohmann::json::object())};
  while (true) {
    absl::StatusOr<RunRecord> r = h.engine->ExecuteRun(chain.back());
    ASSERT_OK(r);
    if (r->status != RunStatus::kWaiting) {
      EXPECT_EQ(r->status, RunStatus::kFailed);
      EXPECT_THAT(r->error, ::testing::HasSubstr("the limit is 8"));
      break;
    }
    ASSERT_LE(chain.size(), 20u);
    chain.push_back(Children(h, chain.back()).at(0).id);
  }
  EXPECT_EQ(chain.size(), static_cast<size_t>(engine_internal::kMaxChildDepth + 1));
  // Each end wakes the run above it, which fails in turn.
  for (size_t i = chain.size() - 1; i-- > 0;) {
    ASSERT_EQ(h.Run(chain[i]).status, RunStatus::kQueued) << i;
    ASSERT_EQ(h.engine->ExecuteRun(chain[i])->status, RunStatus::kFailed) << i;
  }
}

// A child's outputs enter the parent's step record: over 1 MiB of JSON, the
// run step fails (class invalid, not retried) and nothing of them is kept.
TEST(ChildRuns, AChildsOutputsOverOneMebibyteFailTheStepAndAreNotKept) {
  SimulatedClock clock;
  Harness h({}, &clock);
  ASSERT_OK(h.engine->RegisterWorkflow(Load(R"(
name: bulky
inputs:
  blob: {type: string}
steps:
  - {id: a, kind: noop, output: {v: "{{ inputs.blob }}"}}
  - {id: b, kind: noop, output: {v: "{{ inputs.blob }}"}}
  - {id: c, kind: noop, output: {v: "{{ inputs.blob }}"}}
)")));
  const std::string id = Start(h, R"(
name: holder
inputs:
  blob: {type: string}
steps:
  - id: take
    kind: run
    workflow: bulky
    inputs: {blob: "{{ inputs.blob }}"}
    retry: {max_attempts: 3}
)",
                               {{"blob", std::string(400 * 1024, 'x')}});
  absl::StatusOr<RunRecord> parked = h.engine->ExecuteRun(id);
  ASSERT_OK(parked);
  ASSERT_EQ(parked->status, RunStatus::kWaiting);
  std::vector<RunRecord> children = Children(h, id);
  ASSERT_EQ(children.size(), 1u);
  absl::StatusOr<RunRecord> child = h.engine->ExecuteRun(children[0].id);
  ASSERT_OK(child);
  ASSERT_EQ(child->status, RunStatus::kCompleted);
  absl::StatusOr<RunRecord> done = h.engine->ExecuteRun(id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kFailed);
  StepRecord take = h.Steps(id)["take"];
  EXPECT_EQ(take.state, StepState::kFailed);
  EXPECT_THAT(take.error, ::testing::HasSubstr("outputs are over 1048576 bytes"));
  EXPECT_LT(take.output.dump().size(), 4096u) << "the outputs were not kept";
  // Not retried: one child only.
  EXPECT_EQ(Children(h, id).size(), 1u);
}

TEST(ChildRuns, BadRunStepsAreRefusedAtLoadNamingTheKey) {
  Harness h;
  auto refused = [&](const std::string& steps) {
    absl::StatusOr<Workflow> wf = LoadWorkflowYaml("name: p\nsteps:\n" + steps, "p.yaml");
    if (!wf.ok()) return std::string(wf.status().message());
    absl::Status s = ValidateStepKinds(*wf, *StepRegistry::WithLocalBuiltins());
    return std::string(s.message());
  };
  EXPECT_THAT(refused("  - {id: c, kind: run}\n"), ::testing::HasSubstr("needs `workflow:`"));
  EXPECT_THAT(refused("  - {id: c, kind: run, workflow: Bad Name}\n"),
              ::testing::HasSubstr("is not a workflow name"));
  EXPECT_THAT(refused("  - {id: c, kind: run, workflow: w, version: -1}\n"),
              ::testing::HasSubstr("version: -1"));
  EXPECT_THAT(refused("  - {id: c, kind: run, workflow: w, inputs: [1]}\n"),
              ::testing::HasSubstr("inputs: must be a mapping"));
  EXPECT_THAT(refused("  - {id: c, kind: run, workflow: w, wait: 1}\n"),
              ::testing::HasSubstr("unknown key 'wait'"));
  EXPECT_THAT(refused("  - {id: c, kind: run, workflow: w, timeout: 5m}\n"),
              ::testing::HasSubstr("takes no timeout"));
  EXPECT_THAT(refused("  - id: p\n    kind: parallel\n    branches:\n      - name: a\n        steps:\n"
                      "          - {id: c, kind: run, workflow: w}\n"),
              ::testing::HasSubstr("cannot sit inside a parallel branch"));
  // A child workflow missing from the catalog fails the step, class invalid.
  const std::string id = Start(h, "name: lonely\nsteps:\n  - {id: c, kind: run, workflow: nowhere}\n",
                               nlohmann::json::object());
  absl::StatusOr<RunRecord> done = h.engine->ExecuteRun(id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kFailed);
  EXPECT_EQ(h.Steps(id)["c"].error_class, ErrorClass::kInvalid);
  EXPECT_THAT(h.Steps(id)["c"].error, ::testing::HasSubstr("nowhere"));
}

}  // namespace child_run_test
}  // namespace runloom
