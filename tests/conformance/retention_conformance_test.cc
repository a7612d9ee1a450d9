// Store conformance for retention (issue 25, RetentionStore::PruneRuns): a
// terminal run finished before the cutoff goes with every row of its own, in
// every table; a young run, an unfinished one (queued, running, paused,
// waiting), a child of an unfinished parent, a parent of an unfinished child,
// and a run with a write row younger than the audit horizon stay; a batch
// takes at most its bound; a dry run counts and deletes nothing. On every
// backend of AllBackendsUnderTest().
#include "conformance_fixture.h"

#include <string>
#include <vector>

namespace runloom::conformance {
namespace {

using ::runloom::testing::StatusIs;

constexpr absl::Duration kDay = absl::Hours(24);

class RetentionConformanceTest : public ConformanceTest {
 protected:
  // A run that went through everything that leaves rows: a step record and
  // events, a signal, live text, a budget reservation settled, a write
  // intent and its result; then moved to `end` (terminal).
  std::string FullRun(RunStatus end = RunStatus::kCompleted, const std::string& workflow = "wf") {
    absl::StatusOr<CreateRunResult> created =
        store_->CreateRun(MakeRun(workflow), {Ev("run.created")});
    EXPECT_OK(created);
    if (!created.ok()) return "";
    const std::string id = created->run.id;
    Lease lease = Acquire(id);
    EXPECT_OK(store_->SendSignal(NewSignal{.run_id = id, .name = "go", .payload = 1}));
    EXPECT_OK(store_->PutLiveText(
        LiveTextRow{.run_id = id, .path = "draft", .attempt = 1, .writer = "w", .text = "so far"}));
    absl::StatusOr<ReserveResult> reserved = store_->Reserve(BudgetRequest{
        .key = {.run_id = id, .step_path = "draft", .attempt = 1, .lease_token = lease.token},
        .tenant = "acme",
        .amount_micros = 10});
    EXPECT_OK(reserved);
    if (reserved.ok()) {
      EXPECT_TRUE(reserved->granted);
    }
    EXPECT_OK(store_->SettleReservation(
        BudgetKey{.run_id = id, .step_path = "draft", .attempt = 1, .lease_token = lease.token},
        7));
    WriteIntent intent;
    intent.key = {.run_id = id, .step_path = "apply", .action = "open_ticket"};
    intent.lease_token = lease.token;
    intent.idempotency_key = "idem-" + id;
    intent.request_digest = "sha256:aaa";
    EXPECT_OK(store_->BeginWrite(intent));
    EXPECT_OK(store_->FinishWrite(
        intent.key, WriteResult{.http_status = 201, .response = {{"ok", true}}, .source = "sent"}));
    RunWrite w = ExecutorWrite(lease);
    StepRecord step;
    step.run_id = id;
    step.path = "draft";
    step.step_id = "draft";
    step.kind = "test";
    step.output = {{"text", "a draft"}};
    step.started_at = Now();
    step.finished_at = Now();
    w.steps.push_back(step);
    w.events.push_back(Ev("step.succeeded"));
    w.new_status = end;
    EXPECT_OK(store_->Commit(w)) << "finishing " << id << " as " << ToString(end);
    return id;
  }

  // Takes the lease of `id` (queued, or running with an expired lease) and
  // writes the terminal status `end`.
  void End(const std::string& id, RunStatus end) {
    RunWrite w = ExecutorWrite(Acquire(id));
    w.new_status = end;
    EXPECT_OK(store_->Commit(w)) << "finishing " << id << " as " << ToString(end);
  }

  // A run finished as `end` with no rows but its events.
  std::string Finished(RunStatus end = RunStatus::kCompleted, const std::string& workflow = "wf") {
    absl::StatusOr<CreateRunResult> created =
        store_->CreateRun(MakeRun(workflow), {Ev("run.created")});
    EXPECT_OK(created);
    if (!created.ok()) return "";
    End(created->run.id, end);
    return created->run.id;
  }

  // A child of `parent` (queued).
  std::string Child(const std::string& parent, const std::string& name) {
    NewRun run = MakeRun("child", "parent-" + parent + "-" + name);
    run.parent_run_id = parent;
    absl::StatusOr<CreateRunResult> created = store_->CreateRun(run, {Ev("run.created")});
    EXPECT_OK(created);
    return created.ok() ? created->run.id : "";
  }

  bool Exists(const std::string& id) {
    absl::StatusOr<RunRecord> r = store_->GetRun(id);
    if (!r.ok()) {
      EXPECT_THAT(r.status(), StatusIs(absl::StatusCode::kNotFound));
    }
    return r.ok();
  }

