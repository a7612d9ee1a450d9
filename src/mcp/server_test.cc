// The MCP server in process: JSON-RPC lines in, replies out, on an engine
// over an SQLite temp file with real tokens (StoreAuthenticator). Nothing
// executes in the background: a test plays the worker (ExecuteRun).
#include "mcp/server.h"

#include "runloom/sqlite.h"

#include "testing/engine_test_util.h"

#include "absl/strings/str_cat.h"
#include "auth/tokens.h"
#include "wire/refusal.h"

#include <sstream>

namespace runloom::mcp {
namespace {

using nlohmann::json;

class McpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Workflow> wf = LoadWorkflowYaml(kGatedYaml, "gated.yaml");
    ASSERT_OK(wf);
    ASSERT_OK(engine()->RegisterWorkflow(*wf));
    for (Role r : {Role::kViewer, Role::kOperator, Role::kApprover, Role::kAdmin}) {
      absl::StatusOr<IssuedToken> t =
          IssueToken(*engine()->tokens(), absl::StrCat("t-", RoleName(r)), r);
      ASSERT_OK(t);
      tokens_[r] = t->token;
    }
  }

  Engine* engine() { return h_.engine.get(); }

  McpServer& As(Role role) {
    auto& s = servers_[role];
    if (!s) s = std::make_unique<McpServer>(engine(), &auth_, tokens_[role], McpOptions{});
    return *s;
  }

  // The reply to one request line, parsed; fails the test on no reply.
  json Send(McpServer& server, const std::string& line) {
    std::optional<std::string> reply = server.HandleLine(line);
    EXPECT_TRUE(reply.has_value()) << line;
    if (!reply) return json();
    for (const auto& [role, token] : tokens_) {
      EXPECT_EQ(reply->find(token), std::string::npos) << "a reply holds a token";
    }
    return json::parse(*reply);
  }

  json Call(Role role, const std::string& tool, const json& args) {
    json req = {{"jsonrpc", "2.0"},
                {"id", ++next_id_},
                {"method", "tools/call"},
                {"params", {{"name", tool}, {"arguments", args}}}};
    json reply = Send(As(role), req.dump());
    EXPECT_EQ(reply.value("id", -1), next_id_);
    EXPECT_TRUE(reply.contains("result")) << reply.dump();
    return reply.value("result", json::object());
  }

  static json Error(const json& result) {
    EXPECT_TRUE(result.value("isError", false)) << result.dump();
    return result["structuredContent"]["error"];
  }

  static json Ok(const json& result) {
    EXPECT_FALSE(result.value("isError", true)) << result.dump();
    return result.value("structuredContent", json::object());
  }

  // A run of `gated` paused at its review gate.
  RunRecord PausedRun() {
    absl::StatusOr<CreateRunResult> started = engine()->StartRun({.workflow_name = "gated"});
    EXPECT_OK(started);
    absl::StatusOr<RunRecord> done = engine()->ExecuteRun(started->run.id);
    EXPECT_OK(done);
    EXPECT_EQ(done->status, RunStatus::kPaused);
    return *done;
  }

  Harness h_;
  StoreAuthenticator auth_{h_.engine->tokens()};
  std::map<Role, std::string> tokens_;
  std::map<Role, std::unique_ptr<McpServer>> servers_;
  int next_id_ = 0;
};

TEST_F(McpServerTest, InitializeEchoesAKnownProtocolVersionAndOffersTools) {
  json r = Send(As(Role::kViewer), R"({"jsonrpc":"2.0","id":"a","method":"initialize","params":{)"
                                   R"("protocolVersion":"2025-06-18","capabilities":{},)"
                                   R"("clientInfo":{"name":"t","version":"1"}}})");
  EXPECT_EQ(r["id"], "a");
  EXPECT_EQ(r["result"]["protocolVersion"], "2025-06-18");
  EXPECT_TRUE(r["result"]["capabilities"].contains("tools"));
  EXPECT_EQ(r["result"]["serverInfo"]["name"], "runloom");
  json unknown =
      Send(As(Role::kViewer), R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{)"
                              R"("protocolVersion":"1999-01-01"}})");
  EXPECT_EQ(unknown["result"]["protocolVersion"], "2025-11-25");
  EXPECT_FALSE(As(Role::kViewer)
                   .HandleLine(R"({"jsonrpc":"2.0","method":"notifications/initialized"})")
                   .has_value());
  json ping = Send(As(Role::kViewer), R"({"jsonrpc":"2.0","id":7,"method":"ping"})");
  EXPECT_EQ(ping["result"], json::object());
}

