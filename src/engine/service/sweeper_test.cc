// The sweeper on a real SQLite store: expired leases re-enqueued, the
// attempt cap.
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

EngineOptions SweepOptions() {
  EngineOptions opts;
  opts.lease_ttl = absl::Seconds(10);
  opts.enable_sweeper = false;
  return opts;
}

// An executor claims `id`'s message, acks it, takes the run's lease for 10 s
// and dies without a trace.
void LeaseAndDie(Harness& h, const std::string& id) {
  auto msgs = h.engine->transport()->Claim("dead", 10, absl::Seconds(600));
  ASSERT_OK(msgs);
  ASSERT_EQ(msgs->size(), 1u);
  ASSERT_OK(h.engine->transport()->Ack((*msgs)[0]));
  ASSERT_OK(h.engine->store()->AcquireLease(id, "dead", absl::Seconds(10), {}));
}

// LeaseAndDie, after reserving `amount` micro-units for step "a" of tenant
// acme under the lease that dies.
void LeaseReserveAndDie(Harness& h, const std::string& id, int64_t amount) {
  ASSERT_NO_FATAL_FAILURE(LeaseAndDie(h, id));
  auto run = h.engine->store()->GetRun(id);
  ASSERT_OK(run);
  BudgetRequest request;
  request.key.run_id = id;
  request.key.step_path = "a";
  request.key.attempt = 1;
  request.key.lease_token = run->lease_token;
  request.tenant = "acme";
  request.amount_micros = amount;
  auto reserved = h.engine->store()->Reserve(request);
  ASSERT_OK(reserved);
  ASSERT_TRUE(reserved->granted);
}

// A started run of a one-step workflow; `top` adds top-level keys.
std::string StartOneStep(Harness& h, const std::string& top = "") {
  auto wf = LoadWorkflowYaml(top + "name: sweep\nsteps:\n  - {id: a, kind: count}\n", "sweep.yaml");
  EXPECT_OK(wf);
  if (!wf.ok()) return "";
  auto started = h.engine->StartRun({.workflow = *wf});
  EXPECT_OK(started);
  return started.ok() ? started->run.id : "";
}

