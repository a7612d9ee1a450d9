// `runloom serve` on the distributed backends (issue 10: "the API works the
// same on every backend"): on PostgreSQL, and on PostgreSQL with the Redis
// Streams queue, over real HTTP with a token from the store: register a
// workflow (201, then 200), start a run (201, then 200 for its idempotency
// key), follow its events as SSE to the gate, refuse a stale digest (409,
// nothing recorded), approve, resume the stream with Last-Event-ID to the
// end with no gap and no duplicate, 404 for an unknown run, and stop on
// SIGTERM. The SQLite path is serve_test.cc and src/api's tests.
#include "testing/test_client.h"
#include "testing/test_servers.h"

#include "absl/strings/str_cat.h"
#include "cli_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

namespace runloom::testing {
namespace {

using api::testing::ClientResponse;
using api::testing::Request;
using api::testing::SseEvent;
using api::testing::SseReader;
using std::chrono::milliseconds;

constexpr char kGated[] = R"(name: served
steps:
  - id: draft
    kind: noop
  - id: review
    kind: approval
    proposal: {text: hello}
  - id: after
    kind: noop
)";

std::string AwaitStatus(uint16_t port, const std::string& token, const std::string& id,
                        const std::string& want) {
  std::string status;
  for (int i = 0; i < 400 && status != want; ++i) {
    status = Request(port, "GET", "/api/v1/runs/" + id, "", token).json().value("status", "");
    if (status != want) std::this_thread::sleep_for(milliseconds(50));
  }
  return status;
}

// The flow above, on the backend `backend` (--db and maybe --queue).
void ServeFlow(const std::vector<std::string>& backend) {
  const std::string dir = MakeTempDir("serve_backends");
  std::vector<std::string> token_args = {"token",  "create", "--name", "ops",
                                         "--role", "admin",  "--json"};
  token_args.insert(token_args.end(), backend.begin(), backend.end());
  Result created = RunCli(token_args);
  ASSERT_EQ(created.code, 0) << created.out;
  const std::string token =
      nlohmann::json::parse(created.out.substr(0, created.out.find('\n')))["token"];
  std::vector<std::string> args = {"serve", "--listen", "127.0.0.1:0"};
  args.insert(args.end(), backend.begin(), backend.end());
  const std::string log = dir + "/serve.log";
  Child server(args, log);
  const uint16_t port = WaitForServePort(log);
  ASSERT_NE(port, 0) << ReadFile(log);

  const std::string yaml = nlohmann::json{{"yaml", kGated}}.dump();
  ClientResponse reg = Request(port, "POST", "/api/v1/workflows", yaml, token);
  ASSERT_EQ(reg.status, 201) << reg.body;
  EXPECT_EQ(Request(port, "POST", "/api/v1/workflows", yaml, token).status, 200);
  const std::string start = R"({"workflow": "served", "idempotency_key": "once"})";
  ClientResponse run = Request(port, "POST", "/api/v1/runs", start, token);
  ASSERT_EQ(run.status, 201) << run.body;
  const std::string id = run.json()["id"];
  ClientResponse again = Request(port, "POST", "/api/v1/runs", start, token);
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(again.json()["id"], id);
  ASSERT_EQ(AwaitStatus(port, token, id, "paused"), "paused") << ReadFile(log);

  const std::string events = "/api/v1/runs/" + id + "/events";
  const int64_t at_gate =
      Request(port, "GET", "/api/v1/runs/" + id, "", token).json()["last_event_seq"];
  std::vector<SseEvent> seen;
  {
    SseReader first(port, events, token);
    seen = first.ReadEvents(static_cast<size_t>(at_gate), milliseconds(10'000));
    ASSERT_EQ(static_cast<int64_t>(seen.size()), at_gate);
    first.Cut();
  }
  const std::string decide = "/api/v1/runs/" + id + "/decisions";
  ClientResponse stale =
      Request(port, "POST", decide, R"({"digest": "sha256:00", "decision": "approve"})", token);
  EXPECT_EQ(stale.status, 409) << stale.body;
  EXPECT_EQ(Request(port, "GET", "/api/v1/runs/" + id, "", token).json()["last_event_seq"],
            at_gate);
  const std::string digest =
      Request(port, "GET", "/api/v1/runs/" + id + "/gate", "", token).json()["proposal_digest"];
  ClientResponse ok =
      Request(port, "POST", decide,
              nlohmann::json{{"digest", digest}, {"decision", "approve"}}.dump(), token);
  ASSERT_EQ(ok.status, 200) << ok.body;
  ASSERT_EQ(AwaitStatus(port, token, id, "completed"), "completed") << ReadFile(log);

  SseReader resumed(port, events, token, seen.back().id);
  std::vector<SseEvent> rest = resumed.ReadToEnd(milliseconds(10'000));
  EXPECT_TRUE(resumed.ended());
  seen.insert(seen.end(), rest.begin(), rest.end());
  const int64_t last =
      Request(port, "GET", "/api/v1/runs/" + id, "", token).json()["last_event_seq"];
  ASSERT_EQ(static_cast<int64_t>(seen.size()), last);
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i].id, std::to_string(i + 1));
  EXPECT_EQ(seen.back().event, "run.finished");
  EXPECT_EQ(Request(port, "GET", "/api/v1/runs/nope", "", token).status, 404);

  server.Kill(SIGTERM);
  EXPECT_EQ(server.Wait(), 0) << ReadFile(log);
  EXPECT_EQ(ReadFile(log).find(token), std::string::npos) << "the token is in the log";
}

std::string NewDatabase() {
  static std::atomic<int> counter{0};
  absl::StatusOr<std::string> db = CreateTestPostgresDatabase(absl::StrCat("serve_", counter++));
  EXPECT_TRUE(db.ok()) << db.status();
  return db.ok() ? *db : "";
}

TEST(ServeBackends, TheApiOnPostgres) {
  const std::string db = NewDatabase();
  ASSERT_FALSE(db.empty());
  ServeFlow({"--db", db});
}

TEST(ServeBackends, TheApiOnPostgresWithTheRedisQueue) {
  absl::StatusOr<TestServers> servers = GetTestServers();
  ASSERT_TRUE(servers.ok()) << servers.status();
  const std::string db = NewDatabase();
  ASSERT_FALSE(db.empty());
  ServeFlow({"--db", db, "--queue", servers->redis_url});
}

}  // namespace
}  // namespace runloom::testing
