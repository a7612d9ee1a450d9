// Engine semantics on a real SQLite store: trigger rules, loops, parallel
// deadlines, retries, resume, leases and fencing.
#include "runloom/engine.h"

#include "engine/engine_test_util.h"
#include "engine/run_execution.h"
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
  EXPECT_EQ(r.outcome, "approved");
  auto steps = h.Steps(r.id);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps["b"].output["echo"], "hello world");
  EXPECT_TRUE(r.lease_token.empty());  // a terminal status releases the lease
}

TEST(Engine, AFreshRunTakesItsLeaseInTheCommitOfItsFirstStepStart) {
  Harness h;
  RunRecord r = h.RunYaml(R"(
name: first-lease
steps:
  - id: a
    kind: noop
  - id: b
    kind: noop
)");
  ASSERT_EQ(r.status, RunStatus::kCompleted);
  std::vector<Event> ev = h.Events(r.id);
  ASSERT_GE(ev.size(), 4u);
  EXPECT_EQ(ev[1].type, "run.started");
  EXPECT_EQ(ev[1].data["attempt"], 1);
  EXPECT_EQ(ev[2].type, "step.started");
  EXPECT_EQ(ev[2].data["path"], "a");
  // One transaction stamps one time on everything it appends.
  EXPECT_EQ(ev[1].at, ev[2].at);
  EXPECT_EQ(r.attempts, 1);
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
  EXPECT_EQ(s["fanout[slow]/s1"].error_class, "timeout");
  EXPECT_EQ(s["fanout[slow]/s2"].state, StepState::kSkipped);
  EXPECT_EQ(s["fanout[quick]/q1"].state, StepState::kSucceeded);
  EXPECT_EQ(s["join"].output["quick"], 1);
  EXPECT_EQ(s["join"].output["slow"], "failed");
  EXPECT_EQ(s["fanout"].output["failed"], 1);
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
  EXPECT_EQ(h.Steps(r.id)["nap"].error_class, "timeout");
}

TEST(Engine, IdempotencyKeyReturnsSameRun) {
  Harness h;
  auto wf = LoadWorkflowYaml("name: idem\nsteps:\n  - {id: a, kind: noop}\n", "idem.yaml");
  ASSERT_OK(wf);
  StartRunRequest req;
  req.workflow = *wf;
  req.idempotency_key = "k1";
  auto a = h.engine->StartRun(req);
  auto b = h.engine->StartRun(req);
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_TRUE(a->created);
  EXPECT_FALSE(b->created);
  EXPECT_EQ(a->run.id, b->run.id);
}

TEST(Engine, BadInputsAreRefusedBeforeAnyWrite) {
  Harness h;
  auto wf = LoadWorkflowYaml(
      "name: typed\ninputs:\n  n: {type: integer, required: true}\nsteps:\n  - {id: a, kind: "
      "noop}\n",
      "typed.yaml");
  ASSERT_OK(wf);
  StartRunRequest req;
  req.workflow = *wf;
  req.inputs = {{"n", "not a number"}};
  EXPECT_THAT(h.engine->StartRun(req), StatusIs(absl::StatusCode::kInvalidArgument));
  req.inputs = {{"unknown", 1}, {"n", 1}};
  EXPECT_THAT(h.engine->StartRun(req), StatusIs(absl::StatusCode::kInvalidArgument));
  auto runs = h.engine->store()->ListRuns({});
  ASSERT_OK(runs);
  EXPECT_TRUE(runs->empty());
}

TEST(Engine, ResumeRerunsOnlyStepsWithoutRecords) {
  Harness h;
  auto wf = LoadWorkflowYaml(R"(
name: resume
steps:
  - {id: a, kind: count}
  - {id: b, kind: count}
  - {id: c, kind: count}
)",
                             "resume.yaml");
  ASSERT_OK(wf);
  auto started = h.engine->StartRun({.workflow = *wf});
  ASSERT_OK(started);
  const std::string id = started->run.id;
  // An earlier executor recorded `a` and then died: write its record with a
  // lease of our own, then let the lease lapse by giving the run back.
  Store* store = h.engine->store();
  auto lease = store->AcquireLease(id, "dead-executor", absl::Seconds(30), {});
  ASSERT_OK(lease);
  StepRecord rec;
  rec.run_id = id;
  rec.path = "a";
  rec.step_id = "a";
  rec.kind = "count";
  rec.output = {{"n", 100}};
  RunWrite w;
  w.run_id = id;
  w.lease_token = lease->token;
  w.steps = {rec};
  ASSERT_OK(store->Commit(w));
  RunWrite release;
  release.run_id = id;
  release.lease_token = lease->token;
  release.new_status = RunStatus::kQueued;
  ASSERT_OK(store->Commit(release));

  auto done = h.engine->ExecuteRun(id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCompleted);
  EXPECT_EQ(h.kind->count.load(), 2);  // b and c only
  EXPECT_EQ(h.Steps(id)["a"].output["n"], 100);
  bool saw_resume = false;
  for (const Event& e : h.Events(id)) {
    if (e.type == "run.started" && e.data["entry"] == "resume") saw_resume = true;
  }
  EXPECT_TRUE(saw_resume);
}

