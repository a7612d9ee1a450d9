// Fenced writes on a real SQLite store: the first lease riding on the first
// write, resume from recorded steps, a lease taken in between, stale
// executors fenced off.
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
  absl::StatusOr<Lease> AcquireLease(LeaseRequest request) override {
    const std::string run_id = request.run_id;
    if (request.first.has_value() && !raced_.exchange(true)) {
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
    return inner().AcquireLease(std::move(request));
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

// The lease keeper's renewal can race a run's last write: the renewal
// arrives after the terminal status released the lease and is refused. The
// writer says a write ending the lease has begun (RunWriter::releasing), so
// the keeper does not take that refusal for a lease lost; a refused ending
// write does not count.
TEST(Engine, AWriterSaysWhenItsWriteEndsTheLease) {
  Harness h;
  auto wf = LoadWorkflowYaml("name: ending\nsteps:\n  - {id: a, kind: noop}\n", "ending.yaml");
  ASSERT_OK(wf);
  auto started = h.engine->StartRun({.workflow = *wf});
  ASSERT_OK(started);
  const std::string id = started->run.id;
  Store* store = h.engine->store();
  auto lease = store->AcquireLease(id, "executor", absl::Seconds(30), {});
  ASSERT_OK(lease);
  engine_internal::StopSource root;
  engine_internal::RunWriter writer(store, id, *lease, std::nullopt, root);
  RunWrite step;
  step.context = nlohmann::json{{"k", 1}};
  ASSERT_OK(writer.Write(step));
  EXPECT_FALSE(writer.releasing()) << "a write that keeps the run running keeps the lease";

  // Refused (another holder's token): nothing ended, the flag falls back.
  engine_internal::StopSource other_root;
  engine_internal::RunWriter stale(store, id, Lease{.token = "not-the-token"}, std::nullopt,
                                   other_root);
  RunWrite stale_end;
  stale_end.new_status = RunStatus::kCompleted;
  EXPECT_FALSE(stale.Write(stale_end).ok());
  EXPECT_FALSE(stale.releasing());

  RunWrite end;
  end.new_status = RunStatus::kCompleted;
  ASSERT_OK(writer.Write(end));
  EXPECT_TRUE(writer.releasing());
  // The keeper's renewal, arriving after: refused, and the writer says why.
  EXPECT_FALSE(store->RenewLease(id, lease->token, absl::Seconds(30)).ok());
  EXPECT_FALSE(root.stopped());
}

}  // namespace
}  // namespace runloom
