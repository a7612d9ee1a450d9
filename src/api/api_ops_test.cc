// Operations over real HTTP: decisions (digest binding, reviewer from the
// token, 409s that record nothing), cancel, rerun, reset, workflows, dead
// letters, health and metrics, and who may do each.
#include "runloom/events.h"

#include "testing/api_test_util.h"

#include "gmock/gmock.h"

namespace runloom::api::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string DecisionBody(const std::string& digest, const std::string& decision) {
  return nlohmann::json{{"digest", digest}, {"decision", decision}}.dump();
}

TEST_F(ApiTest, DecisionIsBoundToTheDigestAndTheReviewerIsTheToken) {
  RunRecord run = StartAndAwait("gated");
  ASSERT_EQ(run.status, RunStatus::kPaused);
  const std::string url = "/api/v1/runs/" + run.id + "/decisions";
  const std::string digest = Get("/api/v1/runs/" + run.id + "/gate").json()["proposal_digest"];
  const int64_t events_before = engine()->GetRun(run.id)->last_event_seq;

  EXPECT_EQ(Post(url, DecisionBody(digest, "approve"), "viewer-token").status, 403);
  EXPECT_EQ(Post(url, DecisionBody(digest, "approve"), "operator-token").status, 403);
  EXPECT_EQ(Post(url, DecisionBody(digest, "approve"), "").status, 401);
  ClientResponse stale = Post(url, DecisionBody("sha256:0000", "approve"), "approver-token");
  EXPECT_EQ(stale.status, 409);
  EXPECT_EQ(stale.json().value("code", ""), "stale_digest");
  EXPECT_THAT(stale.body, Not(HasSubstr(digest)));
  ClientResponse forged =
      Post(url, R"({"digest": ")" + digest + R"(", "decision": "approve", "reviewer": "mallory"})",
           "approver-token");
  EXPECT_EQ(forged.status, 400);
  EXPECT_EQ(forged.json().value("field", ""), "reviewer");
  EXPECT_EQ(Post(url, DecisionBody(digest, "shrug"), "approver-token").json().value("field", ""),
            "decision");
  ClientResponse bad_phase =
      Post(url,
           nlohmann::json{
               {"digest", digest}, {"decision", "request_revision"}, {"from_phase", "nowhere"}}
               .dump(),
           "approver-token");
  EXPECT_EQ(bad_phase.status, 400) << bad_phase.body;
  EXPECT_EQ(bad_phase.json().value("field", ""), "from_phase");
  EXPECT_EQ(
      Post("/api/v1/runs/nope/decisions", DecisionBody(digest, "approve"), "approver-token").status,
      404);
  EXPECT_EQ(engine()->GetRun(run.id)->last_event_seq, events_before);  // nothing recorded

  ClientResponse ok = Post(url, DecisionBody(digest, "approve"), "approver-token");
  ASSERT_EQ(ok.status, 200) << ok.body;
  absl::StatusOr<std::vector<Event>> events = engine()->ListEvents(run.id, 0, 1000);
  ASSERT_OK(events);
  bool decided = false;
  for (const Event& e : *events) {
    if (e.type == event_types::kRunDecided) {
      decided = true;
      EXPECT_EQ(e.data["reviewer"], "ana-approver");
    }
  }
  EXPECT_TRUE(decided);
  absl::StatusOr<RunRecord> done =
      engine()->AwaitRun(run.id, engine()->clock()->Now() + absl::Seconds(20));
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCompleted);
  ClientResponse late = Post(url, DecisionBody(digest, "approve"), "admin-token");
  EXPECT_EQ(late.status, 409);
  EXPECT_EQ(late.json().value("code", ""), "not_paused");
}

