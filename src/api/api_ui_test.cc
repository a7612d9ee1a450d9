// Issue 25's operator reads: GET /api/v1/budgets, GET /api/v1/llm/caps and
// the search filters of GET /api/v1/runs (tenant, input id, time range).
// Bad or hostile query parameters are 400s that name the parameter and write
// nothing.
#include "testing/api_test_util.h"

#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"

namespace runloom::api::testing {
namespace {

using ::testing::HasSubstr;

inline constexpr char kTenantYaml[] = R"(
name: billed
tenant: team
inputs:
  team: {type: string}
  doc: {type: string, default: ""}
steps:
  - id: only
    kind: count
)";

class ApiUiTest : public ApiTest {
 protected:
  void SetUp() override {
    ApiTest::SetUp();
    absl::StatusOr<Workflow> wf = LoadWorkflowYaml(kTenantYaml, "billed.yaml");
    ASSERT_OK(wf);
    ASSERT_OK(engine()->RegisterWorkflow(*wf));
  }

  std::string StartBilled(const std::string& team, const std::string& doc,
                          const std::string& key = "") {
    nlohmann::json body = {{"workflow", "billed"}, {"inputs", {{"team", team}, {"doc", doc}}}};
    if (!key.empty()) body["idempotency_key"] = key;
    ClientResponse r = Post("/api/v1/runs", body.dump(), "operator-token");
    EXPECT_EQ(r.status, 201) << r.body;
    const std::string id = r.json().value("id", "");
    EXPECT_OK(engine()->AwaitRun(id, engine()->clock()->Now() + absl::Seconds(20)));
    return id;
  }

  std::vector<std::string> RunIds(const std::string& query) {
    ClientResponse r = Get("/api/v1/runs?" + query);
    EXPECT_EQ(r.status, 200) << query << ": " << r.body;
    std::vector<std::string> ids;
    for (const nlohmann::json& run : r.json().value("runs", nlohmann::json::array())) {
      ids.push_back(run.value("id", ""));
    }
    return ids;
  }