  // Whether any row of `id` is left in a table other than runs.
  void ExpectNoRowsLeft(const std::string& id) {
    absl::StatusOr<std::vector<StepRecord>> steps = store_->ListSteps(id, std::nullopt);
    EXPECT_TRUE(!steps.ok() || steps->empty()) << id;
    absl::StatusOr<std::vector<Event>> events = store_->ListEvents(id, 0, 100);
    EXPECT_TRUE(!events.ok() || events->empty()) << id;
    absl::StatusOr<std::vector<SignalRecord>> signals = store_->ListSignals(id, 0, 100);
    EXPECT_TRUE(!signals.ok() || signals->empty()) << id;
    absl::StatusOr<std::vector<LiveTextRow>> text = store_->ListLiveText(id, absl::Hours(1e6));
    EXPECT_TRUE(!text.ok() || text->empty()) << id;
    absl::StatusOr<std::vector<WriteOperation>> writes = store_->ListWrites(id);
    EXPECT_TRUE(!writes.ok() || writes->empty()) << id;
    absl::StatusOr<std::vector<Reservation>> reservations = store_->ListReservations(id);
    EXPECT_TRUE(!reservations.ok() || reservations->empty()) << id;
    EXPECT_THAT(store_->GetRunBudget(id).status(), StatusIs(absl::StatusCode::kNotFound)) << id;
  }