TEST(Engine, SweeperReenqueuesExpiredLeaseAndWorkerFinishes) {
  SimulatedClock clock;
  Harness h(SweepOptions(), &clock);
  const std::string id = StartOneStep(h);
  ASSERT_NO_FATAL_FAILURE(LeaseAndDie(h, id));
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

// The budget reservations of an executor that died with the lease are
// released by the sweep that recovers the run: nothing stays reserved, and
// the amount is charged (its call may have been answered and paid).
TEST(Engine, SweeperReleasesTheDeadExecutorsReservations) {
  SimulatedClock clock;
  Harness h(SweepOptions(), &clock);
  Store* store = h.engine->store();
  ASSERT_OK(store->SetTenantBudget("acme", 1'000'000));
  const std::string id = StartOneStep(h);
  ASSERT_NO_FATAL_FAILURE(LeaseReserveAndDie(h, id, 400'000));
  clock.Advance(absl::Seconds(11));
  EXPECT_EQ(*h.engine->SweepOnce(), 1);
  auto tenants = store->ListTenantBudgets();
  ASSERT_OK(tenants);
  ASSERT_EQ(tenants->size(), 1u);
  EXPECT_EQ((*tenants)[0].figures.reserved_micros, 0);
  EXPECT_EQ((*tenants)[0].figures.spent_micros, 400'000);
  EXPECT_EQ((*tenants)[0].figures.left_micros(), 600'000);
  auto rows = store->ListReservations(id);
  ASSERT_OK(rows);
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].state, ReservationState::kReleased);
}

// An executor that takes over an expired lease without a sweep in between
// releases the reservations of the lease it replaces before it runs.
TEST(Engine, ATakeoverReleasesTheReplacedLeasesReservations) {
  SimulatedClock clock;
  Harness h(SweepOptions(), &clock);
  Store* store = h.engine->store();
  const std::string id = StartOneStep(h);
  ASSERT_NO_FATAL_FAILURE(LeaseReserveAndDie(h, id, 250));
  clock.Advance(absl::Seconds(11));
  auto done = h.engine->ExecuteRun(id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCompleted);
  auto rows = store->ListReservations(id);
  ASSERT_OK(rows);
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].state, ReservationState::kReleased);
  auto run = store->GetRunBudget(id);
  ASSERT_OK(run);
  EXPECT_EQ(run->figures.reserved_micros, 0);
}

// A run whose lease expired waits for an executor across several sweeps:
// run.lease_expired is appended once for the expiry, not once per sweep, and
// the run still has its one message.
TEST(Engine, SweeperAnnouncesEachExpiryOnce) {
  SimulatedClock clock;
  Harness h(SweepOptions(), &clock);
  const std::string id = StartOneStep(h);
  ASSERT_NO_FATAL_FAILURE(LeaseAndDie(h, id));
  clock.Advance(absl::Seconds(11));
  EXPECT_EQ(*h.engine->SweepOnce(), 1);
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(*h.engine->SweepOnce(), 0);
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(*h.engine->SweepOnce(), 0);
  auto count_expiries = [&] {
    int n = 0;
    for (const Event& e : h.Events(id)) n += e.type == "run.lease_expired" ? 1 : 0;
    return n;
  };
  EXPECT_EQ(count_expiries(), 1);
  // The next lease expires too: that expiry is announced (once) as well.
  ASSERT_NO_FATAL_FAILURE(LeaseAndDie(h, id));
  clock.Advance(absl::Seconds(11));
  EXPECT_EQ(*h.engine->SweepOnce(), 1);
  EXPECT_EQ(*h.engine->SweepOnce(), 0);
  EXPECT_EQ(count_expiries(), 2);
  auto done = h.engine->ExecuteRun(id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCompleted);
}

// Issue 28: the attempt cap is the workflow's `max_attempts:`, stored on
// each run by whichever process admits it (here an engine whose options say
// nothing about it), whether the run names the workflow by its definition
// or by its catalog name; two expired leases end a run whose workflow says 2
// failed, without running a step. A workflow without the key gets 5.
TEST(Engine, AWorkflowsMaxAttemptsIsStoredOnItsRunsAndCapsThem) {
  SimulatedClock clock;
  Harness h(SweepOptions(), &clock);
  Store* store = h.engine->store();
  auto wf = LoadWorkflowYaml("name: capped\nmax_attempts: 2\nsteps:\n  - {id: a, kind: count}\n",
                             "capped.yaml");
  ASSERT_OK(wf);
  auto started = h.engine->StartRun({.workflow = *wf});
  ASSERT_OK(started);
  const std::string id = started->run.id;
  EXPECT_EQ(started->run.max_attempts, 2);
  // The first lease expires: the run is queued for another executor (its
  // row stays running until the next lease), not failed.
  ASSERT_NO_FATAL_FAILURE(LeaseAndDie(h, id));
  clock.Advance(absl::Seconds(11));
  EXPECT_EQ(*h.engine->SweepOnce(), 1);
  auto run = store->GetRun(id);
  ASSERT_OK(run);
  EXPECT_EQ(run->status, RunStatus::kRunning);
  EXPECT_EQ(run->attempts, 1);
  // The second is the last the workflow allows: the run ends failed.
  ASSERT_NO_FATAL_FAILURE(LeaseAndDie(h, id));
  clock.Advance(absl::Seconds(11));
  EXPECT_EQ(*h.engine->SweepOnce(), 1);
  run = store->GetRun(id);
  ASSERT_OK(run);
  EXPECT_EQ(run->status, RunStatus::kFailed);
  EXPECT_EQ(run->attempts, 2);
  EXPECT_EQ(run->max_attempts, 2);
  EXPECT_NE(run->error.find("attempt cap reached: 2 leases expired"), std::string::npos)
      << run->error;
  EXPECT_EQ(h.kind->count.load(), 0);

  auto by_name = h.engine->StartRun({.workflow_name = "capped"});
  ASSERT_OK(by_name);
  auto stored = store->GetRun(by_name->run.id);
  ASSERT_OK(stored);
  EXPECT_EQ(stored->max_attempts, 2);
  auto plain = store->GetRun(StartOneStep(h));
  ASSERT_OK(plain);
  EXPECT_EQ(plain->max_attempts, 5);
}

// Two leases of `id` taken and expired (their executors died), no sweep.
void TwoLeasesExpire(Harness& h, SimulatedClock& clock, const std::string& id) {
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK(h.engine->store()->AcquireLease(id, "crashy", absl::Seconds(10), {}));
    clock.Advance(absl::Seconds(11));
  }
}

TEST(Engine, SweeperFailsRunPastAttemptCap) {
  SimulatedClock clock;
  Harness h(SweepOptions(), &clock);
  const std::string id = StartOneStep(h, "max_attempts: 2\n");
  Store* store = h.engine->store();
  ASSERT_NO_FATAL_FAILURE(TwoLeasesExpire(h, clock, id));
  EXPECT_EQ(*h.engine->SweepOnce(), 1);
  auto run = store->GetRun(id);
  ASSERT_OK(run);
  EXPECT_EQ(run->status, RunStatus::kFailed);
  EXPECT_NE(run->error.find("attempt cap"), std::string::npos);
  EXPECT_EQ(h.kind->count.load(), 0);
}

// Reference 003's executor-side attempt cap: an executor whose lease is past
// max_attempts (two leases expired before it, no sweep in between) fails the
// run before any step starts.
TEST(Engine, ExecutorFailsARunPastTheAttemptCapBeforeAnyStep) {
  SimulatedClock clock;
  Harness h(SweepOptions(), &clock);
  const std::string id = StartOneStep(h, "max_attempts: 2\n");
  ASSERT_NO_FATAL_FAILURE(TwoLeasesExpire(h, clock, id));
  auto done = h.engine->ExecuteRun(id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kFailed);
  EXPECT_EQ(done->attempts, 3);
  EXPECT_NE(done->error.find("attempt cap reached: lease 3 of at most 2"), std::string::npos)
      << done->error;
  EXPECT_EQ(h.kind->count.load(), 0);
  for (const Event& e : h.Events(id)) EXPECT_NE(e.type, "step.started");
  EXPECT_TRUE(h.Steps(id).empty());
}

}  // namespace
}  // namespace runloom
