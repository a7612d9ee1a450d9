// Issue 25, traces: the spans of a blog run reach a local OTLP receiver as
// one tree (run -> step attempts -> model calls), and a run started over
// HTTP with a traceparent joins the caller's trace.
#include "testing/scripted_http_server.h"
#include "testing/status_matchers.h"
#include "testing/test_client.h"

#include "absl/strings/match.h"
#include "cli_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace runloom::testing {
namespace {

using api::testing::ClientResponse;
using api::testing::Request;
using json = nlohmann::json;

// Every span the receiver got, by span id, and its attributes flattened.
struct Received {
  std::map<std::string, json> spans;
  std::map<std::string, std::map<std::string, json>> attributes;
};

Received SpansOf(const ScriptedHttpServer& receiver) {
  Received out;
  for (const ScriptedHttpServer::Request& r : receiver.requests()) {
    const json body = json::parse(r.body, nullptr, false);
    if (!body.is_object()) continue;
    for (const json& rs : body.value("resourceSpans", json::array())) {
      for (const json& ss : rs.value("scopeSpans", json::array())) {
        for (const json& s : ss.value("spans", json::array())) {
          const std::string id = s.value("spanId", "");
          out.spans[id] = s;
          for (const json& a : s.value("attributes", json::array())) {
            const json& v = a["value"];
            out.attributes[id][a.value("key", "")] = v.begin().value();
          }
        }
      }
    }
  }
  return out;
}

std::unique_ptr<ScriptedHttpServer> StartReceiver() {
  auto receiver = ScriptedHttpServer::Start([](const ScriptedHttpServer::Request&) {
    return ScriptedHttpServer::Reply{.status = 200, .body = "{}"};
  });
  EXPECT_OK(receiver);
  return receiver.ok() ? *std::move(receiver) : nullptr;
}

TEST(Traces, ABlogRunsSpansReachTheReceiverAsOneTree) {
  std::unique_ptr<ScriptedHttpServer> receiver = StartReceiver();
  ASSERT_NE(receiver, nullptr);
  const std::string dir = MakeTempDir("traces");
  Result run = RunCli({"run", SourceDir() + "/examples/blog.yaml", "--db", dir + "/r.db",
                       "--auto-approve", "--otlp-endpoint", receiver->url() + "/v1/traces"});
  ASSERT_EQ(run.code, 0) << run.out;
  const std::string run_id = RunIdFrom(run.out);
  ASSERT_FALSE(run_id.empty()) << run.out;
  // The process sent what it had queued before it exited.
  const Received got = SpansOf(*receiver);
  ASSERT_FALSE(got.spans.empty()) << "no span reached the receiver";

  std::string root;
  for (const auto& [id, s] : got.spans) {
    if (absl::StartsWith(s.value("name", ""), "run ")) {
      EXPECT_TRUE(root.empty()) << "two run spans";
      root = id;
    }
  }
  ASSERT_FALSE(root.empty()) << "no run span";
  const json& r = got.spans.at(root);
  EXPECT_EQ(r["name"], "run blog");
  EXPECT_FALSE(r.contains("parentSpanId"));
  EXPECT_EQ(got.attributes.at(root).at("runloom.run_id"), run_id);
  EXPECT_EQ(got.attributes.at(root).at("runloom.status"), "completed");
  const std::string trace = r["traceId"];

  int steps = 0, llm_calls = 0;
  for (const auto& [id, s] : got.spans) {
    EXPECT_EQ(s["traceId"], trace) << s.dump();
    const std::string name = s.value("name", "");
    if (absl::StartsWith(name, "step ")) {
      ++steps;
      EXPECT_EQ(s["parentSpanId"], root) << s.dump();
      EXPECT_EQ(got.attributes.at(id).at("runloom.run_id"), run_id);
      EXPECT_LE(std::stoll(s["startTimeUnixNano"].get<std::string>()),
                std::stoll(s["endTimeUnixNano"].get<std::string>()));
    } else if (absl::StartsWith(name, "llm ")) {
      ++llm_calls;
      const std::string parent = s.value("parentSpanId", "");
      ASSERT_TRUE(got.spans.count(parent)) << "an llm span's parent is missing: " << s.dump();
      EXPECT_TRUE(absl::StartsWith(got.spans.at(parent).value("name", ""), "step "));
      EXPECT_EQ(s["kind"], 3);  // client
      EXPECT_TRUE(got.attributes.at(id).count("gen_ai.usage.input_tokens")) << s.dump();
    }
  }
  EXPECT_GE(steps, 3);
  EXPECT_GE(llm_calls, 1);
}

// POST /runs with a traceparent: the run's span is a child of the caller's
// span, in the caller's trace; a malformed one is ignored (the run gets a
// trace of its own), never refused.
TEST(Traces, ARunStartedWithATraceparentJoinsTheCallersTrace) {
  std::unique_ptr<ScriptedHttpServer> receiver = StartReceiver();
  ASSERT_NE(receiver, nullptr);
  const std::string dir = MakeTempDir("traces-serve");
  const std::string log = dir + "/serve.log";
  Child server({"serve", "--db", dir + "/r.db", "--listen", "127.0.0.1:0", "--insecure-no-auth",
                "--otlp-endpoint", receiver->url() + "/v1/traces"},
               log);
  const uint16_t port = WaitForServePort(log);
  ASSERT_NE(port, 0) << ReadFile(log);
  ASSERT_EQ(Request(port, "POST", "/api/v1/workflows",
                    json{{"yaml", "name: traced\nsteps:\n  - {id: a, kind: noop}\n"}}.dump())
                .status,
            201);
  constexpr char kCaller[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  ClientResponse joined = Request(port, "POST", "/api/v1/runs", R"({"workflow": "traced"})", "",
                                  {{"traceparent", kCaller}});
  ASSERT_EQ(joined.status, 201) << joined.body;
  ClientResponse own = Request(port, "POST", "/api/v1/runs", R"({"workflow": "traced"})", "",
                               {{"traceparent", "00-not-a-trace-01"}});
  ASSERT_EQ(own.status, 201) << own.body;
  const std::string joined_id = joined.json()["id"];
  const std::string own_id = own.json()["id"];
  std::map<std::string, json> runs;  // run id -> its run span
  for (int i = 0; i < 100 && runs.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const Received got = SpansOf(*receiver);
    for (const auto& [id, s] : got.spans) {
      auto a = got.attributes.find(id);
      if (absl::StartsWith(s.value("name", ""), "run ") && a != got.attributes.end()) {
        runs[a->second.at("runloom.run_id").get<std::string>()] = s;
      }
    }
  }
  server.Kill(SIGTERM);
  EXPECT_EQ(server.Wait(), 0) << ReadFile(log);
  ASSERT_EQ(runs.size(), 2u) << "run spans of " << joined_id << " and " << own_id;
  EXPECT_EQ(runs[joined_id]["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(runs[joined_id]["parentSpanId"], "00f067aa0ba902b7");
  EXPECT_NE(runs[own_id]["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_FALSE(runs[own_id].contains("parentSpanId"));
}

}  // namespace
}  // namespace runloom::testing