TEST_F(ApiTest, CancelAndRerunNeedAnOperator) {
  RunRecord paused = StartAndAwait("gated");
  const std::string base = "/api/v1/runs/" + paused.id;
  EXPECT_EQ(Post(base + "/cancel", "", "viewer-token").status, 403);
  EXPECT_EQ(Post(base + "/cancel", R"({"why": 1})", "operator-token").status, 400);
  EXPECT_EQ(engine()->GetRun(paused.id)->status, RunStatus::kPaused);
  ClientResponse cancelled = Post(base + "/cancel", "", "operator-token");
  ASSERT_EQ(cancelled.status, 200) << cancelled.body;
  EXPECT_EQ(cancelled.json()["status"], "cancelled");
  EXPECT_EQ(Post(base + "/cancel", "", "operator-token").status, 409);
  EXPECT_EQ(Post("/api/v1/runs/nope/cancel", "", "operator-token").status, 404);

  RunRecord done = StartAndAwait("quick");
  const std::string rerun = "/api/v1/runs/" + done.id + "/rerun";
  EXPECT_EQ(Post(rerun, R"({"from_phase": "main"})", "viewer-token").status, 403);
  EXPECT_EQ(Post(rerun, R"({})", "operator-token").json().value("field", ""), "from_phase");
  EXPECT_EQ(Post(rerun, R"({"from_phase": ""})", "operator-token").json().value("field", ""),
            "from_phase");
  EXPECT_EQ(engine()->GetRun(done.id)->revision, 1);
  ClientResponse again =
      Post(rerun, R"({"from_phase": "main", "feedback": "again"})", "operator-token");
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json()["revision"], 2);
}

// Signals (issue 23): POST /runs/{id}/signals/{name} is the operator's; a
// bad signal is a 400 naming the field with nothing kept; one to the run
// resting at its wait resolves it (201, resolved); the same idempotency key
// again is a 200 keeping nothing new; a finished run's is a 409.
TEST_F(ApiTest, ASignalOverHttpResolvesTheWaitOnceAndBadOnesKeepNothing) {
  absl::StatusOr<Workflow> wf = LoadWorkflowYaml(R"(
name: paywall
steps:
  - id: paid
    kind: wait
    signal: payment
    schema: {type: object, required: [amount], properties: {amount: {type: integer}}}
  - {id: after, kind: count}
)",
                                                 "paywall.yaml");
  ASSERT_OK(wf);
  ASSERT_OK(engine()->RegisterWorkflow(*wf));
  ClientResponse started =
      Post("/api/v1/runs", nlohmann::json{{"workflow", "paywall"}}.dump(), "operator-token");
  ASSERT_EQ(started.status, 201) << started.body;
  const std::string id = started.json().value("id", "");
  for (int i = 0; i < 2000 && engine()->GetRun(id)->status != RunStatus::kWaiting; ++i) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_EQ(engine()->GetRun(id)->status, RunStatus::kWaiting);
  EXPECT_EQ(Get("/api/v1/runs/" + id).json()["waiting_for"]["signal"], "payment");
  const std::string url = "/api/v1/runs/" + id + "/signals/payment";
  const int64_t events = engine()->GetRun(id)->last_event_seq;
  const std::string good = R"({"payload": {"amount": 5}, "idempotency_key": "pay-1"})";
  EXPECT_EQ(Post(url, good, "viewer-token").status, 403);
  EXPECT_EQ(Post(url, good, "").status, 401);
  ClientResponse bad = Post(url, R"({"payload": {"amount": "five"}})", "operator-token");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(bad.json().value("field", ""), "payload");
  ClientResponse unknown =
      Post("/api/v1/runs/" + id + "/signals/refund", "{}", "operator-token");
  EXPECT_EQ(unknown.status, 400);
  EXPECT_EQ(unknown.json().value("field", ""), "name");
  EXPECT_EQ(Post(url, R"({"payload": 1, "by": "mallory"})", "operator-token").status, 400);
  EXPECT_EQ(Post(url, R"({"idempotency_key": 7})", "operator-token").json().value("field", ""),
            "idempotency_key");
  EXPECT_EQ(Post("/api/v1/runs/nope/signals/payment", good, "operator-token").status, 404);
  EXPECT_EQ(engine()->GetRun(id)->last_event_seq, events);  // nothing kept
  EXPECT_EQ(Get("/api/v1/runs/" + id + "/signals").json()["signals"], nlohmann::json::array());

  ClientResponse sent = Post(url, good, "operator-token");
  ASSERT_EQ(sent.status, 201) << sent.body;
  EXPECT_EQ(sent.json()["created"], true);
  EXPECT_EQ(sent.json()["resolved"], true);
  EXPECT_EQ(sent.json()["seq"], 1);
  ClientResponse again = Post(url, good, "operator-token");
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json()["created"], false);
  EXPECT_EQ(again.json()["seq"], 1);
  absl::StatusOr<RunRecord> done =
      engine()->AwaitRun(id, engine()->clock()->Now() + absl::Seconds(20));
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCompleted);
  ClientResponse list = Get("/api/v1/runs/" + id + "/signals");
  ASSERT_EQ(list.status, 200);
  ASSERT_EQ(list.json()["signals"].size(), 1u);
  EXPECT_EQ(list.json()["signals"][0]["payload"], (nlohmann::json{{"amount", 5}}));
  EXPECT_EQ(list.json()["signals"][0]["consumed"], true);
  ClientResponse finished = Post(url, R"({"payload": {"amount": 6}})", "operator-token");
  EXPECT_EQ(finished.status, 409);
  EXPECT_EQ(finished.json().value("code", ""), "finished");
}