// A first execution sets up before its lease. If another executor leased
// the run in between (and recorded a step before its lease expired), the
// lease rider writes only the lease and the execution goes on as a resume.
class LeasedInBetween final : public StoreWrapper {
 public:
  LeasedInBetween(std::unique_ptr<Store> inner, SimulatedClock* clock)
      : StoreWrapper(std::move(inner)), clock_(clock) {}
  using StoreWrapper::AcquireLease;
  absl::StatusOr<Lease> AcquireLease(const std::string& run_id, const std::string& owner,
                                     absl::Duration ttl, std::vector<Event> events,
                                     const RunWrite* first) override {
    if (first != nullptr && !raced_.exchange(true)) {
      auto other = inner().AcquireLease(run_id, "other-executor", absl::Seconds(1), {});
      EXPECT_OK(other);
      RunWrite w;
      w.run_id = run_id;
      w.party = Party::kExecutor;
      w.lease_token = other.ok() ? other->token : "";
      StepRecord a;
      a.path = a.step_id = "a";
      a.kind = "count";
      a.output = {{"n", 0}, {"by", "other-executor"}};
      a.started_at = a.finished_at = clock_->Now();
      w.steps = {a};
      EXPECT_OK(inner().Commit(w));
      clock_->Advance(absl::Seconds(2));  // the other executor's lease expires
    }
    return inner().AcquireLease(run_id, owner, ttl, std::move(events), first);
  }

 private:
  SimulatedClock* const clock_;
  std::atomic<bool> raced_{false};
};

TEST(Engine, FirstExecutionLeasedInBetweenGoesOnAsAResume) {
  SimulatedClock clock;
  EngineOptions opts;
  opts.enable_sweeper = false;
  Harness h(opts, &clock, [&](std::unique_ptr<Store> inner) {
    return std::make_unique<LeasedInBetween>(std::move(inner), &clock);
  });
  RunRecord r = h.RunYaml(R"(
name: raced
steps:
  - {id: a, kind: count}
  - {id: b, kind: count}
)");
  EXPECT_EQ(r.status, RunStatus::kCompleted);
  EXPECT_EQ(r.attempts, 2);
  EXPECT_EQ(h.kind->count.load(), 1);  // only b: a was recorded by the other executor
  auto steps = h.Steps(r.id);
  EXPECT_EQ(steps["a"].output["by"], "other-executor");
  for (const Event& e : h.Events(r.id)) {
    EXPECT_FALSE(e.type == "step.started" && e.data.value("path", "") == "a") << e.data.dump();
  }
}

// Acceptance (issue 2, point 3): a stale executor — its lease expired and
// another executor took over — changes neither the run nor its events, and
// stops.
TEST(Engine, StaleExecutorIsFencedAndStops) {
  SimulatedClock clock;
  EngineOptions opts;
  opts.lease_ttl = absl::Seconds(10);
  opts.enable_sweeper = false;
  Harness h(opts, &clock);
  auto wf = LoadWorkflowYaml(R"(
name: stale
steps:
  - {id: slow, kind: count, block: true}
  - {id: after, kind: count}
)",
                             "stale.yaml");
  ASSERT_OK(wf);
  auto started = h.engine->StartRun({.workflow = *wf});
  ASSERT_OK(started);
  const std::string id = started->run.id;

  absl::StatusOr<RunRecord> stale_result;
  std::thread stale([&] { stale_result = h.engine->ExecuteRun(id); });
  h.kind->entered.WaitForNotification();

  // The stale executor's lease expires; another executor takes the run.
  clock.Advance(absl::Seconds(11));
  Store* store = h.engine->store();
  auto takeover = store->AcquireLease(id, "other-executor", absl::Seconds(60), {});
  ASSERT_OK(takeover);
  auto before_run = store->GetRun(id);
  auto before_events = store->ListEvents(id, 0, 1000);
  ASSERT_OK(before_run);
  ASSERT_OK(before_events);

  // Let the stale executor finish its step and try to record it.
  h.kind->release.Notify();
  stale.join();
  ASSERT_OK(stale_result);

  auto after_run = store->GetRun(id);
  auto after_events = store->ListEvents(id, 0, 1000);
  ASSERT_OK(after_run);
  ASSERT_OK(after_events);
  EXPECT_EQ(after_run->status, RunStatus::kRunning);
  EXPECT_EQ(after_run->lease_token, takeover->token);
  EXPECT_EQ(after_run->lease_owner, "other-executor");
  EXPECT_EQ(after_run->last_event_seq, before_run->last_event_seq);
  EXPECT_EQ(after_events->size(), before_events->size());
  auto steps = store->ListSteps(id, std::nullopt);
  ASSERT_OK(steps);
  EXPECT_TRUE(steps->empty());         // its step record was refused
  EXPECT_EQ(h.kind->count.load(), 1);  // and it never started `after`
  EXPECT_EQ(h.engine->stats().leases_lost, 1);
}

