// Test-only: an engine on SQLite (engine/engine_test_util.h's Harness, with
// its blocking "count" step kind), the server on an ephemeral loopback port,
// and an Authenticator that maps fixed tokens to roles.
#pragma once

#include "runloom/auth.h"
#include "runloom/engine.h"
#include "runloom/http_server.h"

#include "testing/engine_test_util.h"
#include "testing/status_matchers.h"
#include "testing/test_client.h"

#include "gtest/gtest.h"
#include "prometheus/registry.h"

#include <map>
#include <memory>
#include <string>

namespace runloom::api::testing {

// Tokens: "viewer-token", "operator-token", "approver-token", "admin-token";
// each principal is named after its role ("ana-approver", ...).
class FixedAuthenticator final : public Authenticator {
 public:
  absl::StatusOr<Principal> Authenticate(absl::string_view token) override {
    static const std::map<std::string, Principal, std::less<>> kTokens = {
        {"viewer-token", {"vic-viewer", Role::kViewer}},
        {"operator-token", {"oli-operator", Role::kOperator}},
        {"approver-token", {"ana-approver", Role::kApprover}},
        {"admin-token", {"ada-admin", Role::kAdmin}},
    };
    auto it = kTokens.find(token);
    if (it == kTokens.end()) return absl::UnauthenticatedError("unknown token");
    return it->second;
  }
};

// Three steps; the middle one blocks until the test releases the kind.
inline constexpr char kSlowYaml[] = R"(
name: slow
steps:
  - id: one
    kind: count
  - id: two
    kind: count
    block: true
  - id: three
    kind: count
)";

inline constexpr char kQuickYaml[] = R"(
name: quick
inputs:
  n: {type: integer, default: 1}
steps:
  - id: only
    kind: count
    phase: main
)";

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override { StartAll({}); }
  void TearDown() override { StopAll(); }

  // `executors` false: the engine executes nothing (a test plays the worker).
  void StartAll(ServerOptions options, bool auth = true, bool executors = true) {
    registry_ = std::make_shared<prometheus::Registry>();
    EngineOptions eo;
    eo.env.metrics = registry_.get();
    eo.idle_poll = absl::Milliseconds(10);
    eo.executors = 2;
    harness_ = std::make_unique<Harness>(eo);
    for (const char* yaml : {kGatedYaml, kSlowYaml, kQuickYaml}) {
      absl::StatusOr<Workflow> wf = LoadWorkflowYaml(yaml, "test.yaml");
      ASSERT_OK(wf);
      ASSERT_OK(engine()->RegisterWorkflow(*wf));
    }
    if (executors) engine()->Start();
    options.port = 0;
    absl::StatusOr<std::unique_ptr<Server>> s =
        Server::Start(options, engine(), auth ? &auth_ : nullptr, registry_.get());
    ASSERT_OK(s);
    server_ = *std::move(s);
  }

  void StopAll() {
    if (server_) server_->Shutdown();
    if (harness_) {
      if (!harness_->kind->release.HasBeenNotified()) harness_->kind->release.Notify();
      engine()->Stop();
    }
    server_.reset();
    harness_.reset();
  }

  Engine* engine() { return harness_->engine.get(); }
  uint16_t port() { return server_->port(); }

  ClientResponse Get(const std::string& target, const std::string& token = "viewer-token") {
    return Request(port(), "GET", target, "", token);
  }
  ClientResponse Post(const std::string& target, const std::string& body,
                      const std::string& token) {
    return Request(port(), "POST", target, body, token);
  }

  // Starts `workflow` over HTTP and waits until it pauses or ends.
  RunRecord StartAndAwait(const std::string& workflow) {
    ClientResponse r =
        Post("/api/v1/runs", nlohmann::json{{"workflow", workflow}}.dump(), "operator-token");
    EXPECT_EQ(r.status, 201) << r.body;
    absl::StatusOr<RunRecord> done =
        engine()->AwaitRun(r.json().value("id", ""), engine()->clock()->Now() + absl::Seconds(20));
    EXPECT_OK(done);
    return done.ok() ? *done : RunRecord{};
  }

  int CountRuns() {
    absl::StatusOr<RunPage> page = engine()->ListRuns({.limit = kMaxReadLimit});
    EXPECT_OK(page);
    return page.ok() ? static_cast<int>(page->runs.size()) : -1;
  }

  std::shared_ptr<prometheus::Registry> registry_;
  FixedAuthenticator auth_;
  std::unique_ptr<Harness> harness_;
  std::unique_ptr<Server> server_;
};

}  // namespace runloom::api::testing