// GET /runs/{id} carries the step counts of the run's revision: distinct
// (revision, path) records (reference 002), so a rerun counts its own.
// /api/v1/schedules (issue 23): viewers read, operators change; a bad field
// is a 400 naming it with nothing kept.
TEST_F(ApiTest, SchedulesAreCreatedListedPausedResumedAndDeletedByOperators) {
  absl::StatusOr<Workflow> wf =
      LoadWorkflowYaml("name: nightly\nsteps:\n  - {id: a, kind: noop}\n", "nightly.yaml");
  ASSERT_OK(wf);
  ASSERT_OK(engine()->RegisterWorkflow(*wf));
  const std::string body = R"({"id": "nightly", "workflow": "nightly", "cron": "30 2 * * *",
                               "timezone": "Europe/Paris", "overlap": "allow"})";
  EXPECT_EQ(Post("/api/v1/schedules", body, "viewer-token").status, 403);
  EXPECT_EQ(Post("/api/v1/schedules", body, "").status, 401);
  auto field_of = [&](const std::string& b) {
    ClientResponse r = Post("/api/v1/schedules", b, "operator-token");
    EXPECT_EQ(r.status, 400) << r.body;
    return r.json().value("field", "");
  };
  EXPECT_EQ(field_of(R"({"id": "x", "workflow": "nightly", "cron": "0 0 32 * *"})"), "cron");
  EXPECT_EQ(field_of(R"({"id": "x", "workflow": "nightly", "cron": "@daily", "timezone": "Mars/Olympus"})"),
            "timezone");
  EXPECT_EQ(field_of(R"({"id": "x", "workflow": "nope", "cron": "@daily"})"), "workflow");
  EXPECT_EQ(field_of(R"({"id": "x", "workflow": "nightly", "cron": "@daily", "overlap": "often"})"),
            "overlap");
  EXPECT_EQ(field_of(R"({"id": "x y", "workflow": "nightly", "cron": "@daily"})"), "id");
  EXPECT_EQ(field_of(R"({"workflow": "nightly", "cron": "@daily"})"), "id");
  EXPECT_EQ(Get("/api/v1/schedules").json()["schedules"], nlohmann::json::array());

  ClientResponse made = Post("/api/v1/schedules", body, "operator-token");
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_EQ(made.json()["timezone"], "Europe/Paris");
  EXPECT_EQ(made.json()["paused"], false);
  EXPECT_TRUE(made.json()["last_run_id"].is_null());
  EXPECT_EQ(Post("/api/v1/schedules", body, "operator-token").status, 409);
  EXPECT_EQ(Get("/api/v1/schedules").json()["schedules"].size(), 1u);
  EXPECT_EQ(Get("/api/v1/schedules/nightly").json()["cron"], "30 2 * * *");
  EXPECT_EQ(Get("/api/v1/schedules/nope").status, 404);
  EXPECT_EQ(Post("/api/v1/schedules/nightly/pause", "", "viewer-token").status, 403);
  EXPECT_EQ(Post("/api/v1/schedules/nightly/pause", "", "operator-token").json()["paused"], true);
  EXPECT_EQ(Post("/api/v1/schedules/nightly/resume", "", "operator-token").json()["paused"], false);
  EXPECT_EQ(Request(port(), "DELETE", "/api/v1/schedules/nightly", "", "viewer-token").status, 403);
  EXPECT_EQ(Request(port(), "DELETE", "/api/v1/schedules/nightly", "", "operator-token").status,
            200);
  EXPECT_EQ(Request(port(), "DELETE", "/api/v1/schedules/nightly", "", "operator-token").status,
            404);
}