TEST(Engine, FailedRenewalStopsTheExecutorAtOnce) {
  EngineOptions opts;
  opts.lease_ttl = absl::Milliseconds(300);
  opts.enable_sweeper = false;
  Harness h(opts);
  auto wf = LoadWorkflowYaml(R"(
name: renew
steps:
  - {id: nap, kind: sleep, duration: 60s}
  - {id: after, kind: count}
)",
                             "renew.yaml");
  ASSERT_OK(wf);
  auto started = h.engine->StartRun({.workflow = *wf});
  ASSERT_OK(started);
  const std::string id = started->run.id;
  std::thread exec([&] { (void)h.engine->ExecuteRun(id); });
  // Wait for the step to start, then take the lease away (as an admin reset
  // or another executor would) so the next renewal fails.
  AwaitLastEvent(h.engine->store(), id, "step.started");
  RunWrite w;
  w.run_id = id;
  w.party = Party::kAdmin;
  w.new_status = RunStatus::kCancelled;
  ASSERT_OK(h.engine->store()->Commit(w));
  exec.join();  // returns long before the 60 s sleep would end
  EXPECT_EQ(h.kind->count.load(), 0);
  EXPECT_EQ(h.engine->stats().leases_lost, 1);
}

TEST(Engine, SweeperReenqueuesExpiredLeaseAndWorkerFinishes) {
  SimulatedClock clock;
  EngineOptions opts;
  opts.lease_ttl = absl::Seconds(10);
  opts.enable_sweeper = false;
  Harness h(opts, &clock);
  auto wf = LoadWorkflowYaml("name: sweep\nsteps:\n  - {id: a, kind: count}\n", "sweep.yaml");
  ASSERT_OK(wf);
  auto started = h.engine->StartRun({.workflow = *wf});
  ASSERT_OK(started);
  const std::string id = started->run.id;
  Store* store = h.engine->store();
  // An executor takes the run and dies without a trace.
  auto msgs = h.engine->transport()->Claim("dead", 10, absl::Seconds(600));
  ASSERT_OK(msgs);
  ASSERT_EQ(msgs->size(), 1u);
  ASSERT_OK(h.engine->transport()->Ack((*msgs)[0]));
  ASSERT_OK(store->AcquireLease(id, "dead", absl::Seconds(10), {}));
  // Not expired yet: nothing to do.
  EXPECT_EQ(*h.engine->SweepOnce(), 0);
  clock.Advance(absl::Seconds(11));
  EXPECT_EQ(*h.engine->SweepOnce(), 1);
  auto again = h.engine->transport()->Claim("live", 10, absl::Seconds(60));
  ASSERT_OK(again);
  ASSERT_EQ(again->size(), 1u);
  auto done = h.engine->ExecuteRun(id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCompleted);
  EXPECT_EQ(done->attempts, 2);
  bool saw_expiry = false;
  for (const Event& e : h.Events(id)) saw_expiry = saw_expiry || e.type == "run.lease_expired";
  EXPECT_TRUE(saw_expiry);
}

