// Issue 24, acceptance 1: an agent whose scripted model (an OpenAI-
// compatible server on loopback) asks for three tools over two turns — two
// side by side, then a write — is killed by SIGKILL after each commit that
// records a turn or a tool call (RUNLOOM_CRASH_AT=after_step_commit:K, K =
// 1, 2, ...), and `runloom worker --until-idle` finishes it. The model
// server counts each turn's requests and the actions server each tool's:
// no turn and no call is made twice, and the final answer is recorded.
//
// Needs a RUNLOOM_TESTING build (crash points compile to nothing otherwise).
#include "gtest/gtest.h"
#include "integration/cli_harness.h"
#include "testing/scripted_http_server.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

namespace runloom::testing {
namespace {

using json = nlohmann::json;

// The most commits one run makes here; a kill past the last one never hits.
constexpr int kMaxHits = 12;

json ToolCall(const std::string& id, const std::string& name, const json& args) {
  return {{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args.dump()}}}};
}

json Reply(const json& message) {
  return {{"model", "scripted"},
          {"choices", json::array({{{"index", 0}, {"message", message}}})},
          {"usage", {{"prompt_tokens", 10}, {"completion_tokens", 5}}}};
}

// Counts per key, shared with a server's thread.
class Counts {
 public:
  void Add(const std::string& key) {
    runloom::MutexLock l(&mu_);
    ++counts_[key];
  }
  std::map<std::string, int> Get() {
    runloom::MutexLock l(&mu_);
    return counts_;
  }

 private:
  runloom::Mutex mu_;
  std::map<std::string, int> counts_;
};

// The model: its turn is the number of assistant messages it is sent.
ScriptedHttpServer::Reply ModelTurn(const ScriptedHttpServer::Request& r, Counts& counts) {
  const json body = json::parse(r.body, nullptr, false);
  int turn = 0;
  int tool_answers = 0;
  for (const json& m : body.value("messages", json::array())) {
    turn += m.value("role", "") == "assistant" ? 1 : 0;
    tool_answers += m.value("role", "") == "tool" ? 1 : 0;
  }
  counts.Add(absl::StrCat("turn", turn + 1));
  json message = {{"role", "assistant"}, {"content", nullptr}};
  if (turn == 0) {
    message["tool_calls"] = json::array({ToolCall("c1", "search", {{"q", "leases"}}),
                                         ToolCall("c2", "lookup", {{"id", "7"}})});
  } else if (turn == 1 && tool_answers == 2) {
    message["tool_calls"] = json::array({ToolCall("c3", "publish", {{"title", "notes"}})});
  } else if (turn == 2 && tool_answers == 3) {
    message["content"] = "done: published";
  } else {
    message["content"] = absl::StrCat("unexpected conversation: ", body.dump());
  }
  return {.body = Reply(message).dump()};
}

TEST(AgentKill, NoTurnAndNoToolCallIsRepeatedAfterAKillAtAnyCommit) {
  bool passed_the_end = false;
  int kills = 0;
  for (int hit = 1; hit <= kMaxHits && !passed_the_end; ++hit) {
    SCOPED_TRACE(absl::StrCat("after_step_commit:", hit));
    Counts model_counts;
    Counts action_counts;
    auto model = ScriptedHttpServer::Start(
        [&](const ScriptedHttpServer::Request& r) { return ModelTurn(r, model_counts); });
    ASSERT_TRUE(model.ok()) << model.status();
    auto actions = ScriptedHttpServer::Start([&](const ScriptedHttpServer::Request& r) {
      std::string key = r.method + " " + r.target.substr(0, r.target.find('?'));
      action_counts.Add(key);
      return ScriptedHttpServer::Reply{.body = json{{"ok", true}, {"at", key}}.dump()};
    });
    ASSERT_TRUE(actions.ok()) << actions.status();
    const std::string dir = MakeTempDir("agent-kill");
    const std::string db = dir + "/agent.db";
    WriteFile(dir + "/cfg.yaml", absl::StrCat("providers:\n  scripted:\n    kind: openai\n"
                                              "    base_url: ",
                                              (*model)->url(),
                                              "/v1\nmodels:\n  brain: {provider: scripted, "
                                              "model: scripted-1}\n"));
    const std::string act = (*actions)->url();
    WriteFile(dir + "/agent.yaml", absl::StrCat(R"(name: agent_kill
steps:
  - id: research
    kind: agent
    model: brain
    prompt: "Research leases, then publish notes."
    max_turns: 5
    tools:
      - name: search
        description: Search the docs.
        parameters: {type: object, properties: {q: {type: string}}, required: [q]}
        step: {kind: http, url: ")",
                                                act, R"(/search?q={{ args.q }}"}
      - name: lookup
        description: Look a record up.
        parameters: {type: object, properties: {id: {type: string}}, required: [id]}
        step: {kind: http, url: ")",
                                                act, R"(/lookup/{{ args.id }}"}
      - name: publish
        description: Publish the notes.
        parameters: {type: object, properties: {title: {type: string}}, required: [title]}
        step: {kind: http, method: POST, write: true, url: ")",
                                                act, R"(/publish", body: {title: "{{ args.title }}"}}
)"));
    const std::string at = absl::StrCat("after_step_commit:", hit);
    Child run({"run", dir + "/agent.yaml", "--config", dir + "/cfg.yaml", "--db", db,
               "--lease-ttl", "1s"},
              dir + "/run.log", {.env = {{"RUNLOOM_CRASH_AT", at}}});
    const int code = run.Wait();
    const std::string run_log = ReadFile(dir + "/run.log");
    if (code == 0) {
      passed_the_end = true;  // this many commits never happen: the run just finished
    } else {
      ASSERT_EQ(code, 128 + SIGKILL) << run_log;
      ++kills;
      Result worker = RunCli({"worker", "--db", db, "--config", dir + "/cfg.yaml", "--until-idle",
                              "--lease-ttl", "1s"});
      ASSERT_EQ(worker.code, 0) << worker.out;
    }
    Result list = RunStdout({"runs", "--db", db, "--json"});
    ASSERT_EQ(list.code, 0) << list.out;
    const json runs = json::parse(list.out, nullptr, false).value("runs", json::array());
    ASSERT_EQ(runs.size(), 1u) << list.out;
    const std::string id = runs[0].value("id", "");
    const json st = StatusJson(db, id);
    EXPECT_EQ(st["status"], "completed") << st.dump(2) << "\n" << run_log;
    for (const auto& [key, n] : model_counts.Get()) EXPECT_EQ(n, 1) << "model " << key;
    EXPECT_EQ(model_counts.Get().size(), 3u);
    const std::map<std::string, int> acts = action_counts.Get();
    EXPECT_EQ(acts.size(), 3u);
    for (const auto& [key, n] : acts) EXPECT_EQ(n, 1) << "action " << key;
    bool answered = false;
    for (const json& e : EventsJson(db, id)) {
      answered = answered || (e["type"] == "step.succeeded" && e["data"]["path"] == "research");
    }
    EXPECT_TRUE(answered);
  }
  EXPECT_TRUE(passed_the_end) << "raise kMaxHits: every hit killed the run";
  // Turn 1, search, lookup, turn 2, publish, turn 3 and the agent's own
  // record are committed in at least four transactions.
  EXPECT_GE(kills, 4);
  std::printf("killed after %d different commits\n", kills);
}

}  // namespace
}  // namespace runloom::testing
