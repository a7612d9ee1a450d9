// `runloom serve` end to end: it checks bearer tokens against the token
// store (`runloom token`), serves the API on the port it prints, executes runs, and on
// SIGTERM ends its event streams and exits 0 with a paused run still paused.
#include "testing/test_client.h"

#include "cli_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>

namespace runloom::testing {
namespace {

using api::testing::ClientResponse;
using api::testing::Request;
using api::testing::SseReader;
using ::testing::HasSubstr;

constexpr char kGated[] = R"(name: served
steps:
  - id: draft
    kind: noop
  - id: review
    kind: approval
    proposal: {text: hello}
)";

TEST(Serve, ChecksBearerTokensFromTheTokenStore) {
  std::string dir = MakeTempDir("serve");
  std::string db = dir + "/r.db";
  Result bad = RunCli({"serve", "--db", db, "--listen", "nowhere"});
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_THAT(bad.out, HasSubstr("--listen"));
  Result created =
      RunCli({"token", "create", "--name", "vera", "--role", "viewer", "--db", db, "--json"});
  ASSERT_EQ(created.code, 0) << created.out;
  // The JSON object is the first line; the notice that it will not be shown
  // again follows (stderr, merged by RunCli).
  const std::string token =
      nlohmann::json::parse(created.out.substr(0, created.out.find('\n')))["token"];
  std::string log = dir + "/serve.log";
  Child server({"serve", "--db", db, "--listen", "127.0.0.1:0"}, log);
  const uint16_t port = WaitForServePort(log);
  ASSERT_NE(port, 0) << ReadFile(log);
  EXPECT_THAT(ReadFile(log), ::testing::Not(HasSubstr("insecure")));
  EXPECT_EQ(Request(port, "GET", "/api/v1/runs").status, 401);
  EXPECT_EQ(Request(port, "GET", "/api/v1/runs", "", "rl_" + std::string(64, '0')).status, 401);
  ClientResponse me = Request(port, "GET", "/api/v1/me", "", token);
  ASSERT_EQ(me.status, 200) << me.body;
  EXPECT_EQ(me.json()["name"], "vera");
  EXPECT_EQ(me.json()["role"], "viewer");
  EXPECT_EQ(Request(port, "POST", "/api/v1/runs", R"({"workflow": "x"})", token).status, 403);
  ASSERT_EQ(RunCli({"token", "revoke", "vera", "--db", db}).code, 0);
  EXPECT_EQ(Request(port, "GET", "/api/v1/me", "", token).status, 401);
  server.Kill(SIGTERM);  // else the server outlives the test
  EXPECT_EQ(server.Wait(), 0) << ReadFile(log);
  EXPECT_THAT(ReadFile(log), ::testing::Not(HasSubstr(token)));
}

TEST(Serve, ServesRunsAndStopsGracefullyOnSigterm) {
  std::string dir = MakeTempDir("serve");
  std::string log = dir + "/serve.log";
  Child server({"serve", "--db", dir + "/r.db", "--listen", "127.0.0.1:0", "--insecure-no-auth"},
               log);
  const uint16_t port = WaitForServePort(log);
  ASSERT_NE(port, 0) << ReadFile(log);
  EXPECT_THAT(ReadFile(log), HasSubstr("WARNING: --insecure-no-auth"));
  ASSERT_EQ(Request(port, "GET", "/readyz").status, 200);
  ClientResponse reg =
      Request(port, "POST", "/api/v1/workflows", nlohmann::json{{"yaml", kGated}}.dump());
  ASSERT_EQ(reg.status, 201) << reg.body;
  ClientResponse run = Request(port, "POST", "/api/v1/runs", R"({"workflow": "served"})");
  ASSERT_EQ(run.status, 201) << run.body;
  const std::string id = run.json()["id"];
  std::string status;
  for (int i = 0; i < 200 && status != "paused"; ++i) {
    status = Request(port, "GET", "/api/v1/runs/" + id).json().value("status", "");
    if (status != "paused") std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(status, "paused");
  SseReader stream(port, "/api/v1/runs/" + id + "/events", "");
  EXPECT_FALSE(stream.ReadEvents(2, std::chrono::milliseconds(2'000)).empty());
  server.Kill(SIGTERM);
  stream.ReadToEnd(std::chrono::milliseconds(10'000));
  EXPECT_TRUE(stream.ended());
  EXPECT_EQ(server.Wait(), 0) << ReadFile(log);
  EXPECT_THAT(ReadFile(log), HasSubstr("runloom serve: stopped"));
  EXPECT_EQ(StatusJson(dir + "/r.db", id)["status"], "paused");
}

// A worker has no HTTP API, yet serves the engine's metrics where
// --metrics-listen says; a malformed address or one taken is exit 2 with
// nothing written.
TEST(WorkerMetrics, ServedOnMetricsListenAndRefusedOnABadAddress) {
  const std::string dir = MakeTempDir("worker-metrics");
  const std::string db = dir + "/r.db";
  Result bad = RunCli({"worker", "--db", db, "--metrics-listen", "localhost:99999"});
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_THAT(bad.out, HasSubstr("--metrics-listen: 'localhost:99999' is not an address"));
  EXPECT_FALSE(std::filesystem::exists(db)) << "a refused address wrote the database";
  WriteFile(dir + "/wf.yaml", "name: counted\nsteps:\n  - {id: a, kind: noop}\n");
  Result admitted = RunCli({"run", dir + "/wf.yaml", "--db", db, "--detach"});
  ASSERT_EQ(admitted.code, 0) << admitted.out;
  const std::string log = dir + "/worker.log";
  Child worker({"worker", "--db", db, "--metrics-listen", "127.0.0.1:0"}, log);
  const uint16_t port = WaitForPortIn(log, "metrics on http://127.0.0.1:");
  ASSERT_NE(port, 0) << ReadFile(log);
  ClientResponse metrics;
  for (int i = 0; i < 100; ++i) {  // until the admitted run has finished here
    metrics = Request(port, "GET", "/metrics");
    if (metrics.body.find("runloom_runs_finished_total{status=\"completed\"} 1") !=
        std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(metrics.status, 200);
  EXPECT_THAT(metrics.body, HasSubstr("runloom_runs_finished_total{status=\"completed\"} 1"));
  Result taken = RunCli({"worker", "--db", db, "--metrics-listen",
                         "127.0.0.1:" + std::to_string(port), "--until-idle"});
  EXPECT_EQ(taken.code, 2) << taken.out;
  EXPECT_THAT(taken.out, HasSubstr("--metrics-listen: cannot listen on 127.0.0.1:"));
  worker.Kill(SIGTERM);
  EXPECT_EQ(worker.Wait(), 0) << ReadFile(log);
}

// The value of `series` (name and labels, as the text format writes them)
// in a scrape, or -1 when the scrape has no such line.
double SeriesValue(const std::string& scrape, const std::string& series) {
  size_t at = 0;
  while ((at = scrape.find(series + " ", at)) != std::string::npos) {
    if (at == 0 || scrape[at - 1] == '\n') return std::stod(scrape.substr(at + series.size() + 1));
    at += series.size();
  }
  return -1;
}

// The state gauges a worker exports: the runs in flight by status, the dead
// letters and each tenant's budget, read from the store (not this
// process's own counters): two runs admitted before the worker started are
// in flight whenever it looks (queued at its first look, paused at its gate
// later), and the tenant's configured limit is all left.
TEST(WorkerMetrics, GaugesShowTheRunsInFlightTheDeadLettersAndTheTenantBudgets) {
  const std::string dir = MakeTempDir("worker-gauges");
  const std::string db = dir + "/r.db";
  WriteFile(dir + "/wf.yaml", kGated);
  WriteFile(dir + "/config.yaml", "tenants:\n  acme: {budget: 2.5}\n");
  for (int i = 0; i < 2; ++i) {
    Result admitted = RunCli({"run", dir + "/wf.yaml", "--db", db, "--detach"});
    ASSERT_EQ(admitted.code, 0) << admitted.out;
  }
  const std::string log = dir + "/worker.log";
  Child worker({"worker", "--db", db, "--config", dir + "/config.yaml", "--metrics-listen",
                "127.0.0.1:0"},
               log);
  const uint16_t port = WaitForPortIn(log, "metrics on http://127.0.0.1:");
  ASSERT_NE(port, 0) << ReadFile(log);
  ClientResponse metrics;
  for (int i = 0; i < 100; ++i) {  // the endpoint listens before the engine opens
    metrics = Request(port, "GET", "/metrics");
    if (metrics.body.find("runloom_runs_active{") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(metrics.status, 200);
  const std::string& m = metrics.body;
  const double queued = SeriesValue(m, "runloom_runs_active{status=\"queued\"}");
  const double running = SeriesValue(m, "runloom_runs_active{status=\"running\"}");
  const double paused = SeriesValue(m, "runloom_runs_active{status=\"paused\"}");
  EXPECT_GE(queued, 0) << m;
  EXPECT_EQ(queued + running + paused, 2) << m;
  EXPECT_EQ(SeriesValue(m, "runloom_runs_active{status=\"waiting\"}"), 0) << m;
  EXPECT_EQ(SeriesValue(m, "runloom_dead_letters"), 0) << m;
  EXPECT_EQ(SeriesValue(m, "runloom_budget_limit_micros{tenant=\"acme\"}"), 2'500'000) << m;
  EXPECT_EQ(SeriesValue(m, "runloom_budget_spent_micros{tenant=\"acme\"}"), 0) << m;
  EXPECT_EQ(SeriesValue(m, "runloom_budget_reserved_micros{tenant=\"acme\"}"), 0) << m;
  EXPECT_EQ(SeriesValue(m, "runloom_budget_left_micros{tenant=\"acme\"}"), 2'500'000) << m;
  EXPECT_EQ(SeriesValue(m, "runloom_state_gauges_errors_total"), 0) << m;
  worker.Kill(SIGTERM);
  EXPECT_EQ(worker.Wait(), 0) << ReadFile(log);
}

}  // namespace
}  // namespace runloom::testing
