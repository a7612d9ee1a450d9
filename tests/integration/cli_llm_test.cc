// `runloom run --config` against a scripted OpenAI-compatible server on
// loopback: the README's example as written, and an API key that appears in
// no output, database file or WAL even when the provider echoes it.
#include "testing/scripted_http_server.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "cli_harness.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

#include <memory>
#include <string>
#include <vector>

namespace runloom::testing {
namespace {

using json = nlohmann::json;

// The text between the line `cat > NAME <<'YAML'` and the next `YAML` line
// of README.md: the example a reader copies.
std::string ReadmeHeredoc(const std::string& name) {
  const std::string readme = ReadFile(SourceDir() + "/README.md");
  const std::string open = "cat > " + name + " <<'YAML'\n";
  const size_t start = readme.find(open);
  if (start == std::string::npos) return "";
  const size_t body = start + open.size();
  const size_t end = readme.find("\nYAML\n", body);
  return end == std::string::npos ? "" : readme.substr(body, end + 1 - body);
}

json ChatReply(const std::string& text, int in, int out) {
  return {{"model", "qwen2.5-0.5b-instruct"},
          {"choices", {{{"message", {{"role", "assistant"}, {"content", text}}}}}},
          {"usage", {{"prompt_tokens", in}, {"completion_tokens", out}}}};
}

std::vector<json> CallsOf(const std::vector<json>& events) {
  std::vector<json> calls;
  for (const json& e : events) {
    if (e["type"] == "llm.call") calls.push_back(e["data"]);
  }
  return calls;
}

TEST(CliLlm, ReadmeExampleRunsAgainstALocalOpenAiServer) {
  auto server = ScriptedHttpServer::Start([](const ScriptedHttpServer::Request& r) {
    const json body = json::parse(r.body, nullptr, false);
    const std::string prompt = body["messages"].back()["content"];
    if (prompt.find("Rate this haiku") != std::string::npos) {
      return ScriptedHttpServer::Reply{.body = ChatReply("{\"score\": 7}", 40, 6).dump()};
    }
    return ScriptedHttpServer::Reply{
        .body = ChatReply("Cold river at dawn\nstones remember the water\nmist lifts, moving on",
                          20, 18)
                    .dump()};
  });
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string dir = MakeTempDir("llm-readme");
  std::string config = ReadmeHeredoc("runloom-config.yaml");
  const std::string workflow = ReadmeHeredoc("haiku.yaml");
  ASSERT_NE(config.find("http://127.0.0.1:8000/v1"), std::string::npos) << "README changed";
  ASSERT_FALSE(workflow.empty()) << "README changed";
  absl::StrReplaceAll({{"http://127.0.0.1:8000/v1", (*server)->url() + "/v1"}}, &config);
  WriteFile(dir + "/runloom-config.yaml", config);
  WriteFile(dir + "/haiku.yaml", workflow);
  const std::string db = dir + "/demo.db";

  // Without the config the alias is unknown: exit 2, nothing written.
  Result refused = RunCli({"run", dir + "/haiku.yaml", "--db", db});
  EXPECT_EQ(refused.code, 2) << refused.out;
  EXPECT_NE(refused.out.find("model 'writer' is not configured"), std::string::npos) << refused.out;

  Result run =
      RunCli({"run", dir + "/haiku.yaml", "--config", dir + "/runloom-config.yaml", "--db", db});
  ASSERT_EQ(run.code, 0) << run.out;
  const std::string run_id = RunIdFrom(run.out);
  const json st = StatusJson(db, run_id);
  ASSERT_EQ(st["status"], "completed") << st.dump(2);
  for (const json& step : st["steps"]) {
    if (step["path"] != "grade") continue;
    EXPECT_EQ(step["output"]["json"], json({{"score", 7}})) << step.dump(2);
    EXPECT_EQ(step["output"]["usage"]["cost_micros"], 6) << step.dump(2);  // 4 + 1.2 -> 4 + 2
    EXPECT_EQ(step["output"]["provider"], "local");
  }
  std::vector<ScriptedHttpServer::Request> requests = (*server)->requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].target, "/v1/chat/completions");
  EXPECT_EQ(json::parse(requests[0].body)["model"], "qwen2.5-0.5b-instruct");
  EXPECT_EQ(json::parse(requests[0].body)["max_tokens"], 256);
  EXPECT_EQ(requests[0].headers.count("authorization"), 0u) << "no key configured, none sent";

