// The http step against a scripted server, with the write ledger of a real
// store (SQLite :memory:) behind its context: what is sent, what is
// recorded, and what a later attempt does with an open intent.
#include "runloom/sqlite.h"
#include "runloom/step.h"
#include "runloom/store.h"

#include "steps/builtin_steps.h"
#include "testing/scripted_http_server.h"
#include "testing/status_matchers.h"
#include "testing/step_test_util.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace runloom {
namespace {

using ::runloom::testing::ScriptedHttpServer;
using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;
using json = nlohmann::json;
using Reply = ScriptedHttpServer::Reply;

// A step context over one leased run of a real store: the engine's
// LeafContext in miniature (the lease token, the ledger, secrets).
class LedgerContext final : public StepContext {
 public:
  LedgerContext(Store* store, std::string run_id, std::string token)
      : store_(store), run_id_(std::move(run_id)), token_(std::move(token)) {}
  const std::string& run_id() const override { return run_id_; }
  const std::string& step_path() const override { return path_; }
  int attempt() const override { return attempt_; }
  const std::string& working_dir() const override { return dir_; }
  Clock* clock() override { return &clock_; }
  absl::Time deadline() const override { return absl::InfiniteFuture(); }
  bool Stopping() override { return false; }
  bool SleepUntil(absl::Time) override { return true; }
  void OnStop(std::function<void()>) override {}
  void RecordEvent(Event event) override { events_.push_back(std::move(event)); }
  absl::StatusOr<BeginWriteResult> BeginWrite(const std::string& action, const std::string& key,
                                              const std::string& digest) override {
    return store_->BeginWrite({.key = {run_id_, path_, action},
                               .lease_token = token_,
                               .idempotency_key = key,
                               .request_digest = digest});
  }
  absl::StatusOr<WriteOperation> FinishWrite(const std::string& action,
                                             const WriteResult& result) override {
    return store_->FinishWrite({run_id_, path_, action}, result);
  }
  absl::StatusOr<std::string> ResolveSecret(const std::string& name) override {
    auto it = secrets_.find(name);
    if (it == secrets_.end()) return absl::NotFoundError("secret " + name + " is not set");
    return it->second;
  }

  void set_attempt(int a) { attempt_ = a; }
  void set_token(std::string t) { token_ = std::move(t); }
  std::map<std::string, std::string> secrets_;
  std::vector<Event> events_;  // an http step records none

 private:
  Store* const store_;
  const std::string run_id_;
  std::string token_;
  const std::string path_ = "apply";
  const std::string dir_;
  int attempt_ = 1;
  SimulatedClock clock_;
};

class HttpStepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SqliteOptions o;
    o.clock = &store_clock_;
    absl::StatusOr<Backend> b = OpenSqlite(":memory:", o);
    ASSERT_OK(b);
    backend_ = std::move(*b);
    NewRun run;
    run.id = "r_http";
    run.workflow_name = "wf";
    ASSERT_OK(backend_.store->CreateRun(run, {}));
    absl::StatusOr<Lease> lease =
        backend_.store->AcquireLease(run.id, "test", absl::Minutes(5), {});
    ASSERT_OK(lease);
    ctx_ = std::make_unique<LedgerContext>(backend_.store.get(), run.id, lease->token);
  }
  void Serve(ScriptedHttpServer::Handler handler) {
    absl::StatusOr<std::unique_ptr<ScriptedHttpServer>> s =
        ScriptedHttpServer::Start(std::move(handler));
    ASSERT_OK(s);
    server_ = std::move(*s);
  }
  json WriteConfig(bool lookup = false) {
    json c = {
        {"method", "POST"},      {"url", server_->url() + "/actions"}, {"write", true},
        {"action", "remediate"}, {"body", {{"action", "restart"}}},    {"expect", {200, 201}}};
    if (lookup) c["lookup"] = {{"url", server_->url() + "/actions/lookup"}};
    return c;
  }
  absl::StatusOr<StepOutput> Run(const json& config, int attempt = 1) {
    ctx_->set_attempt(attempt);
    return step_->Execute(*ctx_, config);
  }
  std::vector<WriteOperation> Ledger() {
    absl::StatusOr<std::vector<WriteOperation>> w = backend_.store->ListWrites("r_http");
    EXPECT_OK(w);
    return w.ok() ? *w : std::vector<WriteOperation>{};
  }
  int Posts() {
    int n = 0;
    for (const auto& r : server_->requests()) n += r.method == "POST" ? 1 : 0;
    return n;
  }

  SimulatedClock store_clock_;
  Backend backend_;
  std::unique_ptr<LedgerContext> ctx_;
  std::unique_ptr<ScriptedHttpServer> server_;
  std::shared_ptr<StepKind> step_ = NewHttpStep();
};