TEST_F(McpServerTest, ToolsListNamesEveryToolWithAnObjectSchema) {
  json r = Send(As(Role::kViewer), R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})");
  std::set<std::string> names;
  for (const json& t : r["result"]["tools"]) {
    names.insert(t["name"].get<std::string>());
    EXPECT_EQ(t["inputSchema"]["type"], "object") << t.dump();
    EXPECT_FALSE(t["description"].get<std::string>().empty());
  }
  EXPECT_EQ(names,
            (std::set<std::string>{"list_runs", "get_run", "follow_events", "list_workflows",
                                   "start_run", "decide", "cancel_run", "rerun", "signal_run",
                                   "list_dead_letters", "redrive_dead_letter"}));
}

TEST_F(McpServerTest, ProtocolFaultsAreJsonRpcErrors) {
  McpServer& s = As(Role::kAdmin);
  EXPECT_EQ(Send(s, "{not json")["error"]["code"], -32700);
  EXPECT_TRUE(Send(s, "{not json")["id"].is_null());
  EXPECT_EQ(Send(s, "[1,2]")["error"]["code"], -32600);
  EXPECT_EQ(Send(s, R"({"jsonrpc":"2.0","id":{},"method":"ping"})")["error"]["code"], -32600);
  EXPECT_EQ(Send(s, R"({"jsonrpc":"1.0","id":1,"method":"ping"})")["error"]["code"], -32600);
  EXPECT_EQ(Send(s, R"({"jsonrpc":"2.0","id":1,"method":"resources/list"})")["error"]["code"],
            -32601);
  // A notification never gets a reply, even for an unknown method.
  EXPECT_FALSE(s.HandleLine(R"({"jsonrpc":"2.0","method":"nope"})").has_value());
  EXPECT_EQ(
      Send(s, R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":[]})")["error"]["code"],
      -32602);
  json unknown = Send(s, R"({"jsonrpc":"2.0","id":2,"method":"tools/call",)"
                         R"("params":{"name":"drop_tables","arguments":{}}})");
  EXPECT_EQ(unknown["error"]["code"], -32602);
  EXPECT_EQ(unknown["id"], 2);
  EXPECT_NE(unknown["error"]["message"].get<std::string>().find("drop_tables"), std::string::npos);
  EXPECT_EQ(Send(s, R"({"jsonrpc":"2.0","id":3,"method":"tools/call",)"
                    R"("params":{"name":"list_runs","arguments":"x"}})")["error"]["code"],
            -32602);
  // Deeper than the JSON bounds: a parse error, after bounded work.
  EXPECT_EQ(Send(s, std::string(100000, '[') + std::string(100000, ']'))["error"]["code"], -32700);
}

TEST_F(McpServerTest, AnOversizedLineIsRefusedAndTheNextOneAnswered) {
  McpOptions options;
  options.max_line_bytes = 256;
  McpServer s(engine(), &auth_, tokens_[Role::kViewer], options);
  std::istringstream in(std::string(10000, 'x') + "\n" +
                        R"({"jsonrpc":"2.0","id":9,"method":"ping"})" + "\n\n");
  std::ostringstream out;
  s.Serve(in, out);
  std::istringstream lines(out.str());
  std::string first, second, third;
  ASSERT_TRUE(std::getline(lines, first));
  ASSERT_TRUE(std::getline(lines, second));
  EXPECT_FALSE(std::getline(lines, third));
  EXPECT_EQ(json::parse(first)["error"]["code"], -32600);
  EXPECT_TRUE(json::parse(first)["id"].is_null());
  EXPECT_EQ(json::parse(second)["id"], 9);
}

TEST_F(McpServerTest, ReadBoundedLineKeepsAtMostTheLimit) {
  std::istringstream in("abc\r\n" + std::string(50, 'y') + "\nlast");
  BoundedLine a = ReadBoundedLine(*in.rdbuf(), 10);
  EXPECT_EQ(a.text, "abc");
  BoundedLine b = ReadBoundedLine(*in.rdbuf(), 10);
  EXPECT_TRUE(b.too_long);
  EXPECT_TRUE(b.text.empty());
  BoundedLine c = ReadBoundedLine(*in.rdbuf(), 10);
  EXPECT_EQ(c.text, "last");
  EXPECT_TRUE(c.eof);
}

