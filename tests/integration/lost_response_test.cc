// Issue 11, acceptance 4: an external write whose response is lost has
// exactly one effect, against the example actions server (run in-process):
//   (a) the server applies the write and drops the response: the step's
//       retry reconciles (by lookup, or by resending with the same
//       Idempotency-Key) and succeeds;
//   (b) the executor is SIGKILLed after the server applied the write and
//       before the answer was recorded: a worker recovers the run and
//       reconciles.
// Each case runs with and without a lookup request. The effect count is the
// server's; the ledger is read from the database file (a documented format,
// docs/formats/sqlite-schema.md).
#include "absl/synchronization/notification.h"
#include "actions_server/actions_server.h"
#include "cli_harness.h"
#include "gtest/gtest.h"
#include "sqlite3.h"

#include <csignal>
#include <map>
#include <string>
#include <vector>

namespace runloom::testing {
namespace {

constexpr char kWorkflow[] = R"(name: lost
inputs:
  url: {type: string}
steps:
  - id: apply
    kind: http
    method: POST
    url: "{{ inputs.url }}/actions"
    write: true
    action: remediate
    body: {action: restart checkout, replicas: 3}
    expect: [200, 201]
LOOKUP    timeout: 5s
    retry: {max_attempts: 3, initial_delay: 100ms}
)";

// One write_operations row, as the database holds it.
struct LedgerRow {
  std::string state, source, idempotency_key;
  int64_t begins = -1;
  int64_t http_status = 0;
};

std::vector<LedgerRow> ReadLedger(const std::string& db) {
  std::vector<LedgerRow> rows;
  sqlite3* h = nullptr;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    const char* sql =
        "SELECT state, coalesce(source, ''), idempotency_key, begins, coalesce(http_status, 0) "
        "FROM write_operations";
    if (sqlite3_prepare_v2(h, sql, -1, &st, nullptr) == SQLITE_OK) {
      while (sqlite3_step(st) == SQLITE_ROW) {
        LedgerRow r;
        r.state = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
        r.source = reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
        r.idempotency_key = reinterpret_cast<const char*>(sqlite3_column_text(st, 2));
        r.begins = sqlite3_column_int64(st, 3);
        r.http_status = sqlite3_column_int64(st, 4);
        rows.push_back(r);
      }
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(h);
  return rows;
}

// The one run in `db`.
std::string OnlyRunId(const std::string& db) {
  sqlite3* h = nullptr;
  std::string id;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(h, "SELECT id FROM runs", -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
      id = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(h);
  return id;
}

// Param: whether the step has a lookup request (else it relies on the
// server's Idempotency-Key).
class LostResponseTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("lostresponse");
    db_ = dir_ + "/lost.db";
    std::string yaml = kWorkflow;
    const std::string lookup =
        GetParam() ? "    lookup: {url: \"{{ inputs.url }}/actions/lookup\"}\n" : "";
    yaml.replace(yaml.find("LOOKUP"), 6, lookup);
    WriteFile(dir_ + "/lost.yaml", yaml);
  }
  void StartServer(examples::ActionsServerOptions options) {
    absl::StatusOr<std::unique_ptr<examples::ActionsServer>> s =
        examples::ActionsServer::Start(std::move(options));
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  // `lease_ttl` short when a test kills the run: the worker then takes the
  // run over soon after.
  std::vector<std::string> RunArgs(const std::string& lease_ttl = "30s") {
    return {"run",     dir_ + "/lost.yaml",     "--db",        db_,
            "--input", "url=" + server_->url(), "--lease-ttl", lease_ttl};
  }
  // The reconciliation's source in the ledger: lookup, or a resend under the
  // same key (which the server answers from its record).
  std::string ExpectedSource() const { return GetParam() ? "lookup" : "resent"; }

  void ExpectOneEffectAndDone(const std::string& id) {
    nlohmann::json st = StatusJson(db_, id);
    EXPECT_EQ(st["status"], "completed") << st.dump(2);
    std::vector<nlohmann::json> applied = server_->Applied();
    ASSERT_EQ(applied.size(), 1u) << "the write was applied more than once";
    std::vector<LedgerRow> ledger = ReadLedger(db_);
    ASSERT_EQ(ledger.size(), 1u);
    EXPECT_EQ(ledger[0].state, "done");
    EXPECT_EQ(ledger[0].source, ExpectedSource());
    EXPECT_GE(ledger[0].begins, 1) << "the second attempt found the intent";
    EXPECT_EQ(ledger[0].idempotency_key, applied[0]["idempotency_key"]);
    for (const nlohmann::json& s : st["steps"]) {
      if (s["path"] != "apply") continue;
      EXPECT_EQ(s["state"], "succeeded");
      EXPECT_EQ(s["output"]["write"]["source"], ExpectedSource());
      EXPECT_EQ(s["output"]["body"]["id"], applied[0]["id"]);
    }
  }

  std::string dir_, db_;
  std::unique_ptr<examples::ActionsServer> server_;
};

// (a) The server applies the write and closes the connection unanswered.
TEST_P(LostResponseTest, DroppedResponseIsReconciledByTheRetry) {
  StartServer({.drop_responses = 1});
  Result run = RunCli(RunArgs());
  EXPECT_EQ(run.code, 0) << run.out;
  const std::string id = OnlyRunId(db_);
  ASSERT_FALSE(id.empty()) << run.out;
  ExpectOneEffectAndDone(id);
  // The first attempt failed as unavailable and was retried; one success.
  int retried = 0, succeeded = 0;
  for (const nlohmann::json& e : EventsJson(db_, id)) {
    if (e["type"] == "step.failed" && e["data"]["will_retry"] == true) ++retried;
    if (e["type"] == "step.succeeded") ++succeeded;
  }
  EXPECT_EQ(retried, 1);
  EXPECT_EQ(succeeded, 1);
  EXPECT_NE(run.out.find("intent without a result"), std::string::npos) << run.out;
}

// (b) The executor dies between the server applying the write and the
// answer being recorded; a worker takes the run over after the lease expires.
TEST_P(LostResponseTest, ExecutorKilledBetweenSendAndRecordIsReconciledOnRecovery) {
  absl::Notification applied;
  StartServer({.hold = absl::Seconds(60), .on_applied = [&applied](const nlohmann::json&) {
                 if (!applied.HasBeenNotified()) applied.Notify();
               }});
  Child run(RunArgs("1s"), dir_ + "/run.log");
  ASSERT_TRUE(applied.WaitForNotificationWithTimeout(absl::Seconds(60)))
      << ReadFile(dir_ + "/run.log");
  run.Kill(SIGKILL);
  ASSERT_EQ(run.Wait(), 128 + SIGKILL);
  const std::string id = OnlyRunId(db_);
  ASSERT_FALSE(id.empty());
  // Killed after sending, before recording: the ledger holds the intent only.
  std::vector<LedgerRow> before = ReadLedger(db_);
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].state, "intent");
  EXPECT_NE(StatusJson(db_, id)["status"], "completed");

  Result worker = RunCli({"worker", "--db", db_, "--until-idle", "--lease-ttl", "1s"});
  EXPECT_EQ(worker.code, 0) << worker.out;
  ExpectOneEffectAndDone(id);
  EXPECT_NE(worker.out.find("intent without a result"), std::string::npos) << worker.out;
}

INSTANTIATE_TEST_SUITE_P(Reconcile, LostResponseTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "ByLookup" : "ByIdempotencyKey");
                         });

}  // namespace
}  // namespace runloom::testing
