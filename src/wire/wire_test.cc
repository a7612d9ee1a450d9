// The wire form's field names are a contract with scripts and the HTTP API:
// these tests fail when a field is renamed or removed.
#include "wire/wire.h"

#include "runloom/events.h"

#include "gtest/gtest.h"

#include <set>
#include <string>

namespace runloom::wire {
namespace {

std::set<std::string> Keys(const nlohmann::json& j) {
  std::set<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.insert(it.key());
  return keys;
}

TEST(Wire, RunHasEveryDocumentedField) {
  RunRecord r;
  r.id = "r1";
  r.status = RunStatus::kPaused;
  r.created_at = absl::FromUnixSeconds(1'800'000'000);
  nlohmann::json j = RunToJson(r);
  const std::set<std::string> want = {"id",
                                      "workflow",
                                      "workflow_version",
                                      "workflow_digest",
                                      "status",
                                      "inputs",
                                      "inputs_digest",
                                      "idempotency_key",
                                      "phase",
                                      "revision",
                                      "entry",
                                      "pending_gate",
                                      "rerun_from",
                                      "feedback",
                                      "budget",
                                      "lease_owner",
                                      "lease_expires_at",
                                      "attempts",
                                      "max_attempts",
                                      "cancel_requested",
                                      "outcome",
                                      "error",
                                      "last_event_seq",
                                      "created_at",
                                      "updated_at",
                                      "finished_at"};
  for (const std::string& k : want) EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["status"], "paused");
  EXPECT_TRUE(j["created_at"].is_string());
  EXPECT_TRUE(j["finished_at"].is_null());
  EXPECT_TRUE(j["lease_expires_at"].is_null());
}

TEST(Wire, StepAndWorkflowFields) {
  StepRecord s;
  s.path = "refine[2]/write";
  s.state = StepState::kFailed;
  nlohmann::json j = StepToJson(s);
  EXPECT_EQ(Keys(j), (std::set<std::string>{"path", "step_id", "kind", "phase", "revision",
                                            "attempt", "state", "output", "error", "error_class",
                                            "stderr_tail", "started_at", "finished_at"}));
  EXPECT_EQ(j["state"], "failed");
  WorkflowVersion v;
  v.name = "blog";
  v.version = 3;
  v.canonical = {{"name", "blog"}};
  EXPECT_FALSE(WorkflowVersionToJson(v, false).contains("definition"));
  EXPECT_EQ(WorkflowVersionToJson(v, true)["definition"]["name"], "blog");
}

TEST(Wire, EventIsTheDocumentedEnvelope) {
  Event e = RunCreatedEvent("r1", {.workflow = "blog", .workflow_version = 1});
  e.seq = 1;
  nlohmann::json j = EventToJson(e);
  EXPECT_EQ(j["type"], "run.created");
  EXPECT_EQ(j["run_id"], "r1");
  EXPECT_EQ(j["seq"], 1);
  EXPECT_EQ(Keys(j),
            (std::set<std::string>{"run_id", "seq", "type", "schema_version", "at", "data"}));
}

TEST(Wire, GateHasEveryDocumentedField) {
  nlohmann::json j = GateToJson(PendingGate{.step_path = "outline_review",
                                            .proposal = {{"text", "an outline"}},
                                            .allowed_decisions = {"approve", "reject"}});
  EXPECT_EQ(Keys(j),
            (std::set<std::string>{"path", "step_id", "phase", "proposal", "proposal_digest",
                                   "allow", "revision_phase", "title"}));
  EXPECT_EQ(j["path"], "outline_review");
  EXPECT_EQ(j["proposal"]["text"], "an outline");
  EXPECT_EQ(j["allow"], nlohmann::json::array({"approve", "reject"}));
}

TEST(Wire, RunPageHasRunsAndNextCursor) {
  RunPage page;
  page.runs.resize(2);
  page.runs[0].id = "r2";
  page.runs[1].id = "r1";
  page.next_cursor = "MTox";
  nlohmann::json j = RunPageToJson(page);
  EXPECT_EQ(Keys(j), (std::set<std::string>{"runs", "next_cursor"}));
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][0]["id"], "r2");
  EXPECT_EQ(j["runs"][1]["status"], "queued");
  EXPECT_EQ(j["next_cursor"], "MTox");
  nlohmann::json last = RunPageToJson(RunPage{});
  EXPECT_TRUE(last["runs"].is_array());
  EXPECT_TRUE(last["runs"].empty());
  EXPECT_EQ(last["next_cursor"], "");
}

TEST(Wire, DeadLetterHasEveryDocumentedField) {
  DeadLetter d{.id = "7",
               .message_id = "12",
               .run_id = "r1",
               .deliveries = 3,
               .reason = "delivered 3 times",
               .at = absl::FromUnixSeconds(0)};
  nlohmann::json j = DeadLetterToJson(d);
  EXPECT_EQ(Keys(j),
            (std::set<std::string>{"id", "run_id", "message_id", "deliveries", "reason", "at"}));
  EXPECT_EQ(j["id"], "7");
  EXPECT_EQ(j["message_id"], "12");
  EXPECT_EQ(j["run_id"], "r1");
  EXPECT_EQ(j["deliveries"], 3);
  EXPECT_EQ(j["at"], FormatEventTime(absl::FromUnixSeconds(0)));
}

TEST(Wire, TokenHasEveryDocumentedFieldAndNoSecret) {
  TokenRecord t{.id = "tok_1",
                .name = "ci",
                .role = Role::kApprover,
                .created_at = absl::FromUnixSeconds(0),
                .revoked_at = std::nullopt};
  nlohmann::json j = TokenToJson(t);
  EXPECT_EQ(Keys(j), (std::set<std::string>{"id", "name", "role", "created_at", "revoked_at"}));
  EXPECT_EQ(j["role"], "approver");
  EXPECT_TRUE(j["revoked_at"].is_null());
  t.revoked_at = absl::FromUnixSeconds(60);
  EXPECT_EQ(TokenToJson(t)["revoked_at"], FormatEventTime(absl::FromUnixSeconds(60)));
}

TEST(Wire, RunContextGoesOutByItsNamedFieldsOnly) {
  RunRecord r;
  r.id = "r1";
  r.context = {{"working_dir", "/srv/pipelines/private"},
               {"feedback", "shorter"},
               {"rerun_from", "research"},
               {"budget", {{"tenant", "acme"}, {"limit_micros", 5000}}},
               {"pending_gate",
                {{"path", "review"}, {"step_id", "review"}, {"proposal_digest", "sha256:x"}}}};
  nlohmann::json j = RunToJson(r);
  EXPECT_FALSE(j.contains("context"));
  EXPECT_EQ(j["feedback"], "shorter");
  EXPECT_EQ(j["rerun_from"], "research");
  EXPECT_EQ(j["budget"], (nlohmann::json{{"tenant", "acme"}, {"limit_micros", 5000}}));
  EXPECT_EQ(j["pending_gate"]["path"], "review");
  EXPECT_EQ(j.dump().find("/srv/pipelines/private"), std::string::npos);
  r.context = nlohmann::json::object();
  j = RunToJson(r);
  EXPECT_TRUE(j["pending_gate"].is_null());
  EXPECT_TRUE(j["budget"].is_null());
  EXPECT_EQ(j["feedback"], "");
}

}  // namespace
}  // namespace runloom::wire