  PruneResult Prune(PruneRequest r) {
    absl::StatusOr<PruneResult> got = store_->PruneRuns(r);
    EXPECT_OK(got);
    return got.ok() ? *got : PruneResult{};
  }
  // Everything finished more than `age` ago, with no audit horizon.
  PruneRequest OlderThan(absl::Duration age, int limit = 100) {
    return PruneRequest{.finished_before = Now() - age, .limit = limit};
  }
};

TEST_P(RetentionConformanceTest, AnOldTerminalRunGoesWithEveryRowAndTheRestStays) {
  ASSERT_OK(store_->SetTenantBudget("acme", 1000));
  const std::string old_done = FullRun(RunStatus::kCompleted);
  const std::string old_failed = Finished(RunStatus::kFailed);
  const std::string old_cancelled = Finished(RunStatus::kCancelled);
  // Unfinished runs as old as the finished ones: never deleted.
  const std::string queued = DriveTo(RunStatus::kQueued);
  const std::string running = DriveTo(RunStatus::kRunning);
  const std::string paused = DriveTo(RunStatus::kPaused);
  const std::string waiting = DriveTo(RunStatus::kWaiting);
  Advance(10 * kDay);
  const std::string young = FullRun(RunStatus::kCompleted);

  const PruneResult got = Prune(OlderThan(5 * kDay));
  EXPECT_EQ(got.runs, 3);
  // The full run's rows: the run, its step record, 3 events (created,
  // started, step.succeeded), a signal, live text, a reservation, a budget
  // run row, a write row; the two others: the run and 2 events each.
  // A backend may keep a finished run's queue message as residue (it goes
  // too): up to one more row per run.
  EXPECT_GE(got.rows, 10 + 3 + 3) << "rows deleted";
  EXPECT_LE(got.rows, 10 + 3 + 3 + 3) << "rows deleted";
  for (const std::string& id : {old_done, old_failed, old_cancelled}) {
    EXPECT_FALSE(Exists(id)) << id;
    ExpectNoRowsLeft(id);
  }
  EXPECT_EQ(StatusOf(queued), RunStatus::kQueued);
  EXPECT_EQ(StatusOf(running), RunStatus::kRunning);
  EXPECT_EQ(StatusOf(paused), RunStatus::kPaused);
  EXPECT_EQ(StatusOf(waiting), RunStatus::kWaiting);
  EXPECT_EQ(StatusOf(young), RunStatus::kCompleted);
  EXPECT_FALSE(store_->ListSteps(young, std::nullopt)->empty());
  EXPECT_FALSE(store_->ListWrites(young)->empty());
  // The tenant keeps what its deleted runs spent.
  absl::StatusOr<std::optional<TenantBudget>> tenant = store_->GetTenantBudget("acme");
  ASSERT_OK(tenant);
  ASSERT_TRUE(tenant->has_value());
  EXPECT_EQ((*tenant)->figures.spent_micros, 14);

  // Nothing more is old enough; a second prune deletes nothing.
  EXPECT_EQ(Prune(OlderThan(5 * kDay)).runs, 0);
}

TEST_P(RetentionConformanceTest, AWriteRowYoungerThanTheAuditHorizonKeepsItsRunWhole) {
  ASSERT_OK(store_->SetTenantBudget("acme", 1000));
  const std::string id = FullRun();
  Advance(10 * kDay);
  PruneRequest r = OlderThan(5 * kDay);
  r.audit_before = Now() - 20 * kDay;  // its write row (10 days old) is inside the horizon
  EXPECT_EQ(Prune(r).runs, 0);
  EXPECT_TRUE(Exists(id));
  EXPECT_EQ(store_->ListWrites(id)->size(), 1u);
  r.audit_before = Now() - 5 * kDay;  // now it is past it
  EXPECT_EQ(Prune(r).runs, 1);
  EXPECT_FALSE(Exists(id));
}

TEST_P(RetentionConformanceTest, ABatchTakesAtMostItsBoundTheOldestFirst) {
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(Finished());
    Advance(absl::Minutes(1));
  }
  Advance(kDay);
  EXPECT_EQ(Prune(OlderThan(absl::Hours(1), 2)).runs, 2);
  EXPECT_FALSE(Exists(ids[0]));
  EXPECT_FALSE(Exists(ids[1]));
  EXPECT_TRUE(Exists(ids[2]));
  EXPECT_EQ(Prune(OlderThan(absl::Hours(1), 2)).runs, 2);
  EXPECT_EQ(Prune(OlderThan(absl::Hours(1), 2)).runs, 1);
  EXPECT_EQ(Prune(OlderThan(absl::Hours(1), 2)).runs, 0);
}

TEST_P(RetentionConformanceTest, ADryRunCountsTheSameSetAndDeletesNothing) {
  ASSERT_OK(store_->SetTenantBudget("acme", 1000));
  const std::string a = FullRun();
  const std::string b = Finished(RunStatus::kRejected);
  const std::string c = Finished(RunStatus::kBudgetStopped);
  Advance(2 * kDay);
  PruneRequest r = OlderThan(kDay, 0);
  r.dry_run = true;
  const PruneResult counted = Prune(r);
  EXPECT_EQ(counted.runs, 3);
  for (const std::string& id : {a, b, c}) EXPECT_TRUE(Exists(id)) << id;
  EXPECT_EQ(store_->ListWrites(a)->size(), 1u);
  r.dry_run = false;
  r.limit = 100;
  const PruneResult deleted = Prune(r);
  EXPECT_EQ(deleted.runs, counted.runs);
  EXPECT_EQ(deleted.rows, counted.rows);
}

TEST_P(RetentionConformanceTest, PerWorkflowAndExceptedWorkflows) {
  const std::string a = Finished(RunStatus::kCompleted, "alpha");
  const std::string b = Finished(RunStatus::kCompleted, "beta");
  Advance(2 * kDay);
  PruneRequest except = OlderThan(kDay);
  except.except_workflows = {"alpha"};
  EXPECT_EQ(Prune(except).runs, 1);
  EXPECT_TRUE(Exists(a));
  EXPECT_FALSE(Exists(b));
  PruneRequest only = OlderThan(kDay);
  only.workflow_name = "beta";
  EXPECT_EQ(Prune(only).runs, 0);
  only.workflow_name = "alpha";
  EXPECT_EQ(Prune(only).runs, 1);
  EXPECT_FALSE(Exists(a));
  except.except_workflows = {""};
  EXPECT_THAT(store_->PruneRuns(except).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_P(RetentionConformanceTest, ChildAndParentLinksKeepWhatTheOtherStillNeeds) {
  // A finished child of a running parent stays: the parent reads its end.
  const std::string parent = DriveTo(RunStatus::kRunning);
  const std::string child = Child(parent, "first");
  End(child, RunStatus::kCompleted);
  Advance(2 * kDay);
  EXPECT_EQ(Prune(OlderThan(kDay)).runs, 0);
  EXPECT_TRUE(Exists(child));

  // A finished parent with an unfinished child stays (the orphan sweep
  // finds the child through it); the child's end frees both.
  End(parent, RunStatus::kCompleted);  // its lease expired meanwhile: taken again
  const std::string late = Child(parent, "late");
  Advance(2 * kDay);
  EXPECT_EQ(Prune(OlderThan(kDay)).runs, 1);  // the first child only
  EXPECT_TRUE(Exists(parent));
  EXPECT_FALSE(Exists(child));
  End(late, RunStatus::kCancelled);
  Advance(2 * kDay);
  EXPECT_EQ(Prune(OlderThan(kDay)).runs, 2);
  EXPECT_FALSE(Exists(parent));
}

TEST_P(RetentionConformanceTest, AnOpenReservationKeepsItsRun) {
  ASSERT_OK(store_->SetTenantBudget("acme", 1000));
  const std::string id = Create();
  Lease lease = Acquire(id);
  ASSERT_OK(store_->Reserve(BudgetRequest{
      .key = {.run_id = id, .step_path = "draft", .attempt = 1, .lease_token = lease.token},
      .tenant = "acme",
      .amount_micros = 10}));
  RunWrite w = ExecutorWrite(lease);
  w.new_status = RunStatus::kFailed;
  ASSERT_OK(store_->Commit(w));
  Advance(2 * kDay);
  EXPECT_EQ(Prune(OlderThan(kDay)).runs, 0);
  ASSERT_OK(store_->ReleaseReservations(id));
  EXPECT_EQ(Prune(OlderThan(kDay)).runs, 1);
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Backends, RetentionConformanceTest,
                         ::testing::ValuesIn(AllBackendsUnderTest()), FactoryName);

}  // namespace runloom::conformance
