// Store conformance: catalog, run creation, leases, fenced writes, reads and
// recovery, for every backend of AllBackendsUnderTest().
#include "conformance_fixture.h"

#include "absl/strings/match.h"

#include <algorithm>
#include <atomic>
#include <thread>

namespace runloom::conformance {
namespace {

using ::runloom::testing::IsOkAndHolds;
using ::runloom::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::IsEmpty;
using ::testing::Optional;
using ::testing::SizeIs;
using ::testing::UnorderedElementsAre;

class StoreConformanceTest : public ConformanceTest {};

// ---- open / migrations ----

TEST_P(StoreConformanceTest, OpeningTwiceSharesTheDatabase) {
  if (!GetParam().shared_location) GTEST_SKIP() << "each open is a private database";
  std::string id = Create();
  {
    absl::StatusOr<Backend> second = Open();  // migrations already applied: a no-op
    ASSERT_OK(second);
    EXPECT_THAT(second->store->GetRun(id), IsOkAndHolds(Field(&RunRecord::id, id)));
    EXPECT_OK(second->store->RegisterWorkflow("wf2", "sha256:1", {{"steps", 1}}));
  }
  store_.reset();
  transport_.reset();
  absl::StatusOr<Backend> third = Open();
  ASSERT_OK(third);
  EXPECT_THAT(third->store->GetWorkflow("wf2", 0),
              IsOkAndHolds(Field(&WorkflowVersion::version, 1)));
  EXPECT_THAT(third->transport->Claim("c", 10, absl::Seconds(5)), IsOkAndHolds(SizeIs(1)));
}

// ---- catalog ----

TEST_P(StoreConformanceTest, RegisterWorkflowIsIdempotentAndVersions) {
  nlohmann::json a = {{"steps", {"x"}}};
  nlohmann::json b = {{"steps", {"x", "y"}}};
  absl::StatusOr<WorkflowVersion> v1 = store_->RegisterWorkflow("blog", "sha256:a", a);
  ASSERT_OK(v1);
  EXPECT_EQ(v1->version, 1);
  EXPECT_EQ(v1->created_at, Now());
  EXPECT_THAT(store_->RegisterWorkflow("blog", "sha256:a", a),
              IsOkAndHolds(Field(&WorkflowVersion::version, 1)));
  Advance(absl::Seconds(1));
  EXPECT_THAT(store_->RegisterWorkflow("blog", "sha256:b", b),
              IsOkAndHolds(Field(&WorkflowVersion::version, 2)));
  EXPECT_THAT(store_->RegisterWorkflow("blog", "sha256:a", a),
              IsOkAndHolds(Field(&WorkflowVersion::version, 1)));
  EXPECT_THAT(store_->RegisterWorkflow("alpha", "sha256:a", a),
              IsOkAndHolds(Field(&WorkflowVersion::version, 1)));

  absl::StatusOr<WorkflowVersion> latest = store_->GetWorkflow("blog", 0);
  ASSERT_OK(latest);
  EXPECT_EQ(latest->version, 2);
  EXPECT_EQ(latest->digest, "sha256:b");
  EXPECT_EQ(latest->canonical, b);
  absl::StatusOr<WorkflowVersion> first = store_->GetWorkflow("blog", 1);
  ASSERT_OK(first);
  EXPECT_EQ(first->canonical, a);
  EXPECT_EQ(first->created_at, v1->created_at);
  EXPECT_THAT(store_->GetWorkflow("blog", 3), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store_->GetWorkflow("nope", 0), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store_->GetWorkflow("blog", -1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->RegisterWorkflow("", "sha256:a", a),
              StatusIs(absl::StatusCode::kInvalidArgument));

  absl::StatusOr<std::vector<WorkflowVersion>> all = store_->ListWorkflows();
  ASSERT_OK(all);
  ASSERT_THAT(*all, SizeIs(3));
  EXPECT_EQ((*all)[0].name, "alpha");
  EXPECT_EQ((*all)[1].name, "blog");
  EXPECT_EQ((*all)[1].version, 1);
  EXPECT_EQ((*all)[2].version, 2);
}

// ---- runs ----

TEST_P(StoreConformanceTest, CreateRunWritesRowEventsAndMessage) {
  NewRun n = MakeRun();
  absl::StatusOr<CreateRunResult> r =
      store_->CreateRun(n, {Ev("run.created", {{"k", 1}}), Ev("run.queued")});
  ASSERT_OK(r);
  EXPECT_TRUE(r->created);
  absl::StatusOr<RunRecord> got = store_->GetRun(n.id);
  ASSERT_OK(got);
  for (const RunRecord* rec : {&r->run, &*got}) {
    EXPECT_EQ(rec->id, n.id);
    EXPECT_EQ(rec->workflow_name, "wf");
    EXPECT_EQ(rec->workflow_version, 1);
    EXPECT_EQ(rec->workflow_digest, "sha256:abc");
    EXPECT_EQ(rec->status, RunStatus::kQueued);
    EXPECT_EQ(rec->inputs, n.inputs);
    EXPECT_EQ(rec->inputs_digest, "sha256:def");
    EXPECT_EQ(rec->phase, "fresh_generation");
    EXPECT_EQ(rec->revision, 1);
    EXPECT_EQ(rec->entry, RunEntry::kFresh);
    EXPECT_EQ(rec->context, nlohmann::json::object());
    EXPECT_EQ(rec->lease_owner, "");
    EXPECT_FALSE(rec->lease_expires_at.has_value());
    EXPECT_EQ(rec->attempts, 0);
    EXPECT_EQ(rec->max_attempts, 3);
    EXPECT_FALSE(rec->cancel_requested);
    EXPECT_EQ(rec->last_event_seq, 2);
    EXPECT_EQ(rec->created_at, Now());
    EXPECT_EQ(rec->updated_at, Now());
    EXPECT_FALSE(rec->finished_at.has_value());
  }
  absl::StatusOr<std::vector<Event>> events = store_->ListEvents(n.id, 0, 100);
  ASSERT_OK(events);
  ASSERT_THAT(*events, SizeIs(2));
  EXPECT_EQ((*events)[0].seq, 1);
  EXPECT_EQ((*events)[0].type, "run.created");
  EXPECT_EQ((*events)[0].run_id, n.id);
  EXPECT_EQ((*events)[0].at, Now());
  EXPECT_EQ((*events)[0].data, (nlohmann::json{{"k", 1}}));
  EXPECT_EQ((*events)[1].seq, 2);
  EXPECT_THAT(ClaimAll(), ElementsAre(Field(&QueueMessage::run_id, n.id)));

  EXPECT_THAT(store_->CreateRun(n, {}), StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(store_->GetRun("r_missing"), StatusIs(absl::StatusCode::kNotFound));
  NewRun bad = MakeRun();
  bad.id = "";
  EXPECT_THAT(store_->CreateRun(bad, {}), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_P(StoreConformanceTest, IdempotencyKeyReturnsTheExistingRun) {
  absl::StatusOr<CreateRunResult> first =
      store_->CreateRun(MakeRun("wf", "key-1"), {Ev("run.created")});
  ASSERT_OK(first);
  ASSERT_TRUE(first->created);
  Advance(absl::Seconds(1));
  absl::StatusOr<CreateRunResult> again =
      store_->CreateRun(MakeRun("wf", "key-1"), {Ev("run.created")});
  ASSERT_OK(again);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->run.id, first->run.id);
  EXPECT_EQ(again->run.created_at, first->run.created_at);
  EXPECT_THAT(store_->ListEvents(first->run.id, 0, 0), IsOkAndHolds(SizeIs(1)));
  // Same key for another workflow, and no key at all, create new runs.
  absl::StatusOr<CreateRunResult> other = store_->CreateRun(MakeRun("wf2", "key-1"), {});
  ASSERT_OK(other);
  EXPECT_TRUE(other->created);
  EXPECT_NE(other->run.id, first->run.id);
  absl::StatusOr<CreateRunResult> n1 = store_->CreateRun(MakeRun("wf"), {});
  absl::StatusOr<CreateRunResult> n2 = store_->CreateRun(MakeRun("wf"), {});
  ASSERT_OK(n1);
  ASSERT_OK(n2);
  EXPECT_TRUE(n1->created && n2->created);
  EXPECT_THAT(store_->ListRuns({}), IsOkAndHolds(SizeIs(4)));
  EXPECT_THAT(ClaimAll(), SizeIs(4));
}

// The executor's quick question (CancelWatch): which of the runs it holds
// were asked to stop, or were ended under it (an admin reset).
TEST_P(StoreConformanceTest, FindCancelRequestedNamesRunningRunsAskedToStop) {
  const std::string a = Create();
  const std::string b = Create();
  const std::string queued = Create();
  const std::string reset = Create();
  for (const std::string& id : {a, b, reset}) {
    ASSERT_OK(store_->AcquireLease(id, "w", absl::Seconds(30), {Ev("run.started")}));
  }
  EXPECT_THAT(store_->FindCancelRequested({a, b, queued, "r_unknown"}),
              IsOkAndHolds(::testing::IsEmpty()));
  RunWrite cancel;
  cancel.run_id = a;
  cancel.party = Party::kCancel;
  cancel.cancel_requested = true;
  ASSERT_OK(store_->Commit(cancel));
  EXPECT_THAT(store_->FindCancelRequested({a, b, queued, "r_unknown"}),
              IsOkAndHolds(::testing::ElementsAre(a)));
  RunWrite by_admin;
  by_admin.run_id = reset;
  by_admin.party = Party::kAdmin;
  by_admin.expected = {RunStatus::kRunning};
  by_admin.new_status = RunStatus::kCancelled;
  ASSERT_OK(store_->Commit(by_admin));
  EXPECT_THAT(store_->FindCancelRequested({a, b, queued, reset}),
              IsOkAndHolds(::testing::UnorderedElementsAre(a, reset)));
  EXPECT_THAT(store_->FindCancelRequested({}), IsOkAndHolds(::testing::IsEmpty()));
}

// The state gauges' read (StateGauges): the runs in flight by status;
// finished runs are not counted.
TEST_P(StoreConformanceTest, CountActiveRunsCountsEachStatusInFlight) {
  EXPECT_THAT(store_->CountActiveRuns(),
              IsOkAndHolds(::testing::AllOf(Field(&ActiveRunCounts::queued, 0),
                                            Field(&ActiveRunCounts::running, 0))));
  Create();
  Create();
  Acquire(Create());
  DriveTo(RunStatus::kPaused);
  DriveTo(RunStatus::kWaiting);
  DriveTo(RunStatus::kWaiting);
  DriveTo(RunStatus::kCompleted);
  DriveTo(RunStatus::kFailed);
  absl::StatusOr<ActiveRunCounts> n = store_->CountActiveRuns();
  ASSERT_OK(n);
  EXPECT_EQ(n->queued, 2);
  EXPECT_EQ(n->running, 1);
  EXPECT_EQ(n->paused, 1);
  EXPECT_EQ(n->waiting, 2);
}

TEST_P(StoreConformanceTest, ListRunsNewestFirstWithFilters) {
  std::string a = Create("wf");
  Advance(absl::Seconds(1));
  std::string b = Create("other");
  Advance(absl::Seconds(1));
  std::string c = Create("wf");
  Acquire(c);
  absl::StatusOr<std::vector<RunRecord>> all = store_->ListRuns({});
  ASSERT_OK(all);
  ASSERT_THAT(*all, SizeIs(3));
  EXPECT_EQ((*all)[0].id, c);
  EXPECT_EQ((*all)[1].id, b);
  EXPECT_EQ((*all)[2].id, a);
  RunFilter queued_wf;
  queued_wf.status = RunStatus::kQueued;
  queued_wf.workflow_name = "wf";
  EXPECT_THAT(store_->ListRuns(queued_wf), IsOkAndHolds(ElementsAre(Field(&RunRecord::id, a))));
  RunFilter limited;
  limited.limit = 2;
  EXPECT_THAT(store_->ListRuns(limited), IsOkAndHolds(SizeIs(2)));
}

// The operators' search (issue 25) in the store's statement: tenant (the
// budget context's), input value (the idempotency key, or a top-level
// input string or integer, never a nested one or a float), created_since,
// each with the others and with paging, so a page is a page.
TEST_P(StoreConformanceTest, ListRunsSearchesByTenantInputValueAndCreationTime) {
  auto create = [&](const std::string& tenant, nlohmann::json inputs, const std::string& key) {
    NewRun r = MakeRun("wf", key);
    r.inputs = std::move(inputs);
    if (!tenant.empty()) {
      r.context = {{"budget", {{"tenant", tenant}, {"limit_micros", 1000}}}};
    }
    absl::StatusOr<CreateRunResult> made = store_->CreateRun(r, {Ev("run.created")});
    EXPECT_OK(made);
    Advance(absl::Seconds(1));
    return made.ok() ? made->run.id : "";
  };
  const std::string a = create("acme", {{"ticket", "T-7"}}, "");
  const std::string b = create("acme", {{"ticket", 7}}, "order-9");
  const absl::Time after_b = Now();
  const std::string c = create("zeta", {{"nested", {{"ticket", "T-7"}}}, {"f", 7.5}}, "");
  const std::string d = create("", {{"ticket", "T-7"}}, "");
  auto ids = [&](const RunFilter& f) {
    std::vector<std::string> out;
    absl::StatusOr<std::vector<RunRecord>> runs = store_->ListRuns(f);
    EXPECT_OK(runs);
    if (runs.ok()) {
      for (const RunRecord& r : *runs) out.push_back(r.id);
    }
    return out;
  };
  RunFilter by_tenant;
  by_tenant.tenant = "acme";
  EXPECT_THAT(ids(by_tenant), ElementsAre(b, a));
  by_tenant.tenant = "acm";
  EXPECT_THAT(ids(by_tenant), IsEmpty());
  RunFilter by_input;
  by_input.input_value = "T-7";
  EXPECT_THAT(ids(by_input), ElementsAre(d, a));  // not c's nested one
  by_input.input_value = "7";
  EXPECT_THAT(ids(by_input), ElementsAre(b));  // an integer; not c's 7.5
  by_input.input_value = "7.5";
  EXPECT_THAT(ids(by_input), IsEmpty());
  by_input.input_value = "order-9";
  EXPECT_THAT(ids(by_input), ElementsAre(b));
  RunFilter since;
  since.created_since = after_b;
  EXPECT_THAT(ids(since), ElementsAre(d, c));
  since.tenant = "zeta";
  EXPECT_THAT(ids(since), ElementsAre(c));
  // Paged: one at a time, each page one run, then none.
  RunFilter page;
  page.input_value = "T-7";
  page.limit = 1;
  EXPECT_THAT(ids(page), ElementsAre(d));
  absl::StatusOr<RunRecord> first = store_->GetRun(d);
  ASSERT_OK(first);
  page.after = RunPosition{first->created_at, d};
  EXPECT_THAT(ids(page), ElementsAre(a));
  absl::StatusOr<RunRecord> second = store_->GetRun(a);
  ASSERT_OK(second);
  page.after = RunPosition{second->created_at, a};
  EXPECT_THAT(ids(page), IsEmpty());
  // Hostile values are values: no statement is built from them.
  RunFilter hostile;
  hostile.tenant = "acme' OR '1'='1";
  hostile.input_value = "%' OR 1=1 --";
  EXPECT_THAT(ids(hostile), IsEmpty());
}

// RunFilter::updated_since (the resume of the all-runs event stream): the
// runs whose last state write is at or after the time, however old they are.
TEST_P(StoreConformanceTest, ListRunsUpdatedSinceFindsRunsWrittenSinceThatTime) {
  Create("wf");  // written before `since` only: not listed
  std::string leased = Create("wf");
  Advance(absl::Seconds(1));
  absl::StatusOr<absl::Time> since = store_->Now();
  ASSERT_OK(since);
  std::string fresh = Create("other");
  Advance(absl::Seconds(1));
  Acquire(leased);
  RunFilter filter;
  filter.updated_since = *since;
  EXPECT_THAT(store_->ListRuns(filter),
              IsOkAndHolds(UnorderedElementsAre(Field(&RunRecord::id, leased),
                                                Field(&RunRecord::id, fresh))));
  filter.status = RunStatus::kQueued;
  EXPECT_THAT(store_->ListRuns(filter), IsOkAndHolds(ElementsAre(Field(&RunRecord::id, fresh))));
  filter.after = RunPosition{*since, fresh};
  EXPECT_THAT(store_->ListRuns(filter), StatusIs(absl::StatusCode::kInvalidArgument));
}

// Child runs (issue 23): a child keeps its parent's id; ListRuns finds a
// run's children; ListOrphanedChildren finds the unfinished children of a
// finished parent, and only those.
TEST_P(StoreConformanceTest, ChildRunsKeepTheirParentAndOrphansAreFound) {
  const std::string parent = DriveTo(RunStatus::kWaiting);
  const std::string other = DriveTo(RunStatus::kWaiting);
  NewRun child = MakeRun("kid", "child:" + parent + ":1:sum#1");
  child.parent_run_id = parent;
  absl::StatusOr<CreateRunResult> made = store_->CreateRun(child, {Ev("run.created")});
  ASSERT_OK(made);
  EXPECT_EQ(made->run.parent_run_id, parent);
  EXPECT_THAT(store_->GetRun(child.id), IsOkAndHolds(Field(&RunRecord::parent_run_id, parent)));
  // The same key again is the same child.
  NewRun again = MakeRun("kid", child.idempotency_key);
  again.parent_run_id = parent;
  absl::StatusOr<CreateRunResult> twice = store_->CreateRun(again, {Ev("run.created")});
  ASSERT_OK(twice);
  EXPECT_FALSE(twice->created);
  EXPECT_EQ(twice->run.id, child.id);
  // A child without an idempotency key is refused, nothing written.
  NewRun keyless = MakeRun("kid");
  keyless.parent_run_id = parent;
  EXPECT_THAT(store_->CreateRun(keyless, {Ev("run.created")}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->GetRun(keyless.id), StatusIs(absl::StatusCode::kNotFound));
  NewRun done_child = MakeRun("kid", "child:" + parent + ":1:sum#2");
  done_child.parent_run_id = parent;
  ASSERT_OK(store_->CreateRun(done_child, {Ev("run.created")}));
  RunFilter filter;
  filter.parent_run_id = parent;
  EXPECT_THAT(store_->ListRuns(filter),
              IsOkAndHolds(UnorderedElementsAre(Field(&RunRecord::id, child.id),
                                                Field(&RunRecord::id, done_child.id))));
  filter.parent_run_id = other;
  EXPECT_THAT(store_->ListRuns(filter), IsOkAndHolds(IsEmpty()));
  // Parents not finished: no orphans.
  EXPECT_THAT(store_->ListOrphanedChildren(10), IsOkAndHolds(IsEmpty()));
  RunWrite end;
  end.run_id = done_child.id;
  end.party = Party::kCancel;
  end.expected = {RunStatus::kQueued};
  end.new_status = RunStatus::kCancelled;
  ASSERT_OK(store_->Commit(end));
  RunWrite cancel;
  cancel.run_id = parent;
  cancel.party = Party::kCancel;
  cancel.expected = {RunStatus::kWaiting};
  cancel.new_status = RunStatus::kCancelled;
  ASSERT_OK(store_->Commit(cancel));
  EXPECT_THAT(store_->ListOrphanedChildren(10), IsOkAndHolds(ElementsAre(child.id)));
  EXPECT_THAT(store_->ListOrphanedChildren(0), IsOkAndHolds(ElementsAre(child.id)));
}

// RunFilter::idempotency_key finds the one run a key names in its workflow
// (with the filter's status and parent applied), and refuses what it does
// not combine with.
TEST_P(StoreConformanceTest, ARunIsFoundByItsIdempotencyKey) {
  NewRun keyed = MakeRun("wf", "order-1");
  ASSERT_OK(store_->CreateRun(keyed, {Ev("run.created")}));
  ASSERT_OK(store_->CreateRun(MakeRun("wf", "order-2"), {Ev("run.created")}));
  ASSERT_OK(store_->CreateRun(MakeRun("other", "order-1"), {Ev("run.created")}));
  RunFilter f;
  f.workflow_name = "wf";
  f.idempotency_key = "order-1";
  EXPECT_THAT(store_->ListRuns(f), IsOkAndHolds(ElementsAre(Field(&RunRecord::id, keyed.id))));
  f.status = RunStatus::kQueued;
  EXPECT_THAT(store_->ListRuns(f), IsOkAndHolds(ElementsAre(Field(&RunRecord::id, keyed.id))));
  f.status = RunStatus::kRunning;
  EXPECT_THAT(store_->ListRuns(f), IsOkAndHolds(IsEmpty()));
  f.status.reset();
  f.parent_run_id = "r_someone";
  EXPECT_THAT(store_->ListRuns(f), IsOkAndHolds(IsEmpty()));
  f.parent_run_id.clear();
  f.idempotency_key = "order-9";
  EXPECT_THAT(store_->ListRuns(f), IsOkAndHolds(IsEmpty()));
  // A key is unique per workflow: without the workflow, or with paging, refused.
  f.workflow_name.clear();
  EXPECT_THAT(store_->ListRuns(f), StatusIs(absl::StatusCode::kInvalidArgument));
  f.workflow_name = "wf";
  f.updated_since = absl::UnixEpoch();
  EXPECT_THAT(store_->ListRuns(f), StatusIs(absl::StatusCode::kInvalidArgument));
}

// Pages of `filter` (limit as given), each continuing after the previous
// page's last run, until a short page; every id in order.
std::vector<std::string> PageThrough(Store& store, RunFilter filter) {
  std::vector<std::string> ids;
  for (int pages = 0; pages < 100; ++pages) {
    absl::StatusOr<std::vector<RunRecord>> page = store.ListRuns(filter);
    EXPECT_OK(page);
    if (!page.ok()) break;
    for (const RunRecord& r : *page) ids.push_back(r.id);
    if (static_cast<int>(page->size()) < filter.limit) break;
    filter.after = RunPosition{page->back().created_at, page->back().id};
  }
  return ids;
}

// Time stands still (the TimeControl is never advanced): every run has the
// same created_at, so only the id orders them, and keyset pages must still
// return each run exactly once, newest first.
TEST_P(StoreConformanceTest, ListRunsPagesRunsCreatedAtTheSameTimeExactlyOnce) {
  std::vector<std::string> wf_ids;
  std::vector<std::string> all_ids;
  for (int i = 0; i < 7; ++i) {
    std::string id = Create(i % 3 == 0 ? "other" : "wf");
    all_ids.push_back(id);
    if (i % 3 != 0) wf_ids.push_back(id);
  }
  std::sort(all_ids.rbegin(), all_ids.rend());  // equal created_at: id descending
  std::sort(wf_ids.rbegin(), wf_ids.rend());
  absl::StatusOr<std::vector<RunRecord>> everything = store_->ListRuns({});
  ASSERT_OK(everything);
  for (const RunRecord& r : *everything) EXPECT_EQ(r.created_at, (*everything)[0].created_at);

  RunFilter by_two;
  by_two.limit = 2;
  EXPECT_EQ(PageThrough(*store_, by_two), all_ids);

  // Filters combine with the position: a page of "wf" runs continues after
  // its own last run, whatever the runs of other workflows in between.
  RunFilter wf_by_two = by_two;
  wf_by_two.workflow_name = "wf";
  EXPECT_EQ(PageThrough(*store_, wf_by_two), wf_ids);

  // Lease two of the "wf" runs: status and workflow filters page together.
  Acquire(wf_ids[1]);
  Acquire(wf_ids[3]);
  RunFilter running_wf = wf_by_two;
  running_wf.status = RunStatus::kRunning;
  EXPECT_THAT(PageThrough(*store_, running_wf), ElementsAre(wf_ids[1], wf_ids[3]));
  running_wf.limit = 1;
  EXPECT_THAT(PageThrough(*store_, running_wf), ElementsAre(wf_ids[1], wf_ids[3]));
  RunFilter queued_wf = wf_by_two;
  queued_wf.status = RunStatus::kQueued;
  EXPECT_THAT(PageThrough(*store_, queued_wf), ElementsAre(wf_ids[0], wf_ids[2]));
}

TEST_P(StoreConformanceTest, ListRunsAfterAPositionSkipsNewerRunsAndNewInserts) {
  std::string a = Create();
  Advance(absl::Seconds(1));
  std::string b = Create();
  Advance(absl::Seconds(1));
  Create();
  absl::StatusOr<RunRecord> rb = store_->GetRun(b);
  ASSERT_OK(rb);
  RunFilter after_b;
  after_b.after = RunPosition{rb->created_at, rb->id};
  EXPECT_THAT(store_->ListRuns(after_b), IsOkAndHolds(ElementsAre(Field(&RunRecord::id, a))));
  // A run created since sorts before the position: the next page is unchanged.
  Advance(absl::Seconds(1));
  Create();
  EXPECT_THAT(store_->ListRuns(after_b), IsOkAndHolds(ElementsAre(Field(&RunRecord::id, a))));
  // A position no run has (a forged or stale cursor) is still a position.
  RunFilter between;
  between.after = RunPosition{rb->created_at + absl::Milliseconds(500), ""};
  EXPECT_THAT(store_->ListRuns(between),
              IsOkAndHolds(ElementsAre(Field(&RunRecord::id, b), Field(&RunRecord::id, a))));
  RunFilter before_everything;
  before_everything.after = RunPosition{absl::UnixEpoch(), "r_"};
  EXPECT_THAT(store_->ListRuns(before_everything), IsOkAndHolds(IsEmpty()));
}

// ---- leases ----

TEST_P(StoreConformanceTest, AcquireLeaseOnQueuedRun) {
  std::string id = Create();
  absl::StatusOr<Lease> l =
      store_->AcquireLease(id, "worker-a", absl::Seconds(30), {Ev("run.started", {{"x", 1}})});
  ASSERT_OK(l);
  EXPECT_EQ(l->run_id, id);
  EXPECT_EQ(l->owner, "worker-a");
  EXPECT_EQ(l->attempt, 1);
  EXPECT_EQ(l->expires_at, Now() + absl::Seconds(30));
  EXPECT_EQ(l->token.size(), 32u);
  EXPECT_EQ(l->token.find_first_not_of("0123456789abcdef"), std::string::npos) << l->token;
  absl::StatusOr<RunRecord> r = store_->GetRun(id);
  ASSERT_OK(r);
  EXPECT_EQ(r->status, RunStatus::kRunning);
  EXPECT_EQ(r->lease_owner, "worker-a");
  EXPECT_EQ(r->lease_token, l->token);
  EXPECT_EQ(r->lease_expires_at, l->expires_at);
  EXPECT_EQ(r->attempts, 1);
  EXPECT_EQ(r->last_event_seq, 2);
  absl::StatusOr<std::vector<Event>> ev = store_->ListEvents(id, 1, 10);
  ASSERT_OK(ev);
  ASSERT_THAT(*ev, SizeIs(1));
  EXPECT_EQ((*ev)[0].seq, 2);
  // The store writes the lease's events as given: it adds nothing.
  EXPECT_EQ((*ev)[0].data, (nlohmann::json{{"x", 1}}));
}

// LeaseRequest::expected_attempt: a lease is the attempt its caller's events
// name, or none (kAborted, nothing written) when another lease came between
// the caller's read and its lease.
TEST_P(StoreConformanceTest, ALeaseIsTheAttemptItsEventsNameOrNone) {
  std::string id = Create();
  LeaseRequest req{.run_id = id,
                   .owner = "worker-a",
                   .ttl = absl::Seconds(5),
                   .events = {Ev("run.started", {{"attempt", 2}})},
                   .expected_attempt = 2};
  absl::Status moved = store_->AcquireLease(req).status();
  EXPECT_THAT(moved, StatusIs(absl::StatusCode::kAborted));
  EXPECT_TRUE(IsLeaseAttemptMoved(moved)) << moved;
  absl::StatusOr<RunRecord> r = store_->GetRun(id);
  ASSERT_OK(r);
  EXPECT_EQ(r->status, RunStatus::kQueued);
  EXPECT_EQ(r->attempts, 0);
  EXPECT_EQ(r->last_event_seq, 1);
  req.events = {Ev("run.started", {{"attempt", 1}})};
  req.expected_attempt = 1;
  absl::StatusOr<Lease> first = store_->AcquireLease(req);
  ASSERT_OK(first);
  EXPECT_EQ(first->attempt, 1);
  // Its holder gone past the TTL: the next lease is attempt 2, not 1 again.
  Advance(absl::Seconds(6));
  req.owner = "worker-b";
  moved = store_->AcquireLease(req).status();
  EXPECT_TRUE(IsLeaseAttemptMoved(moved)) << moved;
  req.events = {Ev("run.started", {{"attempt", 2}})};
  req.expected_attempt = 2;
  absl::StatusOr<Lease> second = store_->AcquireLease(req);
  ASSERT_OK(second);
  EXPECT_EQ(second->attempt, 2);
  absl::StatusOr<std::vector<Event>> ev = store_->ListEvents(id, 1, 10);
  ASSERT_OK(ev);
  ASSERT_THAT(*ev, SizeIs(2));
  EXPECT_EQ((*ev)[1].data, (nlohmann::json{{"attempt", 2}}));
  req.expected_attempt = -1;
  EXPECT_THAT(store_->AcquireLease(req), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_P(StoreConformanceTest, AcquireLeaseOnLiveLeaseIsAborted) {
  std::string id = Create();
  Lease first = Acquire(id);
  Advance(absl::Seconds(29));
  EXPECT_THAT(store_->AcquireLease(id, "worker-b", absl::Seconds(30), {Ev("run.started")}),
              StatusIs(absl::StatusCode::kAborted));
  absl::StatusOr<RunRecord> r = store_->GetRun(id);
  ASSERT_OK(r);
  EXPECT_EQ(r->lease_token, first.token);
  EXPECT_EQ(r->attempts, 1);
  EXPECT_EQ(r->last_event_seq, 2);
}

TEST_P(StoreConformanceTest, AcquireLeaseAfterExpiryFencesTheOldHolder) {
  std::string id = Create();
  Lease first = Acquire(id);
  Advance(absl::Seconds(30));  // expiry == now counts as expired
  absl::StatusOr<Lease> second =
      store_->AcquireLease(id, "worker-b", absl::Seconds(30), {Ev("run.started")});
  ASSERT_OK(second);
  EXPECT_EQ(second->attempt, 2);
  EXPECT_NE(second->token, first.token);
  RunWrite stale = ExecutorWrite(first);
  stale.new_status = RunStatus::kCompleted;
  EXPECT_THAT(store_->Commit(stale), StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(store_->RenewLease(id, first.token, absl::Seconds(30)),
              StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(StatusOf(id), RunStatus::kRunning);
}

// Restart recovery (issue 27): the live leases with their holders, and a
// lease ended now by its token, so that the run is recoverable at once and
// its old holder is fenced as after an expiry; a stale token, an expired
// lease or a run that is not running is refused with nothing written.
TEST_P(StoreConformanceTest, ExpireLeaseEndsALiveLeaseNowAndFencesItsHolder) {
  const std::string id = Create();
  const std::string other = Create();
  const std::string queued = Create();
  const Lease first = Acquire(id, absl::Seconds(30));
  Advance(absl::Seconds(1));
  const Lease second = Acquire(other, absl::Seconds(10));
  absl::StatusOr<std::vector<LiveLease>> live = store_->ListLiveLeases(0);
  ASSERT_OK(live);
  ASSERT_THAT(*live, SizeIs(2));
  EXPECT_EQ((*live)[0].run_id, other);  // soonest expiry first
  EXPECT_EQ((*live)[0].owner, "worker-a");
  EXPECT_EQ((*live)[0].token, second.token);
  EXPECT_EQ((*live)[1].run_id, id);
  EXPECT_EQ((*live)[1].token, first.token);
  EXPECT_THAT(store_->ListLiveLeases(1), IsOkAndHolds(SizeIs(1)));

  EXPECT_THAT(store_->ExpireLease(id, "0123"), StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(store_->ExpireLease(queued, first.token), StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(store_->ExpireLease("r_missing", first.token), StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(store_->ExpireLease(id, ""), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->ListLiveLeases(0), IsOkAndHolds(SizeIs(2))) << "the refusals wrote nothing";

  ASSERT_OK(store_->ExpireLease(id, first.token));
  EXPECT_THAT(store_->ListLiveLeases(0),
              IsOkAndHolds(ElementsAre(Field(&LiveLease::run_id, other))));
  EXPECT_THAT(store_->ExpireLease(id, first.token), StatusIs(absl::StatusCode::kAborted))
      << "an expired lease is not ended twice";
  absl::StatusOr<std::vector<RecoveryCandidate>> c = store_->FindRecoverable(absl::Minutes(1), 10);
  ASSERT_OK(c);
  EXPECT_THAT(*c, ElementsAre(Field(&RecoveryCandidate::run_id, id)));
  EXPECT_THAT(store_->RenewLease(id, first.token, absl::Seconds(30)),
              StatusIs(absl::StatusCode::kAborted));
  absl::StatusOr<Lease> taken =
      store_->AcquireLease(id, "worker-b", absl::Seconds(30), {Ev("run.started")});
  ASSERT_OK(taken);
  EXPECT_EQ(taken->attempt, 2);
  RunWrite stale = ExecutorWrite(first);
  stale.new_status = RunStatus::kCompleted;
  EXPECT_THAT(store_->Commit(stale), StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(store_->ExpireLease(id, first.token), StatusIs(absl::StatusCode::kAborted))
      << "the old token does not end the new lease";
  EXPECT_EQ(StatusOf(id), RunStatus::kRunning);
}

TEST_P(StoreConformanceTest, AcquireLeaseRefusesPausedTerminalAndUnknown) {
  for (RunStatus s : {RunStatus::kPaused, RunStatus::kCompleted, RunStatus::kFailed,
                      RunStatus::kCancelled, RunStatus::kBudgetStopped}) {
    std::string id = DriveTo(s);
    EXPECT_THAT(store_->AcquireLease(id, "w", absl::Seconds(5), {}),
                StatusIs(absl::StatusCode::kFailedPrecondition))
        << ToString(s);
    EXPECT_EQ(StatusOf(id), s);
  }
  EXPECT_THAT(store_->AcquireLease("r_missing", "w", absl::Seconds(5), {}),
              StatusIs(absl::StatusCode::kNotFound));
  std::string id = Create();
  EXPECT_THAT(store_->AcquireLease(id, "", absl::Seconds(5), {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->AcquireLease(id, "w", absl::ZeroDuration(), {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_P(StoreConformanceTest, AcquireLeaseWithFirstWriteAppliesTheFirstWriteWithTheLease) {
  std::string id = Create();
  RunWrite first;
  first.refuse_if_cancel_requested = true;
  first.phase = "research";
  first.events = {Ev("step.started", {{"path", "a"}})};
  absl::StatusOr<Lease> fl =
      store_->AcquireLease(id, "worker-a", absl::Seconds(30), {Ev("run.started")}, &first);
  ASSERT_OK(fl);
  EXPECT_OK(fl->first_write);
  EXPECT_TRUE(fl->first_write_applied);
  EXPECT_EQ(fl->attempt, 1);
  EXPECT_EQ(fl->owner, "worker-a");
  absl::StatusOr<RunRecord> r = store_->GetRun(id);
  ASSERT_OK(r);
  EXPECT_EQ(r->status, RunStatus::kRunning);
  EXPECT_EQ(r->lease_token, fl->token);
  EXPECT_EQ(r->phase, "research");
  EXPECT_EQ(r->last_event_seq, 3);
  absl::StatusOr<std::vector<Event>> ev = store_->ListEvents(id, 1, 10);
  ASSERT_OK(ev);
  ASSERT_THAT(*ev, SizeIs(2));
  EXPECT_EQ((*ev)[0].type, "run.started");
  EXPECT_EQ((*ev)[1].type, "step.started");
  EXPECT_EQ((*ev)[1].data["path"], "a");
  // The lease is an ordinary lease: the holder writes on with its token.
  RunWrite done = ExecutorWrite(*fl);
  done.new_status = RunStatus::kCompleted;
  ASSERT_OK(store_->Commit(done));
  EXPECT_EQ(StatusOf(id), RunStatus::kCompleted);
}

TEST_P(StoreConformanceTest, AcquireLeaseWithFirstWriteOnALaterLeaseWritesOnlyTheLease) {
  std::string id = Create();
  Lease expired = Acquire(id);
  Advance(absl::Seconds(30));
  RunWrite first;
  first.events = {Ev("step.started")};
  absl::StatusOr<Lease> fl =
      store_->AcquireLease(id, "worker-b", absl::Seconds(30), {Ev("run.started")}, &first);
  ASSERT_OK(fl);
  EXPECT_EQ(fl->attempt, 2);
  EXPECT_NE(fl->token, expired.token);
  EXPECT_THAT(fl->first_write, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_FALSE(fl->first_write_applied);
  absl::StatusOr<RunRecord> r = store_->GetRun(id);
  ASSERT_OK(r);
  EXPECT_EQ(r->lease_token, fl->token);
  EXPECT_EQ(r->last_event_seq, 3);  // created, started, started: no step.started
}

TEST_P(StoreConformanceTest, AcquireLeaseWithFirstWriteRefusedFirstWriteKeepsTheLease) {
  std::string id = Create();
  RunWrite cancel;
  cancel.run_id = id;
  cancel.party = Party::kCancel;
  cancel.cancel_requested = true;
  ASSERT_OK(store_->Commit(cancel));
  RunWrite first;
  first.refuse_if_cancel_requested = true;
  first.events = {Ev("step.started")};
  absl::StatusOr<Lease> fl =
      store_->AcquireLease(id, "worker-a", absl::Seconds(30), {Ev("run.started")}, &first);
  ASSERT_OK(fl);
  EXPECT_THAT(fl->first_write, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_FALSE(fl->first_write_applied);
  absl::StatusOr<RunRecord> r = store_->GetRun(id);
  ASSERT_OK(r);
  EXPECT_EQ(r->status, RunStatus::kRunning);
  EXPECT_EQ(r->lease_token, fl->token);
  EXPECT_EQ(r->last_event_seq, 2);  // run.created, run.started
}

TEST_P(StoreConformanceTest, AcquireLeaseWithFirstWriteOnALiveLeaseWritesNothing) {
  std::string id = Create();
  Lease held = Acquire(id);
  RunWrite first;
  first.events = {Ev("step.started")};
  EXPECT_THAT(store_->AcquireLease(id, "worker-b", absl::Seconds(30), {Ev("run.started")}, &first),
              StatusIs(absl::StatusCode::kAborted));
  absl::StatusOr<RunRecord> r = store_->GetRun(id);
  ASSERT_OK(r);
  EXPECT_EQ(r->lease_token, held.token);
  EXPECT_EQ(r->last_event_seq, 2);
}

TEST_P(StoreConformanceTest, AcquireLeaseWithoutFirstWriteSaysNothingWasApplied) {
  std::string id = Create();
  Lease l = Acquire(id);
  EXPECT_OK(l.first_write);
  EXPECT_FALSE(l.first_write_applied);
}

TEST_P(StoreConformanceTest, NowIsTheBackendsTimeAndMovesWithTheTimeControl) {
  const absl::Time before = Now();
  Advance(absl::Minutes(5));
  EXPECT_GE(Now() - before, absl::Minutes(5));
  // Lease deadlines come from it.
  Lease l = Acquire(Create(), absl::Seconds(30));
  EXPECT_GE(l.expires_at, Now() + absl::Seconds(29));
  EXPECT_LE(l.expires_at, Now() + absl::Seconds(30));
}

TEST_P(StoreConformanceTest, RenewLease) {
  std::string id = Create();
  Lease l = Acquire(id, absl::Seconds(10));
  Advance(absl::Seconds(9));
  absl::StatusOr<RunRecord> r = store_->RenewLease(id, l.token, absl::Seconds(10));
  ASSERT_OK(r);
  EXPECT_EQ(r->lease_expires_at, Now() + absl::Seconds(10));
  EXPECT_FALSE(r->cancel_requested);
  EXPECT_THAT(store_->GetRun(id),
              IsOkAndHolds(Field(&RunRecord::lease_expires_at, Now() + absl::Seconds(10))));
  EXPECT_THAT(store_->RenewLease(id, "0123", absl::Seconds(10)),
              StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(store_->RenewLease("r_missing", l.token, absl::Seconds(10)),
              StatusIs(absl::StatusCode::kNotFound));

  // An operator's cancel request reaches the holder through its renewal.
  RunWrite cancel;
  cancel.run_id = id;
  cancel.party = Party::kCancel;
  cancel.expected = {RunStatus::kRunning};
  cancel.cancel_requested = true;
  ASSERT_OK(store_->Commit(cancel));
  EXPECT_THAT(store_->RenewLease(id, l.token, absl::Seconds(10)),
              IsOkAndHolds(Field(&RunRecord::cancel_requested, true)));

  Advance(absl::Seconds(10));
  EXPECT_THAT(store_->RenewLease(id, l.token, absl::Seconds(10)),
              StatusIs(absl::StatusCode::kAborted));
}

// ---- fenced writes ----

TEST_P(StoreConformanceTest, StaleTokenCommitChangesNothing) {
  Lease l;
  std::string id = DriveTo(RunStatus::kRunning, &l);
  RunWrite w = ExecutorWrite(l);
  w.lease_token = "not-the-token";
  w.new_status = RunStatus::kCompleted;
  w.outcome = "approved";
  StepRecord s;
  s.path = "write";
  s.step_id = "write";
  w.steps = {s};
  w.events = {Ev("run.completed")};
  EXPECT_THAT(store_->Commit(w), StatusIs(absl::StatusCode::kAborted));
  absl::StatusOr<RunRecord> r = store_->GetRun(id);
  ASSERT_OK(r);
  EXPECT_EQ(r->status, RunStatus::kRunning);
  EXPECT_EQ(r->outcome, "");
  EXPECT_EQ(r->last_event_seq, 2);
  EXPECT_THAT(store_->ListSteps(id, std::nullopt), IsOkAndHolds(IsEmpty()));
  EXPECT_THAT(store_->ListEvents(id, 0, 0), IsOkAndHolds(SizeIs(2)));

  w.lease_token = "";
  EXPECT_THAT(store_->Commit(w), StatusIs(absl::StatusCode::kAborted));
}

TEST_P(StoreConformanceTest, RefusedTransitionWritesNoEventsOrSteps) {
  Lease l;
  std::string id = DriveTo(RunStatus::kRunning, &l);
  RunWrite w;
  w.run_id = id;
  w.party = Party::kDecision;  // decision may only move paused -> queued
  w.new_status = RunStatus::kQueued;
  StepRecord s;
  s.path = "x";
  w.steps = {s};
  w.events = {Ev("decision.recorded")};
  absl::Status st = store_->Commit(w);
  EXPECT_THAT(st, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_NE(std::string(st.message()).find("running"), std::string::npos) << st;
  EXPECT_THAT(store_->ListEvents(id, 0, 0), IsOkAndHolds(SizeIs(2)));
  EXPECT_THAT(store_->ListSteps(id, std::nullopt), IsOkAndHolds(IsEmpty()));

  RunWrite wrong_expected = ExecutorWrite(l);
  wrong_expected.expected = {RunStatus::kPaused};
  wrong_expected.events = {Ev("x")};
  EXPECT_THAT(store_->Commit(wrong_expected), StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(store_->ListEvents(id, 0, 0), IsOkAndHolds(SizeIs(2)));
  RunWrite unknown;
  unknown.run_id = "r_missing";
  unknown.party = Party::kCancel;
  EXPECT_THAT(store_->Commit(unknown), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(StoreConformanceTest, EveryTransitionInTheTableIsAccepted) {
  for (const Transition& t : TransitionTable()) {
    SCOPED_TRACE(absl::StrCat(t.from ? std::string(ToString(*t.from)) : "(none)", " -> ",
                              std::string(ToString(t.to)), " by ", std::string(ToString(t.party))));
    if (!t.from.has_value()) continue;  // creation: CreateRun
    if (t.to == RunStatus::kRunning) {
      // Taking the lease is AcquireLease, from queued or an expired running.
      Lease first;
      std::string id = DriveTo(*t.from, &first);
      if (*t.from == RunStatus::kRunning) Advance(absl::Seconds(31));
      EXPECT_OK(store_->AcquireLease(id, "w", absl::Seconds(30), {}));
      EXPECT_EQ(StatusOf(id), RunStatus::kRunning);
      RunWrite same = ExecutorWrite(first);
      absl::StatusOr<RunRecord> r = store_->GetRun(id);
      ASSERT_OK(r);
      same.run_id = id;
      same.lease_token = r->lease_token;
      same.new_status = RunStatus::kRunning;
      EXPECT_OK(store_->Commit(same));
      continue;
    }
    Lease l;
    std::string id = DriveTo(*t.from, &l);
    RunWrite w;
    w.run_id = id;
    w.party = t.party;
    w.expected = {*t.from};
    if (t.needs_lease_token) w.lease_token = l.token;
    w.new_status = t.to;
    if (t.to == RunStatus::kWaiting) w.wake_at = Now() + absl::Minutes(1);
    w.events = {Ev("status.changed")};
    if (t.party == Party::kTimer) {
      // A timer wakes the run only once its wake time (a minute on) has
      // come by the store's clock, checked in the commit itself.
      EXPECT_THAT(store_->Commit(w), StatusIs(absl::StatusCode::kAborted));
      EXPECT_EQ(StatusOf(id), *t.from);
      Advance(absl::Minutes(1));
    }
    ASSERT_OK(store_->Commit(w));
    absl::StatusOr<RunRecord> r = store_->GetRun(id);
    ASSERT_OK(r);
    EXPECT_EQ(r->status, t.to);
    EXPECT_EQ(r->updated_at, Now());
    if (t.to != RunStatus::kRunning) {
      EXPECT_EQ(r->lease_token, "");
      EXPECT_EQ(r->lease_owner, "");
      EXPECT_FALSE(r->lease_expires_at.has_value());
    }
    EXPECT_EQ(r->finished_at.has_value(), IsTerminal(t.to));
  }
}

TEST_P(StoreConformanceTest, WritesOutsideTheTableAreRefused) {
  const RunStatus kAll[] = {RunStatus::kQueued,        RunStatus::kRunning,  RunStatus::kPaused,
                            RunStatus::kCompleted,     RunStatus::kRejected, RunStatus::kUnresolved,
                            RunStatus::kBudgetStopped, RunStatus::kFailed,   RunStatus::kCancelled};
  const Party kParties[] = {Party::kAdmission, Party::kExecutor, Party::kSweeper, Party::kDecision,
                            Party::kCancel,    Party::kRerun,    Party::kAdmin};
  int refused = 0;
  for (RunStatus from : kAll) {
    Lease l;
    std::string id = DriveTo(from, &l);
    absl::StatusOr<RunRecord> before = store_->GetRun(id);
    ASSERT_OK(before);
    for (RunStatus to : kAll) {
      for (Party p : kParties) {
        if (FindTransition(from, to, p) != nullptr) continue;
        RunWrite w;
        w.run_id = id;
        w.party = p;
        // Even the right token does not make it legal.
        w.lease_token = from == RunStatus::kRunning ? l.token : "";
        w.new_status = to;
        w.events = {Ev("illegal")};
        absl::Status s = store_->Commit(w);
        EXPECT_TRUE(s.code() == absl::StatusCode::kFailedPrecondition ||
                    (p == Party::kExecutor && s.code() == absl::StatusCode::kAborted))
            << ToString(from) << " -> " << ToString(to) << " by " << ToString(p) << ": " << s;
        ++refused;
      }
    }
    absl::StatusOr<RunRecord> after = store_->GetRun(id);
    ASSERT_OK(after);
    EXPECT_EQ(after->status, from);
    EXPECT_EQ(after->last_event_seq, before->last_event_seq);
    EXPECT_EQ(after->updated_at, before->updated_at);
  }
  EXPECT_GT(refused, 400);
}

TEST_P(StoreConformanceTest, MoveToQueuedReleasesTheLeaseAndEnqueues) {
  std::string id = Create();
  std::vector<QueueMessage> first = ClaimAll();  // the creation message, now in flight
  ASSERT_THAT(first, SizeIs(1));
  Lease l = Acquire(id);      // the lease stands for the message from now on
  Advance(absl::Minutes(2));  // past the claim's visibility
  EXPECT_THAT(ClaimAll(), IsEmpty()) << "a leased run needs no message";
  RunWrite w = ExecutorWrite(l);
  w.new_status = RunStatus::kQueued;
  w.events = {Ev("run.released")};
  ASSERT_OK(store_->Commit(w));
  absl::StatusOr<RunRecord> r = store_->GetRun(id);
  ASSERT_OK(r);
  EXPECT_EQ(r->status, RunStatus::kQueued);
  EXPECT_EQ(r->lease_token, "");
  EXPECT_EQ(r->attempts, 1);
  // The first claimer's late ack must not remove the new message.
  ASSERT_OK(transport_->Ack(first[0]));
  std::vector<QueueMessage> second = ClaimAll();
  ASSERT_THAT(second, ElementsAre(Field(&QueueMessage::run_id, id)));
  EXPECT_NE(second[0].id, first[0].id);
  EXPECT_EQ(second[0].deliveries, 1);
}

TEST_P(StoreConformanceTest, EnqueueReplacesAnInFlightMessage) {
  std::string id = Create();
  std::vector<QueueMessage> first = ClaimAll("c", absl::Hours(1));
  ASSERT_THAT(first, SizeIs(1));
  ASSERT_OK(store_->Enqueue(id, {}));    // e.g. the sweeper: visible now, not in an hour
  ASSERT_OK(transport_->Ack(first[0]));  // the old claimer's ack is a no-op
  std::vector<QueueMessage> second = ClaimAll();
  ASSERT_THAT(second, ElementsAre(Field(&QueueMessage::run_id, id)));
  EXPECT_NE(second[0].id, first[0].id);
}

TEST_P(StoreConformanceTest, TerminalReleasesLeaseAndRerunRequeues) {
  Lease l;
  std::string id = DriveTo(RunStatus::kRunning, &l);
  ASSERT_THAT(ClaimAll(), IsEmpty());
  Advance(absl::Seconds(2));
  RunWrite done = ExecutorWrite(l);
  done.new_status = RunStatus::kCompleted;
  done.outcome = "approved";
  ASSERT_OK(store_->Commit(done));
  absl::StatusOr<RunRecord> r = store_->GetRun(id);
  ASSERT_OK(r);
  EXPECT_EQ(r->lease_owner, "");
  EXPECT_EQ(r->lease_token, "");
  EXPECT_FALSE(r->lease_expires_at.has_value());
  EXPECT_EQ(r->finished_at, Now());
  EXPECT_EQ(r->outcome, "approved");
  EXPECT_THAT(store_->RenewLease(id, l.token, absl::Seconds(5)),
              StatusIs(absl::StatusCode::kAborted));

  RunWrite rerun;
  rerun.run_id = id;
  rerun.party = Party::kRerun;
  rerun.expected = {RunStatus::kCompleted};
  rerun.new_status = RunStatus::kQueued;
  rerun.revision = 2;
  rerun.entry = RunEntry::kRerun;
  rerun.context = nlohmann::json{{"rerun_from", "research"}};
  rerun.outcome = "";
  rerun.reset_attempts = true;
  ASSERT_OK(store_->Commit(rerun));
  r = store_->GetRun(id);
  ASSERT_OK(r);
  EXPECT_EQ(r->status, RunStatus::kQueued);
  EXPECT_FALSE(r->finished_at.has_value());
  EXPECT_EQ(r->revision, 2);
  EXPECT_EQ(r->entry, RunEntry::kRerun);
  EXPECT_EQ(r->context["rerun_from"], "research");
  EXPECT_EQ(r->outcome, "");
  EXPECT_EQ(r->attempts, 0);
  EXPECT_THAT(ClaimAll(), ElementsAre(Field(&QueueMessage::run_id, id)));
}

TEST_P(StoreConformanceTest, CommitAppliesFieldsStepsAndEvents) {
  Lease l;
  std::string id = DriveTo(RunStatus::kRunning, &l);
  auto step = [&](int64_t rev, const std::string& path, absl::Duration offset) {
    StepRecord s;
    s.revision = rev;
    s.path = path;
    s.step_id = path;
    s.kind = "llm";
    s.phase = "research";
    s.attempt = 2;
    s.state = StepState::kSucceeded;
    s.output = {{"text", path}};
    s.error_class = std::nullopt;
    s.stderr_tail = "tail";
    s.started_at = Now() + offset;
    s.finished_at = Now() + offset + absl::Seconds(1);
    return s;
  };
  RunWrite w = ExecutorWrite(l);
  w.phase = "research";
  w.error = "transient";
  w.cancel_requested = false;
  w.steps = {step(1, "b", absl::Seconds(2)), step(1, "a", absl::Seconds(2)),
             step(1, "z", absl::Seconds(1))};
  w.events = {Ev("step.succeeded"), Ev("step.succeeded"), Ev("step.succeeded")};
  ASSERT_OK(store_->Commit(w));

  StepRecord failed = step(1, "a", absl::Seconds(3));
  failed.state = StepState::kFailed;
  failed.output = nullptr;
  failed.error = "boom";
  failed.error_class = ErrorClass::kTimeout;
  RunWrite w2 = ExecutorWrite(l);
  w2.steps = {failed, step(2, "a", absl::ZeroDuration())};
  w2.events = {Ev("step.failed")};
  ASSERT_OK(store_->Commit(w2));

  absl::StatusOr<std::vector<StepRecord>> all = store_->ListSteps(id, std::nullopt);
  ASSERT_OK(all);
  ASSERT_THAT(*all, SizeIs(4));
  EXPECT_EQ((*all)[0].path, "z");  // by revision, started_at, path
  EXPECT_EQ((*all)[1].path, "b");
  EXPECT_EQ((*all)[2].path, "a");  // replaced; now starts last
  EXPECT_EQ((*all)[2].state, StepState::kFailed);
  EXPECT_EQ((*all)[2].error, "boom");
  EXPECT_EQ((*all)[2].error_class, ErrorClass::kTimeout);
  EXPECT_TRUE((*all)[2].output.is_null());
  EXPECT_EQ((*all)[3].revision, 2);
  EXPECT_EQ((*all)[0].run_id, id);
  EXPECT_EQ((*all)[0].kind, "llm");
  EXPECT_EQ((*all)[0].attempt, 2);
  EXPECT_EQ((*all)[0].stderr_tail, "tail");
  EXPECT_EQ((*all)[0].output, (nlohmann::json{{"text", "z"}}));
  EXPECT_EQ((*all)[0].started_at, Now() + absl::Seconds(1));
  EXPECT_EQ((*all)[0].finished_at, Now() + absl::Seconds(2));
  EXPECT_THAT(store_->ListSteps(id, 2), IsOkAndHolds(SizeIs(1)));
  EXPECT_THAT(store_->ListSteps(id, 1), IsOkAndHolds(SizeIs(3)));

  absl::StatusOr<std::vector<Event>> events = store_->ListEvents(id, 0, 0);
  ASSERT_OK(events);
  ASSERT_THAT(*events, SizeIs(6));
  for (size_t i = 0; i < events->size(); ++i)
    EXPECT_EQ((*events)[i].seq, static_cast<int64_t>(i + 1));
  EXPECT_THAT(store_->ListEvents(id, 2, 2),
              IsOkAndHolds(ElementsAre(Field(&Event::seq, 3), Field(&Event::seq, 4))));
  EXPECT_THAT(store_->ListEvents(id, 6, 10), IsOkAndHolds(IsEmpty()));
  absl::StatusOr<RunRecord> r = store_->GetRun(id);
  ASSERT_OK(r);
  EXPECT_EQ(r->phase, "research");
  EXPECT_EQ(r->error, "transient");
  EXPECT_EQ(r->last_event_seq, 6);
  EXPECT_EQ(r->status, RunStatus::kRunning);
  EXPECT_EQ(r->lease_token, l.token);

  RunWrite bad = ExecutorWrite(l);
  bad.events = {Ev("")};
  EXPECT_THAT(store_->Commit(bad), StatusIs(absl::StatusCode::kInvalidArgument));
  StepRecord foreign = step(1, "q", absl::ZeroDuration());
  foreign.run_id = "r_other";
  RunWrite bad_step = ExecutorWrite(l);
  bad_step.steps = {foreign};
  EXPECT_THAT(store_->Commit(bad_step), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_P(StoreConformanceTest, ExpectedLastEventSeqGuardsAgainstConcurrentChanges) {
  Lease l;
  std::string id = DriveTo(RunStatus::kPaused, &l);
  absl::StatusOr<RunRecord> read = store_->GetRun(id);
  ASSERT_OK(read);
  RunWrite decide;
  decide.run_id = id;
  decide.party = Party::kDecision;
  decide.expected = {RunStatus::kPaused};
  decide.expected_last_event_seq = read->last_event_seq - 1;  // someone wrote meanwhile
  decide.new_status = RunStatus::kQueued;
  decide.events = {Ev("decision.recorded")};
  EXPECT_THAT(store_->Commit(decide), StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(StatusOf(id), RunStatus::kPaused);
  EXPECT_THAT(store_->ListEvents(id, 0, 0), IsOkAndHolds(SizeIs(read->last_event_seq)));
  decide.expected_last_event_seq = read->last_event_seq;
  ASSERT_OK(store_->Commit(decide));
  EXPECT_EQ(StatusOf(id), RunStatus::kQueued);
}

TEST_P(StoreConformanceTest, RefuseIfCancelRequested) {
  Lease l;
  std::string id = DriveTo(RunStatus::kRunning, &l);
  RunWrite start = ExecutorWrite(l);
  start.refuse_if_cancel_requested = true;
  start.events = {Ev("step.started")};
  ASSERT_OK(store_->Commit(start));  // no cancel yet
  RunWrite cancel;
  cancel.run_id = id;
  cancel.party = Party::kCancel;
  cancel.cancel_requested = true;
  ASSERT_OK(store_->Commit(cancel));
  EXPECT_THAT(store_->Commit(start), StatusIs(absl::StatusCode::kCancelled));
  absl::StatusOr<RunRecord> r = store_->GetRun(id);
  ASSERT_OK(r);
  EXPECT_EQ(r->last_event_seq, 3);
  EXPECT_TRUE(r->cancel_requested);
  RunWrite finish = ExecutorWrite(l);  // the executor's own stop is not refused
  finish.new_status = RunStatus::kCancelled;
  ASSERT_OK(store_->Commit(finish));
  EXPECT_EQ(StatusOf(id), RunStatus::kCancelled);
}

// ---- recovery ----

TEST_P(StoreConformanceTest, FindRecoverable) {
  Lease expired;
  std::string stuck = DriveTo(RunStatus::kRunning, &expired);
  Lease live_lease;
  std::string live = DriveTo(RunStatus::kRunning, &live_lease);
  std::string with_message = Create();
  std::string stranded = Create();
  DriveTo(RunStatus::kPaused);
  DriveTo(RunStatus::kCompleted);
  // Drop the stranded run's message: claim everything, ack only its message.
  for (const QueueMessage& m : ClaimAll("c", absl::Hours(1))) {
    if (m.run_id == stranded) {
      ASSERT_OK(transport_->Ack(m));
    }
  }
  ASSERT_OK(transport_->Ack(QueueMessage{"0", with_message, 1}));  // no such message: OK
  Advance(absl::Seconds(20));
  ASSERT_OK(store_->RenewLease(live, live_lease.token, absl::Seconds(30)));
  Advance(absl::Seconds(15));  // `stuck` expired (30 s ttl), `live` renewed

  absl::StatusOr<std::vector<RecoveryCandidate>> c = store_->FindRecoverable(absl::Minutes(1), 10);
  ASSERT_OK(c);
  ASSERT_THAT(*c, SizeIs(1));
  EXPECT_EQ((*c)[0].run_id, stuck);
  EXPECT_EQ((*c)[0].status, RunStatus::kRunning);
  EXPECT_EQ((*c)[0].attempts, 1);
  EXPECT_EQ((*c)[0].max_attempts, 3);
  EXPECT_EQ((*c)[0].lease_token, expired.token);

  // Queued runs past the grace with no live lease, whatever the transport
  // holds: the store does not look at messages.
  c = store_->FindRecoverable(absl::Seconds(30), 10);
  ASSERT_OK(c);
  ASSERT_THAT(*c, ElementsAre(Field(&RecoveryCandidate::run_id, stuck),
                              Field(&RecoveryCandidate::run_id, with_message),
                              Field(&RecoveryCandidate::run_id, stranded)));
  EXPECT_EQ((*c)[2].status, RunStatus::kQueued);
  EXPECT_THAT(store_->FindRecoverable(absl::Seconds(30), 1), IsOkAndHolds(SizeIs(1)));
  // The reconciler asks the transport which of them still have a message.
  absl::StatusOr<MessagePresence> p =
      transport_->FindMessages({with_message, stranded, "r_missing"});
  ASSERT_OK(p);
  EXPECT_THAT(p->pending, ElementsAre(with_message));
  EXPECT_THAT(p->dead_lettered, IsEmpty());

  ASSERT_OK(store_->Enqueue(stranded, {Ev("run.requeued")}));
  ASSERT_OK(store_->Enqueue(stranded, {}));  // a pending message is not doubled
  p = transport_->FindMessages({with_message, stranded});
  ASSERT_OK(p);
  EXPECT_THAT(p->pending, UnorderedElementsAre(with_message, stranded));
  EXPECT_THAT(store_->ListEvents(stranded, 1, 0),
              IsOkAndHolds(ElementsAre(Field(&Event::type, "run.requeued"))));
  EXPECT_THAT(store_->GetRun(stranded), IsOkAndHolds(Field(&RunRecord::last_event_seq, 2)));
  Advance(absl::Hours(2));  // every claim above is visible again
  std::vector<QueueMessage> all = ClaimAll();
  int for_stranded = 0;
  for (const QueueMessage& m : all) for_stranded += m.run_id == stranded ? 1 : 0;
  EXPECT_EQ(for_stranded, 1);
  EXPECT_THAT(store_->Enqueue("r_missing", {}), StatusIs(absl::StatusCode::kNotFound));
}

// A sweeper's candidate can finish (or pause) between its query and its
// Enqueue: the store writes nothing to such a run, neither an event after
// run.finished nor a message (the distributed chaos test saw both).
TEST_P(StoreConformanceTest, EnqueueWritesNothingToAPausedOrFinishedRun) {
  for (RunStatus s :
       {RunStatus::kPaused, RunStatus::kCompleted, RunStatus::kFailed, RunStatus::kCancelled}) {
    std::string id = DriveTo(s);
    absl::StatusOr<RunRecord> before = store_->GetRun(id);
    ASSERT_OK(before);
    EXPECT_THAT(
        store_->Enqueue(id, {Ev("run.lease_expired", {{"attempt", 1}, {"lease_owner", "w"}})}),
        StatusIs(absl::StatusCode::kAborted))
        << ToString(s);
    EXPECT_THAT(store_->Enqueue(id, {}), StatusIs(absl::StatusCode::kAborted)) << ToString(s);
    EXPECT_THAT(store_->GetRun(id),
                IsOkAndHolds(Field(&RunRecord::last_event_seq, before->last_event_seq)))
        << ToString(s);
    EXPECT_EQ(StatusOf(id), s);
  }
}

TEST_P(StoreConformanceTest, SweeperFailsAnExpiredRunWithItsToken) {
  Lease l;
  std::string id = DriveTo(RunStatus::kRunning, &l);
  Advance(absl::Minutes(1));
  absl::StatusOr<std::vector<RecoveryCandidate>> c = store_->FindRecoverable(absl::Minutes(1), 10);
  ASSERT_OK(c);
  ASSERT_THAT(*c, SizeIs(1));
  RunWrite fail;
  fail.run_id = id;
  fail.party = Party::kSweeper;
  fail.expected = {RunStatus::kRunning};
  fail.lease_token = (*c)[0].lease_token;
  fail.new_status = RunStatus::kFailed;
  fail.error = "attempt cap reached";
  // A new holder took the lease meanwhile: the sweeper's fenced write loses.
  ASSERT_OK(store_->AcquireLease(id, "w2", absl::Seconds(30), {}));
  EXPECT_THAT(store_->Commit(fail), StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(StatusOf(id), RunStatus::kRunning);
}

// Timers (issue 23): a parked run rests `waiting` with its wake time and no
// lease; it cannot be leased; FindDueTimers names it only once the store's
// clock passes the time; the timer party queues it once, with a message.
TEST_P(StoreConformanceTest, AWaitingRunIsDueOnlyOnceTheStoresClockPassesItsWakeTime) {
  Lease l;
  const std::string id = DriveTo(RunStatus::kRunning, &l);
  ClaimAll();  // the run's first message, claimed (its ack is the lease's)
  RunWrite no_time = ExecutorWrite(l);
  no_time.new_status = RunStatus::kWaiting;
  EXPECT_THAT(store_->Commit(no_time), StatusIs(absl::StatusCode::kInvalidArgument));
  absl::StatusOr<absl::Time> now = store_->Now();
  ASSERT_OK(now);
  const absl::Time due = *now + absl::Seconds(10);
  RunWrite park = ExecutorWrite(l);
  park.new_status = RunStatus::kWaiting;
  park.wake_at = due;
  ASSERT_OK(store_->Commit(park));
  absl::StatusOr<RunRecord> waiting = store_->GetRun(id);
  ASSERT_OK(waiting);
  EXPECT_EQ(waiting->status, RunStatus::kWaiting);
  EXPECT_EQ(waiting->wake_at, due);
  EXPECT_EQ(waiting->lease_token, "");
  EXPECT_THAT(store_->AcquireLease(id, "w", absl::Seconds(5), {}),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  // Only a move to waiting carries a wake time.
  RunWrite stray;
  stray.run_id = id;
  stray.party = Party::kCancel;
  stray.new_status = RunStatus::kCancelled;
  stray.wake_at = due;
  EXPECT_THAT(store_->Commit(stray), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->FindDueTimers(100), IsOkAndHolds(::testing::IsEmpty()));
  absl::StatusOr<std::optional<absl::Time>> next = store_->NextWakeTime();
  ASSERT_OK(next);
  EXPECT_EQ(*next, std::optional<absl::Time>(due));
  EXPECT_THAT(store_->HasWorkToCome(), IsOkAndHolds(true));
  Advance(absl::Seconds(9));
  EXPECT_THAT(store_->FindDueTimers(100), IsOkAndHolds(::testing::IsEmpty()));
  Advance(absl::Seconds(1));  // wake time == now counts as due
  EXPECT_THAT(store_->FindDueTimers(100), IsOkAndHolds(::testing::ElementsAre(id)));
  RunWrite wake;
  wake.run_id = id;
  wake.party = Party::kTimer;
  wake.expected = {RunStatus::kWaiting};
  wake.new_status = RunStatus::kQueued;
  wake.reset_attempts = true;
  ASSERT_OK(store_->Commit(wake));
  absl::StatusOr<RunRecord> queued = store_->GetRun(id);
  ASSERT_OK(queued);
  EXPECT_EQ(queued->status, RunStatus::kQueued);
  EXPECT_EQ(queued->wake_at, std::nullopt);
  EXPECT_EQ(queued->attempts, 0);
  EXPECT_THAT(store_->FindDueTimers(100), IsOkAndHolds(::testing::IsEmpty()));
  next = store_->NextWakeTime();
  ASSERT_OK(next);
  EXPECT_FALSE(next->has_value());
  std::vector<QueueMessage> m = ClaimAll("c2");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].run_id, id);
  // A second sweeper that read the same due timer loses.
  EXPECT_THAT(store_->Commit(wake), StatusIs(absl::StatusCode::kAborted));
}

// Cancel, rerun and the admin reset act on a waiting run at once; its timer
// never fires afterwards.
TEST_P(StoreConformanceTest, CancelRerunAndAdminActOnAWaitingRunAtOnce) {
  for (Party party : {Party::kCancel, Party::kRerun, Party::kAdmin}) {
    Lease l;
    const std::string id = DriveTo(RunStatus::kRunning, &l);
    absl::StatusOr<absl::Time> now = store_->Now();
    ASSERT_OK(now);
    RunWrite park = ExecutorWrite(l);
    park.new_status = RunStatus::kWaiting;
    park.wake_at = *now + absl::Seconds(5);
    ASSERT_OK(store_->Commit(park));
    RunWrite w;
    w.run_id = id;
    w.party = party;
    w.expected = {RunStatus::kWaiting};
    w.new_status = party == Party::kRerun ? RunStatus::kQueued : RunStatus::kCancelled;
    ASSERT_OK(store_->Commit(w)) << ToString(party);
    EXPECT_EQ(StatusOf(id), *w.new_status) << ToString(party);
    Advance(absl::Seconds(6));
    absl::StatusOr<std::vector<std::string>> due = store_->FindDueTimers(100);
    ASSERT_OK(due);
    EXPECT_THAT(*due, ::testing::Not(::testing::Contains(id))) << ToString(party);
  }
}

// Signals (issue 23): the run's mailbox keeps signals in the order they
// came, each consumed once; a run never rests waiting for a signal its
// mailbox has; an idempotency key keeps one signal.
TEST_P(StoreConformanceTest, TheMailboxKeepsSignalsInOrderAndEachIsConsumedOnce) {
  Lease l;
  const std::string id = DriveTo(RunStatus::kRunning, &l);
  ClaimAll();
  auto send = [&](const std::string& name, int payload, const std::string& key = "") {
    NewSignal n;
    n.run_id = id;
    n.name = name;
    n.payload = payload;
    n.idempotency_key = key;
    n.events = {Ev("signal.received", {{"name", name}})};
    return store_->SendSignal(n);
  };
  absl::StatusOr<SendSignalResult> first = send("go", 1);
  ASSERT_OK(first);
  EXPECT_TRUE(first->created);
  EXPECT_FALSE(first->resolved);  // the run is running, not waiting
  EXPECT_EQ(first->signal.seq, 1);
  EXPECT_EQ(first->signal.consumed_by, "");
  ASSERT_OK(send("go", 2, "k"));
  const int64_t events = store_->GetRun(id)->last_event_seq;
  absl::StatusOr<SendSignalResult> again = send("go", 99, "k");
  ASSERT_OK(again);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->signal.seq, 2);
  EXPECT_EQ(again->signal.payload, 2);  // the one first kept
  EXPECT_EQ(store_->GetRun(id)->last_event_seq, events);
  ASSERT_OK(send("other", 3));
  absl::StatusOr<std::vector<Event>> evs = store_->ListEvents(id, 0, 0);
  ASSERT_OK(evs);
  EXPECT_EQ(evs->back().type, "signal.received");
  EXPECT_EQ(evs->back().data["seq"], 3);
  EXPECT_EQ(evs->back().data["resolved"], false);

  absl::StatusOr<std::optional<SignalRecord>> next = store_->NextSignal(id, "go");
  ASSERT_OK(next);
  ASSERT_TRUE(next->has_value());
  EXPECT_EQ((*next)->seq, 1);
  EXPECT_EQ((*next)->payload, 1);
  // No resting for a signal the mailbox has: refused, nothing written.
  RunWrite park = ExecutorWrite(l);
  park.new_status = RunStatus::kWaiting;
  park.wait_for_signal = SignalWait{.signal = "go", .key = "1:w"};
  park.events = {Ev("run.waiting")};
  EXPECT_THAT(store_->Commit(park), StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_EQ(StatusOf(id), RunStatus::kRunning);
  EXPECT_EQ(store_->GetRun(id)->last_event_seq, evs->back().seq);
  // Consumed in the executor's fenced write, once.
  RunWrite consume = ExecutorWrite(l);
  consume.consume_signal = SignalConsumption{.seq = 1, .key = "1:w"};
  consume.events = {Ev("step.succeeded")};
  ASSERT_OK(store_->Commit(consume));
  absl::StatusOr<std::optional<SignalRecord>> by = store_->SignalConsumedBy(id, "1:w");
  ASSERT_OK(by);
  ASSERT_TRUE(by->has_value());
  EXPECT_EQ((*by)->seq, 1);
  EXPECT_EQ((*by)->consumed_by, "1:w");
  EXPECT_TRUE((*by)->consumed_at.has_value());
  RunWrite twice = ExecutorWrite(l);
  twice.consume_signal = SignalConsumption{.seq = 1, .key = "1:x"};
  twice.events = {Ev("step.succeeded")};
  EXPECT_THAT(store_->Commit(twice), StatusIs(absl::StatusCode::kAborted));
  absl::StatusOr<std::optional<SignalRecord>> none = store_->SignalConsumedBy(id, "1:x");
  ASSERT_OK(none);
  EXPECT_FALSE(none->has_value());
  // Only the lease holder consumes.
  RunWrite stale = ExecutorWrite(l);
  stale.lease_token = "not-the-token";
  stale.consume_signal = SignalConsumption{.seq = 2, .key = "1:y"};
  EXPECT_FALSE(store_->Commit(stale).ok());
  RunWrite not_executor;
  not_executor.run_id = id;
  not_executor.party = Party::kCancel;
  not_executor.consume_signal = SignalConsumption{.seq = 2, .key = "1:y"};
  EXPECT_THAT(store_->Commit(not_executor), StatusIs(absl::StatusCode::kInvalidArgument));
  next = store_->NextSignal(id, "go");
  ASSERT_OK(next);
  ASSERT_TRUE(next->has_value());
  EXPECT_EQ((*next)->seq, 2);
  absl::StatusOr<std::vector<SignalRecord>> all = store_->ListSignals(id, 0, 10);
  ASSERT_OK(all);
  ASSERT_THAT(*all, SizeIs(3));
  EXPECT_EQ((*all)[0].consumed_by, "1:w");
  EXPECT_EQ((*all)[2].name, "other");
  EXPECT_THAT(store_->ListSignals(id, 2, 10), IsOkAndHolds(SizeIs(1)));
  absl::StatusOr<std::optional<SignalRecord>> missing = store_->NextSignal("r_missing", "go");
  ASSERT_OK(missing);
  EXPECT_FALSE(missing->has_value());
  NewSignal unknown;
  unknown.run_id = "r_missing";
  unknown.name = "go";
  EXPECT_THAT(store_->SendSignal(unknown), StatusIs(absl::StatusCode::kNotFound));
}

// A signal sent to a run resting at a wait for it resolves the wait in the
// commit that keeps it: the signal is marked consumed by the wait, the run
// queued with a message and a fresh attempt budget; the wait's timer and a
// second resolution then lose. A finished run takes no signal.
TEST_P(StoreConformanceTest, ASignalResolvesTheWaitOfARunRestingForItInOneCommit) {
  Lease l;
  const std::string id = DriveTo(RunStatus::kRunning, &l);
  ClaimAll();
  RunWrite park = ExecutorWrite(l);
  park.new_status = RunStatus::kWaiting;
  park.wait_for_signal = SignalWait{.signal = "go", .key = "1:w"};
  park.wake_at = Now() + absl::Seconds(10);
  ASSERT_OK(store_->Commit(park));
  absl::StatusOr<RunRecord> waiting = store_->GetRun(id);
  ASSERT_OK(waiting);
  EXPECT_EQ(waiting->status, RunStatus::kWaiting);
  EXPECT_EQ(waiting->wait_signal, "go");
  EXPECT_EQ(waiting->lease_token, "");
  EXPECT_THAT(store_->NextWakeTime(),
              IsOkAndHolds(::testing::Optional(::testing::Eq(*waiting->wake_at))));
  NewSignal other;
  other.run_id = id;
  other.name = "other";
  absl::StatusOr<SendSignalResult> kept = store_->SendSignal(other);
  ASSERT_OK(kept);
  EXPECT_FALSE(kept->resolved);
  EXPECT_EQ(StatusOf(id), RunStatus::kWaiting);

  NewSignal go;
  go.run_id = id;
  go.name = "go";
  go.payload = {{"ok", true}};
  go.events = {Ev("signal.received", {{"name", "go"}})};
  go.wake_events = {Ev("run.resumed", {{"reason", "signal go arrived"}})};
  absl::StatusOr<SendSignalResult> sent = store_->SendSignal(go);
  ASSERT_OK(sent);
  EXPECT_TRUE(sent->created);
  EXPECT_TRUE(sent->resolved);
  EXPECT_EQ(sent->signal.seq, 2);
  EXPECT_EQ(sent->signal.consumed_by, "1:w");
  absl::StatusOr<RunRecord> queued = store_->GetRun(id);
  ASSERT_OK(queued);
  EXPECT_EQ(queued->status, RunStatus::kQueued);
  EXPECT_EQ(queued->wait_signal, "");
  EXPECT_EQ(queued->wake_at, std::nullopt);
  EXPECT_EQ(queued->attempts, 0);
  std::vector<QueueMessage> m = ClaimAll("c2");
  ASSERT_THAT(m, SizeIs(1));
  EXPECT_EQ(m[0].run_id, id);
  absl::StatusOr<std::vector<Event>> evs = store_->ListEvents(id, 0, 0);
  ASSERT_OK(evs);
  ASSERT_GE(evs->size(), 2u);
  const Event& received = (*evs)[evs->size() - 2];
  EXPECT_EQ(received.type, "signal.received");
  EXPECT_EQ(received.data["resolved"], true);
  EXPECT_EQ(evs->back().type, "run.resumed");
  EXPECT_EQ(evs->back().data, (nlohmann::json{{"reason", "signal go arrived"}}));
  EXPECT_THAT(store_->SignalConsumedBy(id, "1:w"),
              IsOkAndHolds(::testing::Optional(Field(&SignalRecord::seq, 2))));
  // The timer found it due too late: its compare-and-set loses.
  Advance(absl::Seconds(11));
  EXPECT_THAT(store_->FindDueTimers(100), IsOkAndHolds(::testing::Not(::testing::Contains(id))));
  RunWrite wake;
  wake.run_id = id;
  wake.party = Party::kTimer;
  wake.expected = {RunStatus::kWaiting};
  wake.new_status = RunStatus::kQueued;
  EXPECT_THAT(store_->Commit(wake), StatusIs(absl::StatusCode::kAborted));
  // A second signal resolves nothing: it waits in the mailbox.
  absl::StatusOr<SendSignalResult> later = store_->SendSignal(go);
  ASSERT_OK(later);
  EXPECT_FALSE(later->resolved);
  RunWrite cancel;
  cancel.run_id = id;
  cancel.party = Party::kCancel;
  cancel.expected = {RunStatus::kQueued};
  cancel.new_status = RunStatus::kCancelled;
  ASSERT_OK(store_->Commit(cancel));
  EXPECT_THAT(store_->SendSignal(go), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(store_->ListSignals(id, 0, 10), IsOkAndHolds(SizeIs(3)));
}

// Acceptance 2 of issue 23: a signal racing the wait's timeout resolves
// exactly one of them, 100 times in 100: the signal's commit and the timer's
// each expect the run waiting, on two threads at once.
TEST_P(StoreConformanceTest, ASignalRacingATimeoutResolvesExactlyOneOfThem) {
  int by_signal = 0, by_timer = 0;
  for (int i = 0; i < 100; ++i) {
    Lease l;
    const std::string id = DriveTo(RunStatus::kRunning, &l);
    RunWrite park = ExecutorWrite(l);
    park.new_status = RunStatus::kWaiting;
    park.wait_for_signal = SignalWait{.signal = "go", .key = "1:w"};
    park.wake_at = Now();  // due at once
    ASSERT_OK(store_->Commit(park));
    absl::StatusOr<SendSignalResult> sent;
    absl::Status woken;
    std::thread signaller([&] {
      NewSignal n;
      n.run_id = id;
      n.name = "go";
      sent = store_->SendSignal(n);
    });
    std::thread timer([&] {
      RunWrite wake;
      wake.run_id = id;
      wake.party = Party::kTimer;
      wake.expected = {RunStatus::kWaiting};
      wake.new_status = RunStatus::kQueued;
      wake.reset_attempts = true;
      woken = store_->Commit(wake);
    });
    signaller.join();
    timer.join();
    ASSERT_OK(sent);
    ASSERT_TRUE(woken.ok() || absl::IsAborted(woken)) << woken;
    EXPECT_NE(sent->resolved, woken.ok()) << "try " << i;
    by_signal += sent->resolved ? 1 : 0;
    by_timer += woken.ok() ? 1 : 0;
    EXPECT_EQ(StatusOf(id), RunStatus::kQueued);
    // The signal is consumed exactly when it won.
    absl::StatusOr<std::optional<SignalRecord>> consumed = store_->SignalConsumedBy(id, "1:w");
    ASSERT_OK(consumed);
    EXPECT_EQ(consumed->has_value(), sent->resolved);
  }
  EXPECT_EQ(by_signal + by_timer, 100);
  RecordProperty("won_by_signal", by_signal);
  RecordProperty("won_by_timer", by_timer);
}

// A wait for a signal with no timeout has no wake time: no timer names it,
// and it is no work to come (`worker --until-idle`).
TEST_P(StoreConformanceTest, AWaitForASignalWithNoTimeoutHasNoWakeTime) {
  Lease l;
  const std::string id = DriveTo(RunStatus::kRunning, &l);
  RunWrite park = ExecutorWrite(l);
  park.new_status = RunStatus::kWaiting;
  park.wait_for_signal = SignalWait{.signal = "go", .key = "1:w"};
  ASSERT_OK(store_->Commit(park));
  EXPECT_EQ(StatusOf(id), RunStatus::kWaiting);
  absl::StatusOr<std::optional<absl::Time>> next = store_->NextWakeTime();
  ASSERT_OK(next);
  EXPECT_FALSE(next->has_value());
  EXPECT_THAT(store_->HasWorkToCome(), IsOkAndHolds(false));
  Advance(absl::Hours(24 * 365));
  EXPECT_THAT(store_->FindDueTimers(100), IsOkAndHolds(::testing::IsEmpty()));
  RunWrite half;  // a wait names its signal and its key
  half.run_id = id;
  half.party = Party::kCancel;
  half.expected = {RunStatus::kWaiting};
  half.new_status = RunStatus::kCancelled;
  half.wait_for_signal = SignalWait{.signal = "go", .key = ""};
  EXPECT_THAT(store_->Commit(half), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(StatusOf(id), RunStatus::kWaiting);
}

// A mailbox keeps at most kMaxMailbox signals not yet consumed.
TEST_P(StoreConformanceTest, AFullMailboxRefusesTheNextSignalAndKeepsNothing) {
  const std::string id = DriveTo(RunStatus::kQueued);
  NewSignal n;
  n.run_id = id;
  n.name = "go";
  for (int i = 0; i < SignalStore::kMaxMailbox; ++i) ASSERT_OK(store_->SendSignal(n));
  const int64_t events = store_->GetRun(id)->last_event_seq;
  EXPECT_THAT(store_->SendSignal(n), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(store_->GetRun(id)->last_event_seq, events);
  EXPECT_THAT(store_->ListSignals(id, SignalStore::kMaxMailbox - 1, 10), IsOkAndHolds(SizeIs(1)));
}

// ---- schedules ----

ScheduleRecord NightlySchedule(const std::string& id, absl::Time next) {
  ScheduleRecord s;
  s.id = id;
  s.workflow = "nightly";
  s.cron = "0 3 * * *";
  s.timezone = "Europe/Paris";
  s.inputs = {{"scope", "all"}};
  s.overlap = "skip";
  s.catch_up = "latest";
  s.next_fire_at = next;
  return s;
}

TEST_P(StoreConformanceTest, SchedulesAreKeptListedReplacedAndDeleted) {
  const absl::Time t0 = Now();
  absl::StatusOr<ScheduleRecord> put = store_->PutSchedule(NightlySchedule("b", t0), false);
  ASSERT_OK(put);
  EXPECT_EQ(put->workflow, "nightly");
  EXPECT_EQ(put->inputs, nlohmann::json({{"scope", "all"}}));
  EXPECT_EQ(put->next_fire_at, t0);
  EXPECT_EQ(put->created_at, Now());
  EXPECT_EQ(put->last_run_id, "");
  EXPECT_FALSE(put->last_fired_at.has_value());
  ASSERT_OK(store_->PutSchedule(NightlySchedule("a", t0), false));
  // The same id again: refused, nothing written.
  ScheduleRecord other = NightlySchedule("b", t0 + absl::Hours(1));
  other.cron = "*/5 * * * *";
  EXPECT_THAT(store_->PutSchedule(other, false), StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(store_->GetSchedule("b"),
              IsOkAndHolds(Optional(Field(&ScheduleRecord::cron, "0 3 * * *"))));
  // Replaced: the definition changes, the last run and creation stay.
  ASSERT_THAT(store_->AdvanceSchedule("b", t0, t0 + absl::Hours(24), "r_1"), IsOkAndHolds(true));
  Advance(absl::Seconds(1));
  absl::StatusOr<ScheduleRecord> replaced = store_->PutSchedule(other, true);
  ASSERT_OK(replaced);
  EXPECT_EQ(replaced->cron, "*/5 * * * *");
  EXPECT_EQ(replaced->next_fire_at, t0 + absl::Hours(1));
  EXPECT_EQ(replaced->last_run_id, "r_1");
  EXPECT_EQ(replaced->created_at, put->created_at);
  EXPECT_EQ(replaced->updated_at, Now());
  // Listed by id, a page at a time.
  absl::StatusOr<std::vector<ScheduleRecord>> page = store_->ListSchedules("", 1);
  ASSERT_OK(page);
  ASSERT_THAT(*page, SizeIs(1));
  EXPECT_EQ((*page)[0].id, "a");
  page = store_->ListSchedules("a", 10);
  ASSERT_OK(page);
  ASSERT_THAT(*page, SizeIs(1));
  EXPECT_EQ((*page)[0].id, "b");
  EXPECT_THAT(store_->DeleteSchedule("a"), IsOkAndHolds(true));
  EXPECT_THAT(store_->DeleteSchedule("a"), IsOkAndHolds(false));
  EXPECT_THAT(store_->GetSchedule("a"), IsOkAndHolds(::testing::Eq(std::nullopt)));
  // What the store cannot keep is refused with nothing written.
  ScheduleRecord bad = NightlySchedule("c", t0);
  bad.overlap = "sometimes";
  EXPECT_THAT(store_->PutSchedule(bad, false), StatusIs(absl::StatusCode::kInvalidArgument));
  bad = NightlySchedule("c d", t0);
  EXPECT_THAT(store_->PutSchedule(bad, false), StatusIs(absl::StatusCode::kInvalidArgument));
  bad = NightlySchedule("c", t0);
  bad.inputs = nlohmann::json::array();
  EXPECT_THAT(store_->PutSchedule(bad, false), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->GetSchedule("c"), IsOkAndHolds(::testing::Eq(std::nullopt)));
}

// Due by the store's clock, earliest first; a paused schedule never is, and
// resumes at the tick its caller gives.
TEST_P(StoreConformanceTest, DueSchedulesComeByTheStoresClockAndPausedOnesNever) {
  const absl::Time t0 = Now();
  ASSERT_OK(store_->PutSchedule(NightlySchedule("late", t0 + absl::Minutes(2)), false));
  ASSERT_OK(store_->PutSchedule(NightlySchedule("early", t0 + absl::Minutes(1)), false));
  ASSERT_OK(store_->PutSchedule(NightlySchedule("held", t0), false));
  ASSERT_THAT(store_->SetSchedulePaused("held", true, t0), IsOkAndHolds(true));
  EXPECT_THAT(store_->FindDueSchedules(10), IsOkAndHolds(IsEmpty()));
  Advance(absl::Minutes(3));
  absl::StatusOr<std::vector<ScheduleRecord>> due = store_->FindDueSchedules(10);
  ASSERT_OK(due);
  ASSERT_THAT(*due, SizeIs(2));
  EXPECT_EQ((*due)[0].id, "early");
  EXPECT_EQ((*due)[1].id, "late");
  EXPECT_THAT(store_->FindDueSchedules(1), IsOkAndHolds(SizeIs(1)));
  // A paused schedule's tick does not fire.
  EXPECT_THAT(store_->AdvanceSchedule("held", t0, t0 + absl::Hours(24), "r_x"),
              IsOkAndHolds(false));
  // Resumed: due at the tick given, not at the ticks it missed.
  ASSERT_THAT(store_->SetSchedulePaused("held", false, Now() + absl::Hours(1)),
              IsOkAndHolds(true));
  absl::StatusOr<std::optional<ScheduleRecord>> held = store_->GetSchedule("held");
  ASSERT_OK(held);
  ASSERT_TRUE(held->has_value());
  EXPECT_FALSE((*held)->paused);
  EXPECT_EQ((*held)->next_fire_at, Now() + absl::Hours(1));
  EXPECT_THAT(store_->FindDueSchedules(10), IsOkAndHolds(SizeIs(2)));
  EXPECT_THAT(store_->SetSchedulePaused("gone", true, t0), IsOkAndHolds(false));
}

// The compare-and-set on the next tick: of several processes firing one tick
// at once, exactly one advances it; a skipped tick keeps the last run.
TEST_P(StoreConformanceTest, ATickAdvancesOnceHoweverManyFireIt) {
  const absl::Time t0 = Now();
  ASSERT_OK(store_->PutSchedule(NightlySchedule("s", t0), false));
  for (int tick = 0; tick < 20; ++tick) {
    const absl::Time at = t0 + absl::Seconds(tick);
    std::atomic<int> won{0};
    std::vector<std::thread> firing;
    for (int p = 0; p < 4; ++p) {
      firing.emplace_back([&, p] {
        absl::StatusOr<bool> r = store_->AdvanceSchedule(
            "s", at, at + absl::Seconds(1), absl::StrCat("r_", tick, "_", p));
        ASSERT_OK(r);
        if (*r) won.fetch_add(1);
      });
    }
    for (std::thread& t : firing) t.join();
    EXPECT_EQ(won.load(), 1) << "tick " << tick;
  }
  absl::StatusOr<std::optional<ScheduleRecord>> s = store_->GetSchedule("s");
  ASSERT_OK(s);
  ASSERT_TRUE(s->has_value());
  EXPECT_EQ((*s)->next_fire_at, t0 + absl::Seconds(20));
  EXPECT_EQ((*s)->last_fired_at, t0 + absl::Seconds(19));
  EXPECT_TRUE(absl::StartsWith((*s)->last_run_id, "r_19_")) << (*s)->last_run_id;
  // A tick that started no run (skipped): fired, and the last run stays.
  ASSERT_THAT(store_->AdvanceSchedule("s", t0 + absl::Seconds(20), t0 + absl::Seconds(21), ""),
              IsOkAndHolds(true));
  s = store_->GetSchedule("s");
  ASSERT_OK(s);
  EXPECT_EQ((*s)->last_fired_at, t0 + absl::Seconds(20));
  EXPECT_TRUE(absl::StartsWith((*s)->last_run_id, "r_19_"));
  // A stale tick (read before another process fired it) changes nothing.
  EXPECT_THAT(store_->AdvanceSchedule("s", t0, t0 + absl::Hours(1), "r_stale"),
              IsOkAndHolds(false));
  EXPECT_THAT(store_->AdvanceSchedule("gone", t0, t0 + absl::Hours(1), "r"), IsOkAndHolds(false));
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Backends, StoreConformanceTest,
                         ::testing::ValuesIn(AllBackendsUnderTest()), FactoryName);

}  // namespace runloom::conformance