TEST(Engine, SweeperFailsRunPastAttemptCap) {
  SimulatedClock clock;
  EngineOptions opts;
  opts.lease_ttl = absl::Seconds(10);
  opts.max_attempts = 2;
  opts.enable_sweeper = false;
  Harness h(opts, &clock);
  auto wf = LoadWorkflowYaml("name: cap\nsteps:\n  - {id: a, kind: count}\n", "cap.yaml");
  ASSERT_OK(wf);
  auto started = h.engine->StartRun({.workflow = *wf});
  ASSERT_OK(started);
  const std::string id = started->run.id;
  Store* store = h.engine->store();
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK(store->AcquireLease(id, "crashy", absl::Seconds(10), {}));
    clock.Advance(absl::Seconds(11));
  }
  EXPECT_EQ(*h.engine->SweepOnce(), 1);
  auto run = store->GetRun(id);
  ASSERT_OK(run);
  EXPECT_EQ(run->status, RunStatus::kFailed);
  EXPECT_NE(run->error.find("attempt cap"), std::string::npos);
  EXPECT_EQ(h.kind->count.load(), 0);
}

TEST(Engine, PoolExecutesManyRunsExactlyOnceEach) {
  EngineOptions opts;
  opts.executors = 4;
  opts.idle_poll = absl::Milliseconds(5);
  Harness h(opts);
  auto wf = LoadWorkflowYaml(
      "name: many\nsteps:\n  - {id: a, kind: count}\n  - {id: b, kind: noop}\n", "many.yaml");
  ASSERT_OK(wf);
  std::vector<std::string> ids;
  for (int i = 0; i < 50; ++i) {
    auto r = h.engine->StartRun({.workflow = *wf});
    ASSERT_OK(r);
    ids.push_back(r->run.id);
  }
  h.engine->Start();
  for (const std::string& id : ids) {
    auto done = h.engine->AwaitRun(id, RealClock()->Now() + absl::Seconds(30));
    ASSERT_OK(done);
    EXPECT_EQ(done->status, RunStatus::kCompleted);
  }
  h.engine->Stop();
  EXPECT_EQ(h.kind->count.load(), 50);
}

TEST(Engine, ExecutorThreadsRunUnderBatchSchedulingUnlessTurnedOff) {
  for (bool batch : {true, false}) {
    EngineOptions opts;
    opts.executors = 1;
    opts.idle_poll = absl::Milliseconds(5);
    opts.batch_scheduling = batch;
    Harness h(opts);
    auto wf = LoadWorkflowYaml("name: policy\nsteps:\n  - {id: a, kind: count}\n", "p.yaml");
    ASSERT_OK(wf);
    auto r = h.engine->StartRun({.workflow = *wf});
    ASSERT_OK(r);
    h.engine->Start();
    auto done = h.engine->AwaitRun(r->run.id, RealClock()->Now() + absl::Seconds(30));
    h.engine->Stop();
    ASSERT_OK(done);
    EXPECT_EQ(h.Steps(r->run.id)["a"].output["sched_policy"], batch ? SCHED_BATCH : SCHED_OTHER)
        << "batch_scheduling=" << batch;
  }
}

TEST(Engine, StopReleasesHeldRunsToTheQueue) {
  EngineOptions opts;
  opts.executors = 1;
  opts.drain_timeout = absl::Milliseconds(100);
  opts.idle_poll = absl::Milliseconds(5);
  Harness h(opts);
  auto wf = LoadWorkflowYaml(R"(
name: drain
steps:
  - {id: nap, kind: sleep, duration: 60s}
)",
                             "drain.yaml");
  ASSERT_OK(wf);
  auto started = h.engine->StartRun({.workflow = *wf});
  ASSERT_OK(started);
  h.engine->Start();
  for (int i = 0; i < 500 && h.engine->ActiveRuns() == 0; ++i) {
    RealClock()->SleepFor(absl::Milliseconds(5));
  }
  h.engine->Stop();
  auto run = h.engine->store()->GetRun(started->run.id);
  ASSERT_OK(run);
  EXPECT_EQ(run->status, RunStatus::kQueued);
  EXPECT_TRUE(run->lease_token.empty());
  EXPECT_EQ(h.engine->stats().runs_released, 1);
}

TEST(Engine, UnknownStepKindIsALoadError) {
  auto wf = LoadWorkflowYaml("name: k\nsteps:\n  - {id: a, kind: teleport}\n", "k.yaml");
  ASSERT_OK(wf);
  auto registry = StepRegistry::WithBuiltins();
  absl::Status s = ValidateStepKinds(*wf, *registry);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(s.message().find("k.yaml:3"), std::string::npos) << s;
  EXPECT_NE(s.message().find("teleport"), std::string::npos) << s;
}

}  // namespace
}  // namespace runloom