TEST_F(ApiTest, GetRunCarriesTheStepCountsOfItsRevision) {
  RunRecord done = StartAndAwait("quick");
  const std::string url = "/api/v1/runs/" + done.id;
  ClientResponse first = Get(url);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.json()["step_counts"],
            nlohmann::json(
                {{"revision", 1}, {"succeeded", 1}, {"failed", 0}, {"skipped", 0}, {"total", 1}}));
  RunRecord paused = StartAndAwait("gated");
  EXPECT_EQ(Get("/api/v1/runs/" + paused.id).json()["step_counts"]["succeeded"], 1)
      << "the draft; the gate has no record while it waits";
}

TEST_F(ApiTest, ResetIsForAdminsOnly) {
  RunRecord paused = StartAndAwait("gated");
  EXPECT_EQ(Post("/api/v1/admin/reset", "", "approver-token").status, 403);
  EXPECT_EQ(engine()->GetRun(paused.id)->status, RunStatus::kPaused);
  ClientResponse r = Post("/api/v1/admin/reset", "", "admin-token");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["cancelled"], 1);
  EXPECT_EQ(engine()->GetRun(paused.id)->status, RunStatus::kCancelled);
}

// Issue 25: `serve --allow-kinds` limits the step kinds of a workflow
// registered over HTTP, nested steps and an agent's tools included; a
// refused one is not written.
TEST_F(ApiTest, RegisteringAWorkflowWithAKindNotAllowedIsRefusedAndNothingWritten) {
  StopAll();
  StartAll({.allow_kinds = std::set<std::string>{"count", "noop", "llm"}});
  const size_t before = Get("/api/v1/workflows").json()["workflows"].size();
  const auto post = [&](const std::string& yaml) {
    return Post("/api/v1/workflows", nlohmann::json{{"yaml", yaml}}.dump(), "admin-token");
  };
  ClientResponse top = post("name: top\nsteps:\n  - id: a\n    kind: exec\n    command: id\n");
  EXPECT_EQ(top.status, 403) << top.body;
  EXPECT_EQ(top.json().value("code", ""), "step_kind_not_allowed") << top.body;
  EXPECT_NE(top.body.find("step 'a' is of kind 'exec'"), std::string::npos) << top.body;
  EXPECT_NE(top.body.find("it allows: count, llm, noop"), std::string::npos) << top.body;
  ClientResponse nested = post(
      "name: nested\nsteps:\n  - id: l\n    kind: loop\n    max_iterations: 1\n    body:\n"
      "      - id: inner\n        kind: exec\n        command: id\n");
  EXPECT_EQ(nested.status, 403) << nested.body;
  EXPECT_NE(nested.body.find("step 'inner'"), std::string::npos) << nested.body;
  ClientResponse tool = post(
      "name: tooled\nsteps:\n  - id: ag\n    kind: agent\n    prompt: hi\n    tools:\n"
      "      - {name: sh, description: Runs., parameters: {type: object},\n"
      "         step: {kind: exec, command: id}}\n");
  EXPECT_EQ(tool.status, 403) << tool.body;
  EXPECT_EQ(Get("/api/v1/workflows").json()["workflows"].size(), before);
  ClientResponse ok = post(
      "name: fine\nsteps:\n  - id: l\n    kind: loop\n    max_iterations: 1\n    body:\n"
      "      - id: inner\n        kind: noop\n");
  EXPECT_EQ(ok.status, 201) << ok.body;
}

