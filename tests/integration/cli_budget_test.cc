// Budgets through the CLI (issue 11, acceptance 2): a run its tenant cannot
// pay for is refused at creation with nothing written, and the reservation
// of an executor SIGKILLed in the middle of a model call is released by the
// next worker's recovery, never leaked. `runloom budgets --json` reads the
// ledger each time.
#include "runloom/clock.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cli_harness.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

#include <string>

namespace runloom::testing {
namespace {

using json = nlohmann::json;

// A priced model on the built-in fake provider: 0.001 price units (1,000
// micro-units) per 1,000 prompt tokens, completions free. The tenant acme
// may spend 0.0001 (100 micro-units).
constexpr char kConfig[] = R"(providers:
  sim: {kind: fake}
models:
  priced: {provider: sim, input_price_per_1k: 0.001, output_price_per_1k: 0}
tenants:
  acme: {budget: 0.0001}
)";

// One model call of a 40-byte prompt (worst case 40 micro-units), slow
// enough to be killed in flight.
constexpr char kWorkflow[] = R"(name: billed
inputs:
  tenant: {type: string}
  doc: {type: string, default: d}
  node: {type: string, default: n}
stage_events: {document_id: doc, tenant_id: tenant, node_id: node}
steps:
  - id: ask
    kind: llm
    model: priced
    prompt: "a a a a a a a a a a a a a a a a a a a a "
    fake: {latency: 3s}
)";

json Budgets(const std::string& db) {
  Result r = RunStdout({"budgets", "--db", db, "--json"});
  EXPECT_EQ(r.code, 0) << r.out;
  json all = json::parse(r.out, nullptr, false);
  for (const json& t : all) {
    if (t.value("tenant", "") == "acme") return t;
  }
  ADD_FAILURE() << "no tenant acme in " << r.out;
  return json::object();
}

TEST(CliBudget, PreflightRefusesARunItsTenantCannotPayFor) {
  const std::string dir = MakeTempDir("budget_pre");
  const std::string db = dir + "/b.db";
  WriteFile(dir + "/cfg.yaml", kConfig);
  WriteFile(dir + "/wf.yaml", kWorkflow);
  Result refused = RunCli({"run", dir + "/wf.yaml", "--config", dir + "/cfg.yaml", "--db", db,
                           "--input", "tenant=acme", "--budget", "0.0002"});
  EXPECT_EQ(refused.code, 2) << refused.out;
  EXPECT_NE(refused.out.find("budget preflight: tenant 'acme' has 0.0001 left of 0.0001"),
            std::string::npos)
      << refused.out;
  Result runs = RunStdout({"runs", "--db", db, "--json"});
  EXPECT_EQ(runs.code, 0);
  EXPECT_EQ(json::parse(runs.out, nullptr, false).value("runs", json::array()).size(), 0u)
      << runs.out;
  const json acme = Budgets(db);
  EXPECT_EQ(acme["limit_micros"], 100);
  EXPECT_EQ(acme["spent_micros"], 0);
  EXPECT_EQ(acme["left_micros"], 100);
  Result bad = RunCli(
      {"run", dir + "/wf.yaml", "--config", dir + "/cfg.yaml", "--db", db, "--budget", "two"});
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--budget 'two' is not an amount"), std::string::npos) << bad.out;
}

TEST(CliBudget, AKilledExecutorsReservationIsChargedByRecovery) {
  const std::string dir = MakeTempDir("budget_kill");
  const std::string db = dir + "/b.db";
  WriteFile(dir + "/cfg.yaml", kConfig);
  WriteFile(dir + "/wf.yaml", kWorkflow);
  Child run({"run", dir + "/wf.yaml", "--config", dir + "/cfg.yaml", "--db", db, "--input",
             "tenant=acme", "--lease-ttl", "1s"},
            dir + "/run.log");
  // Wait until the call has reserved (it then sleeps 3 s in the provider).
  json acme;
  for (int i = 0; i < 500; ++i) {
    RealClock()->SleepFor(absl::Milliseconds(20));
    Result r = RunStdout({"budgets", "--db", db, "--json"});
    if (r.code != 0) continue;
    json all = json::parse(r.out, nullptr, false);
    if (all.is_array() && !all.empty() && all[0].value("reserved_micros", 0) > 0) {
      acme = all[0];
      break;
    }
  }
  ASSERT_EQ(acme.value("reserved_micros", 0), 40) << acme.dump();
  run.Kill(SIGKILL);
  EXPECT_EQ(run.Wait(), 128 + SIGKILL);
  const std::string run_id = RunIdFrom(ReadFile(dir + "/run.log"));
  ASSERT_FALSE(run_id.empty()) << ReadFile(dir + "/run.log");
  EXPECT_EQ(Budgets(db)["reserved_micros"], 40);  // the dead executor's, until recovery

  Result worker = RunCli(
      {"worker", "--db", db, "--config", dir + "/cfg.yaml", "--until-idle", "--lease-ttl", "1s"});
  EXPECT_EQ(worker.code, 0) << worker.out;
  EXPECT_EQ(StatusJson(db, run_id)["status"], "completed");
  acme = Budgets(db);
  EXPECT_EQ(acme["reserved_micros"], 0) << acme.dump();
  // The killed call's worst case (40, its fate unknown: it may have been
  // answered and paid) and the recovery's call (27 prompt tokens).
  EXPECT_EQ(acme["spent_micros"], 40 + 27) << acme.dump();
  EXPECT_EQ(acme["left_micros"], 100 - 67) << acme.dump();
}

}  // namespace
}  // namespace runloom::testing