TEST_F(HttpStepTest, GetReturnsStatusAndJsonBody) {
  Serve([](const ScriptedHttpServer::Request&) { return Reply{.body = R"({"ok": true})"}; });
  absl::StatusOr<StepOutput> out = Run({{"url", server_->url() + "/health"}});
  ASSERT_OK(out);
  EXPECT_EQ(out->output["status"], 200);
  EXPECT_EQ(out->output["body"], (json{{"ok", true}}));
  EXPECT_FALSE(out->output.contains("write"));
  EXPECT_TRUE(Ledger().empty());
}

TEST_F(HttpStepTest, AnswersMapToErrorClasses) {
  int status = 0;
  Serve([&status](const ScriptedHttpServer::Request&) {
    return Reply{.status = status, .body = "nope", .drop = status == 0};
  });
  const json c = {{"url", server_->url() + "/x"}};
  status = 404;
  EXPECT_THAT(Run(c), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("HTTP 404: nope")));
  status = 503;
  EXPECT_THAT(Run(c), StatusIs(absl::StatusCode::kUnavailable));
  status = 429;
  EXPECT_THAT(Run(c), StatusIs(absl::StatusCode::kResourceExhausted));
  status = 0;  // dropped
  EXPECT_THAT(Run(c), StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(HttpStepTest, SecretHeaderIsResolvedThroughTheContext) {
  Serve([](const ScriptedHttpServer::Request&) { return Reply{.body = "{}"}; });
  ctx_->secrets_["API_TOKEN"] = "s3cr3t";
  json c = {{"url", server_->url() + "/x"},
            {"headers", {{"Authorization", "Bearer secret://API_TOKEN"}}}};
  ASSERT_OK(Run(c));
  ASSERT_EQ(server_->requests().size(), 1u);
  EXPECT_EQ(server_->requests()[0].headers.at("authorization"), "Bearer s3cr3t");
  c["headers"]["Authorization"] = "Bearer secret://MISSING";
  EXPECT_THAT(Run(c), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("MISSING")));
  EXPECT_EQ(server_->requests().size(), 1u);
}

TEST_F(HttpStepTest, WriteRecordsIntentAndResultAndIsNotSentTwice) {
  Serve([](const ScriptedHttpServer::Request&) {
    return Reply{.status = 201, .body = R"({"id": "A-1"})"};
  });
  absl::StatusOr<StepOutput> out = Run(WriteConfig());
  ASSERT_OK(out);
  const std::string key = DeriveIdempotencyKey({"r_http", "apply", "remediate"});
  EXPECT_EQ(out->output["write"]["idempotency_key"], key);
  EXPECT_EQ(out->output["write"]["source"], "sent");
  ASSERT_EQ(server_->requests().size(), 1u);
  EXPECT_EQ(server_->requests()[0].headers.at("idempotency-key"), key);
  EXPECT_EQ(server_->requests()[0].headers.at("content-type"), "application/json");
  EXPECT_EQ(json::parse(server_->requests()[0].body), (json{{"action", "restart"}}));
  std::vector<WriteOperation> ledger = Ledger();
  ASSERT_EQ(ledger.size(), 1u);
  EXPECT_EQ(ledger[0].state, WriteState::kDone);
  EXPECT_EQ(ledger[0].result->response, (json{{"id", "A-1"}}));
  // A rerun of the step (a resumed run) reuses the result: nothing is sent.
  absl::StatusOr<StepOutput> again = Run(WriteConfig(), 2);
  ASSERT_OK(again);
  EXPECT_EQ(again->output["body"], (json{{"id", "A-1"}}));
  EXPECT_EQ(server_->requests().size(), 1u);
}