TEST_F(ApiTest, WorkflowsListGetAndRegisterThroughTheLoader) {
  ClientResponse list = Get("/api/v1/workflows");
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(list.json()["workflows"].size(), 3u);
  ClientResponse one = Get("/api/v1/workflows/gated");
  ASSERT_EQ(one.status, 200);
  EXPECT_EQ(one.json()["version"], 1);
  EXPECT_TRUE(one.json().contains("definition"));
  EXPECT_EQ(Get("/api/v1/workflows/gated?version=9").status, 404);
  EXPECT_EQ(Get("/api/v1/workflows/nope").status, 404);

  const std::string yaml =
      nlohmann::json{{"yaml", "name: fresh\nsteps:\n  - id: a\n    kind: count\n"}}.dump();
  EXPECT_EQ(Post("/api/v1/workflows", yaml, "operator-token").status, 403);
  ClientResponse bad = Post("/api/v1/workflows", R"({"yaml": "name: [unclosed"})", "admin-token");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.json().value("field", ""), "yaml");
  ClientResponse unknown_kind =
      Post("/api/v1/workflows",
           nlohmann::json{{"yaml", "name: odd\nsteps:\n  - id: a\n    kind: teleport\n"}}.dump(),
           "admin-token");
  EXPECT_EQ(unknown_kind.status, 400) << unknown_kind.body;
  EXPECT_EQ(Get("/api/v1/workflows").json()["workflows"].size(), 3u);
  ClientResponse ok = Post("/api/v1/workflows", yaml, "admin-token");
  ASSERT_EQ(ok.status, 201) << ok.body;
  EXPECT_EQ(ok.json()["name"], "fresh");
  EXPECT_EQ(ok.json()["version"], 1);
  EXPECT_EQ(Get("/api/v1/workflows").json()["workflows"].size(), 4u);
  // The identical YAML again: 200 with the same version, nothing written.
  ClientResponse again = Post("/api/v1/workflows", yaml, "admin-token");
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json(), ok.json());
  EXPECT_EQ(Get("/api/v1/workflows").json()["workflows"].size(), 4u);
  // A changed definition of the same name: its next version, 201.
  ClientResponse changed =
      Post("/api/v1/workflows",
           nlohmann::json{{"yaml", "name: fresh\nsteps:\n  - id: b\n    kind: count\n"}}.dump(),
           "admin-token");
  ASSERT_EQ(changed.status, 201) << changed.body;
  EXPECT_EQ(changed.json()["version"], 2);
  // An older version's definition is registered already: 200 with version 1.
  ClientResponse old = Post("/api/v1/workflows", yaml, "admin-token");
  EXPECT_EQ(old.status, 200);
  EXPECT_EQ(old.json()["version"], 1);
  EXPECT_EQ(Get("/api/v1/workflows").json()["workflows"].size(), 5u);
}

// Issue 28: the attempt cap of a run started over HTTP is its workflow's
// `max_attempts:` (here registered over HTTP too), not the server's.
TEST_F(ApiTest, ARunStartedOverHttpTakesItsWorkflowsMaxAttempts) {
  ClientResponse registered = Post(
      "/api/v1/workflows",
      nlohmann::json{{"yaml", "name: capped\nmax_attempts: 3\nsteps:\n  - {id: a, kind: count}\n"}}
          .dump(),
      "admin-token");
  ASSERT_EQ(registered.status, 201) << registered.body;
  ClientResponse started = Post("/api/v1/runs", R"({"workflow": "capped"})", "operator-token");
  ASSERT_EQ(started.status, 201) << started.body;
  EXPECT_EQ(started.json()["max_attempts"], 3) << started.body;
  auto run = engine()->GetRun(started.json().value("id", ""));
  ASSERT_OK(run);
  EXPECT_EQ(run->max_attempts, 3);
}

TEST_F(ApiTest, DeadLettersListAndRedrive) {
  ClientResponse list = Get("/api/v1/dead-letters");
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(list.json()["dead_letters"].size(), 0u);
  EXPECT_EQ(Get("/api/v1/dead-letters", "").status, 401);
  EXPECT_EQ(Post("/api/v1/dead-letters/1/redrive", "", "operator-token").status, 403);
  ClientResponse missing = Post("/api/v1/dead-letters/1/redrive", "", "admin-token");
  EXPECT_THAT(missing.status, ::testing::AnyOf(400, 404)) << missing.body;
}