TEST_F(McpServerTest, AViewerReadsButCannotDecideStartOrCancel) {
  RunRecord paused = PausedRun();
  json got = Ok(Call(Role::kViewer, "get_run", {{"run_id", paused.id}}));
  EXPECT_EQ(got["run"]["status"], "paused");
  const std::string digest = got["pending_gate"]["proposal_digest"];
  json refused = Error(Call(Role::kViewer, "decide",
                            {{"run_id", paused.id}, {"digest", digest}, {"decision", "approve"}}));
  EXPECT_EQ(refused["code"], "forbidden");
  EXPECT_NE(refused["message"].get<std::string>().find("approver"), std::string::npos);
  EXPECT_EQ(Error(Call(Role::kViewer, "cancel_run", {{"run_id", paused.id}}))["code"], "forbidden");
  EXPECT_EQ(Error(Call(Role::kViewer, "start_run", {{"workflow", "gated"}}))["code"], "forbidden");
  // An operator may start from the catalog, but not from a file (that
  // registers a definition: admin, as POST /api/v1/workflows).
  EXPECT_EQ(Error(Call(Role::kOperator, "start_run", {{"workflow_file", "/etc/passwd"}}))["field"],
            "workflow_file");
  EXPECT_EQ(
      Error(Call(Role::kOperator, "decide",
                 {{"run_id", paused.id}, {"digest", digest}, {"decision", "approve"}}))["code"],
      "forbidden");
  EXPECT_EQ(engine()->GetRun(paused.id)->status, RunStatus::kPaused);
  EXPECT_EQ(engine()->ListRuns({})->runs.size(), 1u);
}

TEST_F(McpServerTest, AWrongDigestIsRefusedAsOverHttpAndTheRightOneRecorded) {
  RunRecord paused = PausedRun();
  json refused =
      Error(Call(Role::kApprover, "decide",
                 {{"run_id", paused.id}, {"digest", "sha256:0000"}, {"decision", "approve"}}));
  absl::StatusOr<RunRecord> direct = engine()->Decide(
      paused.id, {.proposal_digest = "sha256:0000", .decision = Decision::kApprove}, "x");
  std::optional<wire::Refusal> http =
      wire::DecideRefusal(direct.status(), paused.id, Decision::kApprove);
  ASSERT_TRUE(http.has_value());
  EXPECT_EQ(refused["code"], "stale_digest");
  EXPECT_EQ(refused["code"], http->code);
  EXPECT_EQ(refused["message"], http->message);
  EXPECT_EQ(refused["field"], "digest");
  const std::string digest = Ok(
      Call(Role::kViewer, "get_run", {{"run_id", paused.id}}))["pending_gate"]["proposal_digest"];
  json decided = Ok(Call(Role::kApprover, "decide",
                         {{"run_id", paused.id}, {"digest", digest}, {"decision", "approve"}}));
  EXPECT_EQ(decided["run"]["status"], "queued");
  absl::StatusOr<RunRecord> done = engine()->ExecuteRun(paused.id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCompleted);
  json again = Error(Call(Role::kApprover, "decide",
                          {{"run_id", paused.id}, {"digest", digest}, {"decision", "approve"}}));
  EXPECT_EQ(again["code"], "not_paused");
}

TEST_F(McpServerTest, ArgumentsAreCheckedAgainstTheSchemaBeforeAnythingRuns) {
  EXPECT_EQ(Error(Call(Role::kAdmin, "get_run", json::object()))["field"], "run_id");
  EXPECT_EQ(Error(Call(Role::kAdmin, "get_run", {{"run_id", 5}}))["field"], "run_id");
  EXPECT_EQ(Error(Call(Role::kAdmin, "list_runs", {{"limit", 0}}))["field"], "limit");
  EXPECT_EQ(Error(Call(Role::kAdmin, "list_runs", {{"status", "sleepy"}}))["field"], "status");
  json unknown = Error(Call(Role::kAdmin, "list_runs", {{"rm -rf /", true}}));
  EXPECT_EQ(unknown["code"], "invalid_argument");
  EXPECT_NE(unknown["message"].get<std::string>().find("this tool takes"), std::string::npos);
  EXPECT_EQ(Error(Call(Role::kAdmin, "decide",
                       {{"run_id", "r"}, {"digest", "d"}, {"decision", "maybe"}}))["field"],
            "decision");
  EXPECT_EQ(Error(Call(Role::kAdmin, "start_run", json::object()))["field"], "workflow");
  EXPECT_EQ(Error(Call(Role::kAdmin, "get_run", {{"run_id", "no-such-run"}}))["code"], "not_found");
  EXPECT_TRUE(engine()->ListRuns({})->runs.empty());
}