TEST_F(HttpStepTest, UncertainAnswerLeavesTheIntentAndLookupDecides) {
  int posts_to_fail = 1;
  bool applied = false;
  Serve([&](const ScriptedHttpServer::Request& r) {
    if (r.target == "/actions/lookup") {
      return applied ? Reply{.body = R"({"id": "A-1"})"} : Reply{.status = 404};
    }
    if (posts_to_fail-- > 0) return Reply{.status = 503, .body = "busy"};
    applied = true;
    return Reply{.status = 201, .body = R"({"id": "A-1"})"};
  });
  EXPECT_THAT(Run(WriteConfig(true)), StatusIs(absl::StatusCode::kUnavailable));
  ASSERT_EQ(Ledger().size(), 1u);
  EXPECT_EQ(Ledger()[0].state, WriteState::kIntent);
  // Attempt 2: the lookup says missing (404), so it is sent, with the same key.
  absl::StatusOr<StepOutput> out = Run(WriteConfig(true), 2);
  ASSERT_OK(out);
  EXPECT_EQ(out->output["write"]["source"], "sent");
  EXPECT_EQ(Posts(), 2);
  const auto reqs = server_->requests();
  EXPECT_EQ(reqs[1].target, "/actions/lookup");
  EXPECT_EQ(reqs[1].headers.at("idempotency-key"), reqs[0].headers.at("idempotency-key"));
  EXPECT_EQ(reqs[2].headers.at("idempotency-key"), reqs[0].headers.at("idempotency-key"));
  EXPECT_EQ(Ledger()[0].begins, 1);
}

TEST_F(HttpStepTest, LookupWithoutACertainAnswerSendsNothing) {
  Serve([](const ScriptedHttpServer::Request& r) {
    if (r.target == "/actions/lookup") return Reply{.status = 500};
    return Reply{.drop = true};  // the write's answer is lost
  });
  EXPECT_THAT(Run(WriteConfig(true)), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(Run(WriteConfig(true), 2),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("nothing was resent")));
  EXPECT_EQ(Posts(), 1);
  EXPECT_EQ(Ledger()[0].state, WriteState::kIntent);
}

TEST_F(HttpStepTest, RefusalIsRecordedAndNeverResent) {
  Serve([](const ScriptedHttpServer::Request&) {
    return Reply{.status = 422, .body = R"({"error": "unknown action"})"};
  });
  EXPECT_THAT(Run(WriteConfig()), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Run(WriteConfig(), 2),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("another `action`")));
  EXPECT_EQ(Posts(), 1);
  ASSERT_EQ(Ledger().size(), 1u);
  EXPECT_EQ(Ledger()[0].result->http_status, 422);
}

TEST_F(HttpStepTest, ChangedRequestUnderTheSameActionIsRefused) {
  Serve([](const ScriptedHttpServer::Request&) { return Reply{.status = 201, .body = "{}"}; });
  ASSERT_OK(Run(WriteConfig()));
  json changed = WriteConfig();
  changed["body"]["action"] = "rollback";
  EXPECT_THAT(Run(changed, 2), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(Posts(), 1);
}

TEST_F(HttpStepTest, LostLeaseSendsNothing) {
  Serve([](const ScriptedHttpServer::Request&) { return Reply{.status = 201}; });
  ctx_->set_token("stale");
  EXPECT_THAT(Run(WriteConfig()), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_TRUE(server_->requests().empty());
  EXPECT_TRUE(Ledger().empty());
}

}  // namespace
}  // namespace runloom
