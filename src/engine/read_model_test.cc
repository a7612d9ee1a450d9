// The engine's read model on a real SQLite store: run pages and their
// cursors, input checks, and the reads of one run.
#include "runloom/engine.h"

#include "testing/engine_test_util.h"
#include "testing/status_matchers.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace runloom {
namespace {

using ::runloom::testing::IsOkAndHolds;
using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;

std::string Start(Engine& engine, const std::string& workflow) {
  auto wf = LoadWorkflowYaml(
      absl::StrCat("name: ", workflow, "\nsteps:\n  - {id: a, kind: count}\n"), workflow + ".yaml");
  EXPECT_OK(wf);
  auto started = engine.StartRun({.workflow = *wf});
  EXPECT_OK(started);
  return started.ok() ? started->run.id : "";
}

struct Pages {
  std::vector<std::string> ids;  // every run, in order
  int pages = 0;
};

// Every page of `query` until next_cursor is empty.
Pages AllPages(Engine& engine, RunQuery query) {
  Pages out;
  do {
    absl::StatusOr<RunPage> page = engine.ListRuns(query);
    EXPECT_OK(page);
    if (!page.ok()) break;
    ++out.pages;
    EXPECT_LE(static_cast<int>(page->runs.size()), query.limit);
    for (const RunRecord& r : page->runs) out.ids.push_back(r.id);
    query.cursor = page->next_cursor;
  } while (!query.cursor.empty() && out.pages < 100);
  return out;
}

class ReadModelTest : public ::testing::Test {
 protected:
  // Time stands still: every run below is created in the same microsecond.
  SimulatedClock clock_;
  Harness h_{EngineOptions{}, &clock_};
  Engine& engine() { return *h_.engine; }
};

TEST_F(ReadModelTest, ListRunsPagesEveryRunOnceNewestFirst) {
  std::vector<std::string> ids, blog;
  for (int i = 0; i < 7; ++i) {
    ids.push_back(Start(engine(), i % 2 == 0 ? "blog" : "ingest"));
    if (i % 2 == 0) blog.push_back(ids.back());
  }
  // Same created_at: the run id breaks the tie, descending.
  std::sort(ids.rbegin(), ids.rend());
  std::sort(blog.rbegin(), blog.rend());
  Pages all = AllPages(engine(), {.limit = 2});
  EXPECT_EQ(all.ids, ids);
  EXPECT_EQ(all.pages, 4);
  // A full last page says there is no next one (no trailing empty page).
  Pages blogs = AllPages(engine(), {.workflow = "blog", .limit = 2});
  EXPECT_EQ(blogs.ids, blog);
  EXPECT_EQ(blogs.pages, 2);
  Pages one = AllPages(engine(), {.limit = 1000});
  EXPECT_EQ(one.ids, ids);
  EXPECT_EQ(one.pages, 1);
  // A limit over the maximum is clamped, not refused.
  EXPECT_EQ(AllPages(engine(), {.limit = kMaxReadLimit + 1}).ids, ids);

  // Filters combine with paging.
  ASSERT_OK(engine().Cancel(blog[1], "test"));
  EXPECT_EQ(AllPages(engine(), {.status = RunStatus::kCancelled, .limit = 1}).ids,
            std::vector<std::string>{blog[1]});
  Pages queued_blog =
      AllPages(engine(), {.status = RunStatus::kQueued, .workflow = "blog", .limit = 1});
  EXPECT_EQ(queued_blog.ids, (std::vector<std::string>{blog[0], blog[2], blog[3]}));
  EXPECT_EQ(queued_blog.pages, 3);
  EXPECT_TRUE(AllPages(engine(), {.workflow = "nope", .limit = 5}).ids.empty());
}

TEST_F(ReadModelTest, RunsCreatedAfterTheFirstPageDoNotShiftTheNext) {
  for (int i = 0; i < 4; ++i) Start(engine(), "blog");
  absl::StatusOr<RunPage> first = engine().ListRuns({.limit = 2});
  ASSERT_OK(first);
  ASSERT_FALSE(first->next_cursor.empty());
  absl::StatusOr<RunPage> second = engine().ListRuns({.limit = 2, .cursor = first->next_cursor});
  ASSERT_OK(second);
  clock_.Advance(absl::Seconds(1));
  Start(engine(), "blog");
  Start(engine(), "blog");
  absl::StatusOr<RunPage> again = engine().ListRuns({.limit = 2, .cursor = first->next_cursor});
  ASSERT_OK(again);
  ASSERT_EQ(again->runs.size(), second->runs.size());
  for (size_t i = 0; i < again->runs.size(); ++i) EXPECT_EQ(again->runs[i].id, second->runs[i].id);
  EXPECT_TRUE(again->next_cursor.empty());
}

// Issue 25's search: tenant, input id and time range are checked by the
// engine over the store's pages; a page ends at `limit` matches and the
// next goes on after its last run, with no empty last page.
TEST_F(ReadModelTest, SearchFiltersTenantInputIdAndTimeAcrossPages) {
  auto wf = LoadWorkflowYaml(
      "name: tenanted\ntenant: team\ninputs:\n  team: {type: string}\n  n: {type: integer}\n"
      "steps:\n  - {id: a, kind: count}\n",
      "tenanted.yaml");
  ASSERT_OK(wf);
  std::vector<std::string> red;
  for (int i = 0; i < 6; ++i) {
    auto started = engine().StartRun(
        {.workflow = *wf, .inputs = {{"team", i % 2 == 0 ? "red" : "blue"}, {"n", 100 + i}}});
    ASSERT_OK(started);
    if (i % 2 == 0) red.push_back(started->run.id);
  }
  Start(engine(), "other");
  // Newest first, as the unfiltered list orders them.
  std::vector<std::string> want;
  for (const std::string& id : AllPages(engine(), {.limit = 100}).ids) {
    if (std::find(red.begin(), red.end(), id) != red.end()) want.push_back(id);
  }
  ASSERT_EQ(want.size(), 3u);
  Pages by_tenant = AllPages(engine(), {.limit = 1, .tenant = "red"});
  EXPECT_EQ(by_tenant.ids, want);
  EXPECT_EQ(by_tenant.pages, 3);
  EXPECT_EQ(AllPages(engine(), {.limit = 2, .tenant = "red"}).ids, want);
  EXPECT_EQ(AllPages(engine(), {.limit = 5, .input_id = "104"}).ids,
            std::vector<std::string>{red[2]});
  EXPECT_TRUE(AllPages(engine(), {.limit = 5, .tenant = "blue", .input_id = "104"}).ids.empty());

  // Every run was created at the clock's now: before is strict, after is not.
  const absl::Time now = clock_.Now();
  EXPECT_TRUE(AllPages(engine(), {.limit = 10, .created_before = now}).ids.empty());
  EXPECT_EQ(AllPages(engine(), {.limit = 10, .created_after = now}).ids.size(), 7u);
  EXPECT_EQ(
      AllPages(engine(), {.limit = 10, .created_before = now + absl::Microseconds(1)}).ids.size(),
      7u);
  EXPECT_THAT(engine().ListRuns({.created_after = now, .created_before = now}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("created_after")));
  EXPECT_THAT(engine().ListRuns({.tenant = std::string(300, 't')}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tenant")));
}

TEST_F(ReadModelTest, BadCursorsAndLimitsAreInvalidArguments) {
  static constexpr char kNasty[] = "\0\xff'; DROP TABLE runs; --";
  for (int i = 0; i < 3; ++i) Start(engine(), "blog");
  const std::vector<std::string> bad = {
      "not a cursor!",                                                         // not base64url
      absl::WebSafeBase64Escape("hello"),                                      // no fields
      absl::WebSafeBase64Escape("2:1:r_x"),                                    // unknown version
      absl::WebSafeBase64Escape("1:soon:r_x"),                                 // time not a number
      absl::WebSafeBase64Escape("1:-5:r_x"),                                   // negative time
      absl::WebSafeBase64Escape("1:99999999999999999999:r_x"),                 // out of range
      absl::WebSafeBase64Escape("1:5:"),                                       // no run id
      absl::WebSafeBase64Escape(absl::StrCat("1:5:", std::string(300, 'r'))),  // id too long
      std::string(600, 'A'),                                                   // too long to be one
      std::string(kNasty, sizeof(kNasty) - 1),
  };
  for (const std::string& cursor : bad) {
    absl::StatusOr<RunPage> page = engine().ListRuns({.limit = 2, .cursor = cursor});
    EXPECT_THAT(page.status(), StatusIs(absl::StatusCode::kInvalidArgument)) << cursor;
    EXPECT_THAT(std::string(page.status().message()),
                HasSubstr("pass the next_cursor of the previous page"))
        << cursor;
    EXPECT_LT(page.status().message().size(), 300u) << "bounded message";
  }
  // A well-formed cursor nobody issued is only a position.
  absl::StatusOr<RunPage> forged =
      engine().ListRuns({.limit = 2, .cursor = absl::WebSafeBase64Escape("1:0:r_")});
  ASSERT_OK(forged);
  EXPECT_TRUE(forged->runs.empty());
  EXPECT_THAT(engine().ListRuns({.limit = 0}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(engine().ListRuns({.limit = -3}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(engine().ListRuns({.workflow = std::string(257, 'w')}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(ReadModelTest, ReadsOfOneRunCheckTheirArguments) {
  const std::string id = Start(engine(), "blog");
  ASSERT_OK(engine().GetRun(id));
  EXPECT_THAT(engine().GetRun("r_nope").status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(engine().GetRun("").status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(engine().GetRun(std::string(257, 'r')).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));

  // A queued run has no steps yet, which is not "no such run".
  EXPECT_THAT(engine().ListSteps(id, std::nullopt),
              ::runloom::testing::IsOkAndHolds(::testing::IsEmpty()));
  EXPECT_THAT(engine().ListSteps("r_nope", std::nullopt).status(),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(engine().ListSteps(id, 0).status(), StatusIs(absl::StatusCode::kInvalidArgument));

  absl::StatusOr<std::vector<Event>> events = engine().ListEvents(id, 0, 10);
  ASSERT_OK(events);
  ASSERT_FALSE(events->empty());
  EXPECT_EQ(events->front().type, "run.created");
  EXPECT_THAT(engine().ListEvents(id, events->back().seq, 10),
              ::runloom::testing::IsOkAndHolds(::testing::IsEmpty()));
  EXPECT_THAT(engine().ListEvents("r_nope", 0, 10).status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(engine().ListEvents(id, -1, 10).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(engine().ListEvents(id, 0, 0).status(), StatusIs(absl::StatusCode::kInvalidArgument));

  absl::StatusOr<std::optional<PendingGate>> gate = engine().GetPendingGate(id);
  ASSERT_OK(gate);
  EXPECT_FALSE(gate->has_value()) << "a queued run waits on no gate";
  EXPECT_THAT(engine().GetPendingGate("r_nope").status(), StatusIs(absl::StatusCode::kNotFound));

  absl::StatusOr<std::vector<WorkflowVersion>> wfs = engine().ListWorkflows();
  ASSERT_OK(wfs);
  ASSERT_EQ(wfs->size(), 1u);
  EXPECT_EQ((*wfs)[0].name, "blog");
  absl::StatusOr<WorkflowVersion> latest = engine().GetWorkflow("blog", 0);
  ASSERT_OK(latest);
  EXPECT_EQ(latest->version, 1);
  EXPECT_THAT(engine().GetWorkflow("blog", 2).status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(engine().GetWorkflow("nope", 0).status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(engine().GetWorkflow("blog", -1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(engine().GetWorkflow("", 0).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ReadModel, PendingGateOfAPausedRun) {
  Harness h;
  RunRecord paused = h.RunYaml(R"(
name: gated
steps:
  - id: draft
    kind: count
  - id: review
    kind: approval
    proposal: {text: "draft {{ steps.draft.output.n }}"}
)");
  ASSERT_EQ(paused.status, RunStatus::kPaused);
  absl::StatusOr<std::optional<PendingGate>> gate = h.engine->GetPendingGate(paused.id);
  ASSERT_OK(gate);
  ASSERT_TRUE(gate->has_value());
  EXPECT_EQ((*gate)->step_path, "review");
  EXPECT_EQ((*gate)->proposal["text"], "draft 1");
  // The same rule on a record already read.
  absl::StatusOr<std::optional<PendingGate>> of_record = PendingGateOfPaused(paused);
  ASSERT_OK(of_record);
  ASSERT_TRUE(of_record->has_value());
  EXPECT_EQ((*of_record)->proposal_digest, (*gate)->proposal_digest);
  // Decided: no longer paused, so no gate.
  ASSERT_OK(h.engine->Decide(
      paused.id, {.proposal_digest = (*gate)->proposal_digest, .decision = Decision::kApprove}, "test"));
  gate = h.engine->GetPendingGate(paused.id);
  ASSERT_OK(gate);
  EXPECT_FALSE(gate->has_value());
}

// Claims every visible message and dies, until the transport dead-letters
// them (the default cap is 10 deliveries).
void ClaimAndDieUntilDeadLettered(Engine& engine, SimulatedClock& clock) {
  constexpr absl::Duration kVisibility = absl::Seconds(1);
  for (int i = 0; i <= TransportOptions{}.max_deliveries; ++i) {
    EXPECT_OK(engine.transport()->Claim("dies", 10, kVisibility));
    clock.Advance(kVisibility);
  }
}

TEST_F(ReadModelTest, DeadLettersAreListedAndRedrivenOneByOneOrAll) {
  const std::string first = Start(engine(), "first");
  const std::string second = Start(engine(), "second");
  ClaimAndDieUntilDeadLettered(engine(), clock_);

  absl::StatusOr<std::vector<DeadLetter>> all = engine().ListDeadLetters(10);
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].run_id, first);
  EXPECT_EQ((*all)[1].run_id, second);
  EXPECT_EQ((*all)[0].deliveries, TransportOptions{}.max_deliveries);
  EXPECT_THAT((*all)[0].reason, HasSubstr("without an ack"));
  absl::StatusOr<std::vector<DeadLetter>> one = engine().ListDeadLetters(1);
  ASSERT_OK(one);
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].id, (*all)[0].id);

  ASSERT_OK(engine().RedriveDeadLetter((*all)[0].id));
  EXPECT_THAT(engine().RedriveDeadLetter((*all)[0].id), StatusIs(absl::StatusCode::kNotFound));
  absl::StatusOr<std::vector<DeadLetter>> left = engine().ListDeadLetters(10);
  ASSERT_OK(left);
  ASSERT_EQ(left->size(), 1u);
  EXPECT_EQ((*left)[0].run_id, second);
  EXPECT_THAT(engine().RedriveAllDeadLetters(), IsOkAndHolds(1));
  EXPECT_THAT(engine().RedriveAllDeadLetters(), IsOkAndHolds(0));
  EXPECT_THAT(engine().ListDeadLetters(10), IsOkAndHolds(::testing::IsEmpty()));

  // Both runs are delivered again, each with a fresh count.
  absl::StatusOr<std::vector<QueueMessage>> again =
      engine().transport()->Claim("worker", 10, absl::Seconds(60));
  ASSERT_OK(again);
  ASSERT_EQ(again->size(), 2u);
  for (const QueueMessage& m : *again) EXPECT_EQ(m.deliveries, 1) << m.run_id;
}

TEST_F(ReadModelTest, SignalsChangesAndTheStoresTimeAreReadThroughTheEngine) {
  const std::string id = Start(engine(), "blog");
  // A run without signals has an empty mailbox; no run is not found.
  EXPECT_THAT(engine().ListSignals(id), IsOkAndHolds(::testing::IsEmpty()));
  EXPECT_THAT(engine().ListSignals("r_nope").status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(engine().ListSignals("").status(), StatusIs(absl::StatusCode::kInvalidArgument));

  // The store's time is the simulated clock the store was given.
  EXPECT_THAT(engine().Now(), IsOkAndHolds(clock_.Now()));
  absl::StatusOr<std::vector<RunRecord>> changed = engine().ListRunsChangedSince(clock_.Now());
  ASSERT_OK(changed);
  ASSERT_EQ(changed->size(), 1u);
  EXPECT_EQ(changed->front().id, id);
  clock_.Advance(absl::Seconds(1));
  EXPECT_THAT(engine().ListRunsChangedSince(clock_.Now()), IsOkAndHolds(::testing::IsEmpty()));

  // More changed runs than one read returns: the caller is told to start over.
  for (int i = 0; i < kMaxReadLimit; ++i) Start(engine(), "blog");
  EXPECT_THAT(engine().ListRunsChangedSince(absl::UnixEpoch()).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("first page")));
}

TEST(ReadModel, OpenSetsTheConfiguredTenantBudgets) {
  Harness h(EngineOptions{.tenant_budgets = {{"acme", 5'000'000}, {"globex", 0}}});
  for (const auto& [tenant, limit] : std::map<std::string, int64_t>{{"acme", 5'000'000},
                                                                    {"globex", 0}}) {
    absl::StatusOr<std::optional<TenantBudget>> b = h.engine->store()->GetTenantBudget(tenant);
    ASSERT_OK(b);
    ASSERT_TRUE(b->has_value()) << tenant;
    EXPECT_EQ((*b)->figures.limit_micros, limit) << tenant;
  }
}

TEST_F(ReadModelTest, DeadLetterCallsCheckTheirArguments) {
  EXPECT_THAT(engine().ListDeadLetters(0).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(engine().RedriveDeadLetter(""), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(engine().RedriveDeadLetter(std::string(300, '1')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(engine().RedriveDeadLetter("x"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(engine().RedriveDeadLetter("999"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(engine().RedriveAllDeadLetters(), IsOkAndHolds(0));
}

}  // namespace
}  // namespace runloom