TEST_F(McpServerTest, StartFollowCancelRerunSignalAndDeadLetters) {
  json started =
      Ok(Call(Role::kOperator, "start_run", {{"workflow", "gated"}, {"idempotency_key", "k1"}}));
  const std::string id = started["run"]["id"];
  EXPECT_TRUE(started["created"].get<bool>());
  EXPECT_FALSE(Ok(Call(Role::kOperator, "start_run",
                       {{"workflow", "gated"}, {"idempotency_key", "k1"}}))["created"]
                   .get<bool>());
  json events = Ok(Call(Role::kViewer, "follow_events",
                        {{"run_id", id}, {"after_seq", 0}, {"wait_seconds", 0}}));
  ASSERT_FALSE(events["events"].empty());
  EXPECT_EQ(events["run_status"], "queued");
  EXPECT_FALSE(events["settled"].get<bool>());
  const int64_t next = events["next_after_seq"];
  EXPECT_EQ(next, events["events"].back()["seq"].get<int64_t>());
  ASSERT_OK(engine()->ExecuteRun(id));
  json more = Ok(Call(Role::kViewer, "follow_events",
                      {{"run_id", id}, {"after_seq", next}, {"wait_seconds", 1}}));
  EXPECT_FALSE(more["events"].empty());
  EXPECT_TRUE(more["settled"].get<bool>());
  json signal = Error(Call(Role::kOperator, "signal_run", {{"run_id", id}, {"name", "go"}}));
  EXPECT_EQ(signal["code"], "invalid_argument");  // gated has no wait step for it
  EXPECT_EQ(
      Error(Call(Role::kOperator, "rerun", {{"run_id", id}, {"from_phase", "nowhere"}}))["field"],
      "from_phase");
  json rerun = Ok(Call(Role::kOperator, "rerun", {{"run_id", id}, {"from_phase", "drafting"}}));
  EXPECT_EQ(rerun["run"]["status"], "queued");
  EXPECT_EQ(rerun["run"]["revision"], 2);
  json cancelled = Ok(Call(Role::kOperator, "cancel_run", {{"run_id", id}}));
  EXPECT_EQ(cancelled["run"]["status"], "cancelled");
  EXPECT_EQ(Error(Call(Role::kOperator, "cancel_run", {{"run_id", id}}))["code"],
            "failed_precondition");
  EXPECT_TRUE(Ok(Call(Role::kViewer, "list_dead_letters", json::object()))["dead_letters"].empty());
  EXPECT_EQ(Error(Call(Role::kOperator, "redrive_dead_letter", {{"id", "1"}}))["code"],
            "forbidden");
  json unknown = Error(Call(Role::kAdmin, "redrive_dead_letter", {{"id", "999999"}}));
  EXPECT_TRUE(unknown["code"] == "not_found" || unknown["code"] == "invalid_argument")
      << unknown.dump();
  EXPECT_EQ(Ok(Call(Role::kViewer, "list_workflows", json::object()))["workflows"].size(), 1u);
}

// A real dead letter: a consumer on the same file (cap 1 delivery) claims
// the run's message and dies twice; list_dead_letters shows it, a viewer or
// operator cannot redrive it, an admin can, and the run is queued again.
TEST_F(McpServerTest, ADeadLetterIsListedAndRedrivenByAnAdmin) {
  absl::StatusOr<CreateRunResult> started = engine()->StartRun({.workflow_name = "gated"});
  ASSERT_OK(started);
  SqliteOptions so;
  so.transport.max_deliveries = 1;
  absl::StatusOr<Backend> consumer = OpenSqlite(h_.path, so);
  ASSERT_OK(consumer);
  json letters;
  for (int i = 0; i < 5 && letters.empty(); ++i) {
    ASSERT_OK(consumer->transport->Claim("dies", 10, absl::Milliseconds(1)).status());
    RealClock()->SleepFor(absl::Milliseconds(5));  // past the visibility: delivered again
    letters = Ok(Call(Role::kViewer, "list_dead_letters", json::object()))["dead_letters"];
  }
  ASSERT_EQ(letters.size(), 1u) << letters.dump();
  EXPECT_EQ(letters[0]["run_id"], started->run.id);
  const std::string letter = letters[0]["id"].is_string() ? letters[0]["id"].get<std::string>()
                                                          : letters[0]["id"].dump();
  EXPECT_EQ(Error(Call(Role::kOperator, "redrive_dead_letter", {{"id", letter}}))["code"],
            "forbidden");
  Ok(Call(Role::kAdmin, "redrive_dead_letter", {{"id", letter}}));
  EXPECT_TRUE(Ok(Call(Role::kViewer, "list_dead_letters", json::object()))["dead_letters"].empty());
  absl::StatusOr<RunRecord> done = engine()->ExecuteRun(started->run.id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kPaused);  // it ran to its gate
}

TEST_F(McpServerTest, ARevokedTokenIsRefusedAndNeverEchoed) {
  McpServer s(engine(), &auth_, "rl_" + std::string(64, 'a'), McpOptions{});
  json r = Send(s, R"({"jsonrpc":"2.0","id":1,"method":"tools/call",)"
                   R"("params":{"name":"list_runs","arguments":{}}})");
  EXPECT_TRUE(r["result"]["isError"].get<bool>());
  EXPECT_EQ(r["result"]["structuredContent"]["error"]["code"], "unauthenticated");
  EXPECT_EQ(r.dump().find(std::string(64, 'a')), std::string::npos);
}

}  // namespace
}  // namespace runloom::mcp