  // The 400 for `target`, naming `field`.
  void ExpectBad(const std::string& target, const std::string& field) {
    ClientResponse r = Get(target);
    EXPECT_EQ(r.status, 400) << target << ": " << r.body;
    EXPECT_EQ(r.json().value("code", ""), "invalid_argument") << target;
    EXPECT_EQ(r.json().value("field", ""), field) << target << ": " << r.body;
    EXPECT_FALSE(r.json().value("message", "").empty()) << target;
  }
};

TEST_F(ApiUiTest, BudgetsShowLimitSpentReservedAndLeftPerTenant) {
  ASSERT_OK(engine()->store()->SetTenantBudget("acme", 5'000'000));
  ASSERT_OK(engine()->store()->SetTenantBudget("free", std::nullopt));
  ClientResponse r = Get("/api/v1/budgets");
  ASSERT_EQ(r.status, 200) << r.body;
  const nlohmann::json budgets = r.json()["budgets"];
  ASSERT_EQ(budgets.size(), 2u) << r.body;
  EXPECT_EQ(budgets[0]["tenant"], "acme");
  EXPECT_EQ(budgets[0]["limit_micros"], 5'000'000);
  EXPECT_EQ(budgets[0]["spent_micros"], 0);
  EXPECT_EQ(budgets[0]["reserved_micros"], 0);
  EXPECT_EQ(budgets[0]["left_micros"], 5'000'000);
  EXPECT_EQ(budgets[1]["tenant"], "free");
  EXPECT_TRUE(budgets[1]["limit_micros"].is_null());
  EXPECT_TRUE(budgets[1]["left_micros"].is_null());

  EXPECT_EQ(Get("/api/v1/budgets?tenant=acme").json()["budgets"].size(), 1u);
  EXPECT_EQ(Get("/api/v1/budgets?tenant=nobody").json()["budgets"].size(), 0u);
  EXPECT_EQ(Get("/api/v1/budgets", "").status, 401);
}

TEST_F(ApiUiTest, BudgetsRefuseBadQueryParametersAndWriteNothing) {
  ASSERT_OK(engine()->store()->SetTenantBudget("acme", 1));
  ExpectBad("/api/v1/budgets?tenant=", "tenant");
  ExpectBad("/api/v1/budgets?tenant=" + std::string(300, 'a'), "tenant");
  ExpectBad("/api/v1/budgets?tennant=acme", "tennant");
  ExpectBad("/api/v1/budgets?limit_micros=0", "limit_micros");
  ClientResponse odd = Get("/api/v1/budgets?%00%27%3B=1");
  EXPECT_EQ(odd.status, 400);
  EXPECT_THAT(odd.json().value("message", ""), HasSubstr("unknown query parameter"));
  absl::StatusOr<std::vector<TenantBudget>> after = engine()->store()->ListTenantBudgets();
  ASSERT_OK(after);
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ(after->front().figures.limit_micros, 1);
  EXPECT_EQ(CountRuns(), 0);
}

TEST_F(ApiUiTest, CapsAnswerWithTheHistoryBoundAndRefuseBadParameters) {
  // The harness's registry has no provider with a concurrency cap.
  ClientResponse r = Get("/api/v1/llm/caps");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(r.json()["caps"].is_array());
  EXPECT_EQ(r.json()["history_limit"], kMaxLlmCapHistory);
  EXPECT_EQ(Get("/api/v1/llm/caps?provider=openai&history=3").status, 200);
  ExpectBad("/api/v1/llm/caps?history=-1", "history");
  ExpectBad("/api/v1/llm/caps?history=65", "history");
  ExpectBad("/api/v1/llm/caps?history=1e3", "history");
  ExpectBad("/api/v1/llm/caps?history=99999999999999999999999", "history");
  ExpectBad("/api/v1/llm/caps?provider=", "provider");
  ExpectBad("/api/v1/llm/caps?provider=" + std::string(257, 'p'), "provider");
  ExpectBad("/api/v1/llm/caps?cap=9", "cap");
  EXPECT_EQ(Get("/api/v1/llm/caps", "").status, 401);
  EXPECT_EQ(CountRuns(), 0);
}

TEST_F(ApiUiTest, RunsFilterByTenantInputIdAndTimeRange) {
  const std::string a = StartBilled("red", "doc-1", "order-77");
  const std::string b = StartBilled("blue", "doc-2");
  const std::string c = StartBilled("red", "doc-3");
  EXPECT_THAT(RunIds("tenant=red"), ::testing::ElementsAre(c, a));
  EXPECT_THAT(RunIds("tenant=blue"), ::testing::ElementsAre(b));
  EXPECT_THAT(RunIds("tenant=green"), ::testing::IsEmpty());
  EXPECT_THAT(RunIds("input_id=doc-2"), ::testing::ElementsAre(b));
  EXPECT_THAT(RunIds("input_id=order-77"), ::testing::ElementsAre(a));  // the idempotency key
  EXPECT_THAT(RunIds("input_id=doc-3&tenant=blue"), ::testing::IsEmpty());
  EXPECT_THAT(RunIds("workflow=billed&status=completed&tenant=red&input_id=doc-1"),
              ::testing::ElementsAre(a));

  // Paging goes on after a filtered page.
  ClientResponse first = Get("/api/v1/runs?tenant=red&limit=1");
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_EQ(first.json()["runs"].size(), 1u);
  EXPECT_EQ(first.json()["runs"][0]["id"], c);
  const std::string cursor = first.json().value("next_cursor", "");
  ASSERT_FALSE(cursor.empty());
  ClientResponse second = Get("/api/v1/runs?tenant=red&limit=1&cursor=" + cursor);
  ASSERT_EQ(second.status, 200) << second.body;
  ASSERT_EQ(second.json()["runs"].size(), 1u);
  EXPECT_EQ(second.json()["runs"][0]["id"], a);
  EXPECT_EQ(second.json().value("next_cursor", "x"), "");

  // Time range: created_after is inclusive, created_before exclusive.
  absl::StatusOr<RunRecord> run_b = engine()->GetRun(b);
  ASSERT_OK(run_b);
  // "+00:00" in a query must be sent as %2B: a '+' is a space there.
  const std::string at_b = absl::StrReplaceAll(
      absl::FormatTime(absl::RFC3339_full, run_b->created_at, absl::UTCTimeZone()), {{"+", "%2B"}});
  EXPECT_THAT(RunIds("created_after=" + at_b), ::testing::ElementsAre(c, b));
  EXPECT_THAT(RunIds("created_before=" + at_b), ::testing::ElementsAre(a));
  EXPECT_THAT(RunIds("created_after=2000-01-01T00:00:00Z&created_before=2001-01-01T00:00:00Z"),
              ::testing::IsEmpty());
}

TEST_F(ApiUiTest, RunFiltersRefuseBadValuesAndWriteNothing) {
  StartBilled("red", "doc-1");
  ExpectBad("/api/v1/runs?created_after=yesterday", "created_after");
  ExpectBad("/api/v1/runs?created_before=2026-13-01T00:00:00Z", "created_before");
  ExpectBad("/api/v1/runs?created_after=" + std::string(100, '9'), "created_after");
  ExpectBad("/api/v1/runs?tenant=" + std::string(300, 't'), "tenant");
  ExpectBad("/api/v1/runs?input_id=" + std::string(300, 'i'), "input_id");
  ClientResponse reversed =
      Get("/api/v1/runs?created_after=2026-01-02T00:00:00Z&created_before=2026-01-01T00:00:00Z");
  EXPECT_EQ(reversed.status, 400) << reversed.body;
  EXPECT_THAT(reversed.json().value("message", ""), HasSubstr("created_after must be before"));
  EXPECT_EQ(CountRuns(), 1);
}

}  // namespace
}  // namespace runloom::api::testing