// A run whose deliveries all die (a worker that claims and never acks) is
// dead-lettered; an admin redrives it over HTTP, once.
TEST_F(ApiTest, ADeadLetterIsRedrivenOnce) {
  StopAll();
  StartAll({}, /*auth=*/true, /*executors=*/false);
  ClientResponse started = Post("/api/v1/runs", R"({"workflow": "quick"})", "operator-token");
  ASSERT_EQ(started.status, 201) << started.body;
  constexpr absl::Duration kVisibility = absl::Milliseconds(2);
  for (int i = 0; i <= TransportOptions{}.max_deliveries; ++i) {
    ASSERT_OK(engine()->transport()->Claim("dies", 10, kVisibility));
    engine()->clock()->SleepFor(kVisibility * 2);
  }
  ClientResponse list = Get("/api/v1/dead-letters");
  ASSERT_EQ(list.status, 200) << list.body;
  ASSERT_EQ(list.json()["dead_letters"].size(), 1u) << list.body;
  const std::string id = list.json()["dead_letters"][0]["id"];
  const std::string url = "/api/v1/dead-letters/" + id + "/redrive";
  EXPECT_EQ(Post(url, "", "approver-token").status, 403);
  ClientResponse redriven = Post(url, "", "admin-token");
  ASSERT_EQ(redriven.status, 200) << redriven.body;
  EXPECT_EQ(redriven.json()["redriven"], id);
  EXPECT_EQ(Get("/api/v1/dead-letters").json()["dead_letters"].size(), 0u);
  EXPECT_EQ(Post(url, "", "admin-token").status, 404);
  absl::StatusOr<std::vector<QueueMessage>> again =
      engine()->transport()->Claim("worker", 10, absl::Seconds(60));
  ASSERT_OK(again);
  ASSERT_EQ(again->size(), 1u);  // delivered again
  EXPECT_EQ((*again)[0].run_id, started.json()["id"]);
}

TEST_F(ApiTest, HealthReadinessAndMetrics) {
  EXPECT_EQ(Get("/healthz", "").status, 200);
  EXPECT_EQ(Get("/readyz", "").status, 200);
  EXPECT_EQ(Get("/metrics", "").status, 401);
  StartAndAwait("quick");
  ClientResponse m = Get("/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_THAT(m.content_type, HasSubstr("text/plain"));
  EXPECT_THAT(m.body, HasSubstr("runloom_http_request_duration_seconds_count{"));
  EXPECT_THAT(m.body, HasSubstr("route=\"/api/v1/runs\""));
  EXPECT_THAT(m.body, HasSubstr("runloom_http_open_streams"));
  EXPECT_THAT(m.body, HasSubstr("runloom_runs_"));
  EXPECT_EQ(Get("/api/v1/nowhere").status, 404);
  EXPECT_EQ(Request(port(), "DELETE", "/api/v1/runs", "", "admin-token").status, 405);
}

TEST_F(ApiTest, InsecureNoAuthActsAsAdminLocal) {
  StopAll();
  StartAll({}, /*auth=*/false);
  ClientResponse r = Post("/api/v1/runs", R"({"workflow": "gated"})", "");
  ASSERT_EQ(r.status, 201) << r.body;
  absl::StatusOr<RunRecord> paused =
      engine()->AwaitRun(r.json()["id"], engine()->clock()->Now() + absl::Seconds(20));
  ASSERT_OK(paused);
  const std::string digest =
      Get("/api/v1/runs/" + paused->id + "/gate", "").json()["proposal_digest"];
  ASSERT_EQ(
      Post("/api/v1/runs/" + paused->id + "/decisions", DecisionBody(digest, "approve"), "").status,
      200);
  absl::StatusOr<std::vector<Event>> events = engine()->ListEvents(paused->id, 0, 1000);
  ASSERT_OK(events);
  bool by_local = false;
  for (const Event& e : *events) {
    if (e.type == event_types::kRunDecided) by_local = e.data["reviewer"] == "local";
  }
  EXPECT_TRUE(by_local);
}

}  // namespace
}  // namespace runloom::api::testing

namespace runloom::api::testing {
namespace {

TEST_F(ApiTest, TheWebUiIsServedAndMeNamesTheToken) {
  ClientResponse page = Get("/", "");
  ASSERT_EQ(page.status, 200);
  EXPECT_THAT(page.content_type, ::testing::HasSubstr("text/html"));
  ClientResponse app = Get("/ui/app.js", "");
  ASSERT_EQ(app.status, 200);
  EXPECT_THAT(app.content_type, ::testing::HasSubstr("javascript"));
  EXPECT_EQ(Get("/ui/nope.js", "").status, 404);
  ClientResponse me = Get("/api/v1/me", "approver-token");
  ASSERT_EQ(me.status, 200);
  EXPECT_EQ(me.json()["name"], "ana-approver");
  EXPECT_EQ(me.json()["role"], "approver");
  EXPECT_EQ(Get("/api/v1/me", "").status, 401);
}

}  // namespace
}  // namespace runloom::api::testing