  const std::vector<json> calls = CallsOf(EventsJson(db, run_id));
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]["model"], "writer");
  EXPECT_EQ(calls[0]["provider"], "local");
  EXPECT_EQ(calls[0]["input_tokens"], 20);
  EXPECT_EQ(calls[0]["output_tokens"], 18);
  // 20 tokens at 0.0001 and 18 at 0.0002 per 1,000: 2 + 3.6 micro-units, each rounded up.
  EXPECT_EQ(calls[0]["cost_micros"], 6);
  EXPECT_EQ(calls[1]["outcome"], "ok");

  // The README's budgets: tenant docs (from the input `tenant:` names) paid
  // for both calls; a run budget above what it has left is refused at
  // creation; one below the first call's worst case sends nothing.
  Result budgets = RunStdout({"budgets", "--db", db, "--json"});
  ASSERT_EQ(budgets.code, 0) << budgets.out;
  const json tenants = json::parse(budgets.out, nullptr, false);
  ASSERT_EQ(tenants.size(), 1u) << budgets.out;
  EXPECT_EQ(tenants[0]["tenant"], "docs");
  EXPECT_EQ(tenants[0]["limit_micros"], 500'000);
  EXPECT_EQ(tenants[0]["spent_micros"], 12);
  EXPECT_EQ(tenants[0]["reserved_micros"], 0);
  Result table = RunStdout({"budgets", "--db", db});
  EXPECT_NE(table.out.find("0.5       0.000012              0       0.499988"), std::string::npos)
      << table.out;
  Result over = RunCli({"run", dir + "/haiku.yaml", "--config", dir + "/runloom-config.yaml",
                        "--db", db, "--budget", "1"});
  EXPECT_EQ(over.code, 2) << over.out;
  EXPECT_NE(over.out.find("budget preflight: tenant 'docs' has 0.499988 left of 0.5"),
            std::string::npos)
      << over.out;
  Result stopped = RunCli({"run", dir + "/haiku.yaml", "--config", dir + "/runloom-config.yaml",
                           "--db", db, "--budget", "0.00005"});
  EXPECT_EQ(stopped.code, 1) << stopped.out;
  EXPECT_NE(stopped.out.find("budget_stopped"), std::string::npos) << stopped.out;
  EXPECT_NE(stopped.out.find("a model call needing up to 0.000055 was not sent"), std::string::npos)
      << stopped.out;
  EXPECT_EQ((*server)->requests().size(), 2u) << "nothing sent past the budget";

  // A detached run, executed by a worker that reads RUNLOOM_CONFIG.
  const std::string db2 = dir + "/worker.db";
  Result detached = RunCli({"run", dir + "/haiku.yaml", "--config", dir + "/runloom-config.yaml",
                            "--db", db2, "--detach"});
  ASSERT_EQ(detached.code, 0) << detached.out;
  const std::string id2 = detached.out.substr(0, detached.out.find('\n'));
  Result worker = RunCli({"worker", "--db", db2, "--until-idle"},
                         {.env = {{"RUNLOOM_CONFIG", dir + "/runloom-config.yaml"}}});
  EXPECT_EQ(worker.code, 0) << worker.out;
  const json st2 = StatusJson(db2, id2);
  EXPECT_EQ(st2["status"], "completed") << st2.dump(2);
  EXPECT_EQ((*server)->requests().size(), 4u);
}

TEST(CliLlm, ApiKeyIsInNoOutputDatabaseOrWal) {
  const std::string key = "sk-live-" + std::to_string(getpid()) + "-c0ffee";
  auto server = ScriptedHttpServer::Start([key](const ScriptedHttpServer::Request& r) {
    const json body = json::parse(r.body, nullptr, false);
    const std::string prompt = body["messages"].back()["content"];
    if (r.headers.count("authorization") == 0 || r.headers.at("authorization") != "Bearer " + key) {
      return ScriptedHttpServer::Reply{.status = 400, .body = "{}"};
    }
    if (prompt == "second") {
      // A provider that echoes the key in an error, as some do for a bad key.
      return ScriptedHttpServer::Reply{
          .status = 401,
          .body = json{{"error", {{"message", "Incorrect API key provided: " + key}}}}.dump()};
    }
    return ScriptedHttpServer::Reply{.body = ChatReply("fine", 3, 1).dump()};
  });
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string dir = MakeTempDir("llm-key");
  WriteFile(dir + "/cfg.yaml",
            absl::StrCat("providers:\n  hosted:\n    kind: openai\n    base_url: ",
                         (*server)->url(), "/v1\n    api_key: secret://LLM_TEST_KEY\n",
                         "models:\n  m: {provider: hosted, model: gpt-x}\n"));
  WriteFile(dir + "/wf.yaml",
            "name: keyed\nsteps:\n  - {id: first, kind: llm, model: m, prompt: first}\n"
            "  - {id: second, kind: llm, model: m, prompt: second, needs: [first]}\n");
  const std::string db = dir + "/key.db";
  const ChildSetup env{.env = {{"RUNLOOM_SECRET_LLM_TEST_KEY", key}}};
  Result run = RunCli({"run", dir + "/wf.yaml", "--config", dir + "/cfg.yaml", "--db", db}, env);
  EXPECT_EQ(run.code, 1) << run.out;  // the second step fails (401)
  const std::string run_id = RunIdFrom(run.out);
  ASSERT_FALSE(run_id.empty()) << run.out;
  ASSERT_EQ((*server)->requests().size(), 2u) << "the key was sent with each request";
  std::string everything = run.out;
  for (const Result& r : ReadRunOutputs(db, run_id)) {
    EXPECT_EQ(r.code, 0) << r.out;
    everything += r.out;
  }
  EXPECT_NE(everything.find("Incorrect API key provided: [secret]"), std::string::npos)
      << everything;
  EXPECT_EQ(everything.find(key), std::string::npos) << "printed: " << everything;
  for (const std::string& file : {db, db + "-wal", dir + "/cfg.yaml"}) {
    EXPECT_EQ(ReadFile(file).find(key), std::string::npos) << "in " << file;
  }
  const std::vector<json> calls = CallsOf(EventsJson(db, run_id));
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1]["outcome"], "error");
  EXPECT_EQ(calls[1]["error_class"], "error");

  // A key written into the config as a value is refused, and not echoed.
  WriteFile(dir + "/bad.yaml", "providers:\n  p: {kind: openai, api_key: " + key + "}\n");
  Result bad = RunCli({"run", dir + "/wf.yaml", "--config", dir + "/bad.yaml", "--db", db});
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("must be a secret reference"), std::string::npos) << bad.out;
  EXPECT_EQ(bad.out.find(key), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace runloom::testing
