// Issue 3 end to end through the `runloom` binary: the blog pipeline with
// its outline and final reviews (including a revision), and the triage
// example's three outcomes.
#include "runloom/clock.h"

#include "actions_server/actions_server.h"
#include "cli_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <map>
#include <string>
#include <vector>

namespace runloom::testing {
namespace {

using ::testing::HasSubstr;

// Waits until the run has the given status (a background worker moves it).
nlohmann::json AwaitStatus(const std::string& db, const std::string& id, const std::string& want) {
  nlohmann::json st;
  for (int i = 0; i < 600; ++i) {
    st = StatusJson(db, id);
    if (st["status"] == want) return st;
    RealClock()->SleepFor(absl::Milliseconds(50));
  }
  ADD_FAILURE() << "run never became " << want << ": " << st.dump(2);
  return st;
}

std::string PendingDigest(const nlohmann::json& st) {
  return st["pending_gate"]["proposal_digest"].get<std::string>();
}

std::map<std::string, int> StepStarts(const std::vector<nlohmann::json>& events, int revision) {
  std::map<std::string, int> starts;
  int current = 1;
  for (const auto& e : events) {
    if (e["type"] == "run.started") current = e["data"]["revision"].get<int>();
    if (e["type"] == "step.started" && (revision == 0 || current == revision)) {
      ++starts[e["data"]["path"].get<std::string>()];
    }
  }
  return starts;
}

class Blog : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("blog");
    db_ = dir_ + "/blog.db";
  }
  std::string dir_, db_;
};

// Acceptance (issue 3, points 1 and 2).
TEST_F(Blog, OutlinePauseSurvivesRestartWrongDigestRefusedRevisionReruns) {
  Result run = RunCli({"run", SourceDir() + "/examples/blog.yaml", "--db", db_});
  ASSERT_EQ(run.code, 3) << run.out;  // paused: its own exit code
  const std::string id = RunIdFrom(run.out);
  EXPECT_NE(run.out.find("runloom decide " + id), std::string::npos) << run.out;
  nlohmann::json st = StatusJson(db_, id);
  ASSERT_EQ(st["status"], "paused");
  EXPECT_EQ(st["pending_gate"]["path"], "outline_review");

  // A worker that dies while the run waits: the pause lives in the database,
  // not in any process.
  Child doomed({"worker", "--db", db_, "--lease-ttl", "2s"}, dir_ + "/doomed.log");
  RealClock()->SleepFor(absl::Milliseconds(300));
  doomed.Kill(SIGKILL);
  EXPECT_EQ(doomed.Wait(), 128 + SIGKILL);
  EXPECT_EQ(StatusJson(db_, id)["status"], "paused");

  // A long-running worker, as after a restart; stopped at the end.
  Child worker({"worker", "--db", db_, "--lease-ttl", "2s"}, dir_ + "/worker.log");

  Result wrong = RunCli({"decide", id, "--db", db_, "--digest", "sha256:deadbeef", "--approve"});
  EXPECT_EQ(wrong.code, 4) << wrong.out;
  nlohmann::json still = StatusJson(db_, id);
  EXPECT_EQ(still["status"], "paused");
  EXPECT_EQ(still["last_event_seq"], st["last_event_seq"]) << "nothing recorded";

  Result right = RunCli(
      {"decide", id, "--db", db_, "--digest", PendingDigest(st), "--approve", "--as", "olga"});
  EXPECT_EQ(right.code, 0) << right.out;

  // The worker runs research and the writer/editor loop, then pauses again.
  st = AwaitStatus(db_, id, "paused");
  EXPECT_EQ(st["pending_gate"]["path"], "final_review");

  // Request a revision at the final review: reruns from research.
  Result revise = RunCli({"decide", id, "--db", db_, "--digest", PendingDigest(st), "--revise",
                          "add a section on idempotent writes"});
  EXPECT_EQ(revise.code, 0) << revise.out;
  st = AwaitStatus(db_, id, "paused");
  EXPECT_EQ(st["revision"], 2);
  EXPECT_EQ(st["entry"], "revision");
  EXPECT_EQ(st["rerun_from"], "research");
  EXPECT_EQ(st["pending_gate"]["path"], "final_review");

  Result approve = RunCli({"decide", id, "--db", db_, "--digest", PendingDigest(st), "--approve"});
  EXPECT_EQ(approve.code, 0) << approve.out;
  st = AwaitStatus(db_, id, "completed");
  worker.Kill(SIGTERM);
  EXPECT_EQ(worker.Wait(), 0);

  auto events = EventsJson(db_, id);
  auto all = StepStarts(events, 0);
  EXPECT_EQ(all["intent"], 1) << "no step before the gate ran twice";
  EXPECT_EQ(all["outline"], 1);
  auto rev2 = StepStarts(events, 2);
  EXPECT_EQ(rev2.count("intent"), 0u);
  EXPECT_EQ(rev2.count("outline"), 0u);
  EXPECT_EQ(rev2["research"], 1);
  EXPECT_GE(rev2["refine[1]/write"], 1);
  bool revision_entry = false;
  for (const auto& e : events) {
    revision_entry =
        revision_entry || (e["type"] == "run.started" && e["data"]["entry"] == "revision");
  }
  EXPECT_TRUE(revision_entry);
  std::map<std::string, std::string> final_steps;
  for (const auto& s : st["steps"]) {
    if (s["revision"] == 2) final_steps[s["path"]] = s["state"];
  }
  EXPECT_EQ(final_steps["publish"], "succeeded");
  EXPECT_EQ(final_steps["intent"], "succeeded");  // carried into revision 2, not rerun
}

TEST_F(Blog, AutoApproveRunsEndToEnd) {
  Result run = RunCli({"run", SourceDir() + "/examples/blog.yaml", "--db", db_, "--auto-approve"});
  EXPECT_EQ(run.code, 0) << run.out;
  EXPECT_EQ(StatusJson(db_, RunIdFrom(run.out))["status"], "completed");
}

TEST_F(Blog, RejectAtOutlineEndsRejected) {
  Result run = RunCli({"run", SourceDir() + "/examples/blog.yaml", "--db", db_});
  ASSERT_EQ(run.code, 3) << run.out;
  const std::string id = RunIdFrom(run.out);
  Result rej = RunCli(
      {"decide", id, "--db", db_, "--digest", PendingDigest(StatusJson(db_, id)), "--reject"});
  EXPECT_EQ(rej.code, 0) << rej.out;
  Result w = RunCli({"worker", "--db", db_, "--until-idle"});
  EXPECT_EQ(w.code, 0) << w.out;
  EXPECT_EQ(StatusJson(db_, id)["status"], "rejected");
}

// Acceptance (issue 3, point 6): triage to each of its three outcomes.
// The apply step writes to the example actions server, run here in-process.
class Triage : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("triage");
    db_ = dir_ + "/triage.db";
    absl::StatusOr<std::unique_ptr<examples::ActionsServer>> s = examples::ActionsServer::Start({});
    ASSERT_TRUE(s.ok()) << s.status();
    actions_ = std::move(*s);
  }
  nlohmann::json RunTo(const std::string& scenario, const std::string& decision) {
    Result run = RunCli({"run", SourceDir() + "/examples/triage.yaml", "--db", db_, "--input",
                         "scenario=" + scenario, "--input", "actions_url=" + actions_->url()});
    EXPECT_EQ(run.code, 3) << run.out;
    const std::string id = RunIdFrom(run.out);
    nlohmann::json st = StatusJson(db_, id);
    Result d = RunCli({"decide", id, "--db", db_, "--digest", PendingDigest(st), decision});
    EXPECT_EQ(d.code, 0) << d.out;
    Result w = RunCli({"worker", "--db", db_, "--until-idle"});
    EXPECT_EQ(w.code, 0) << w.out;
    return StatusJson(db_, id);
  }
  std::string dir_, db_;
  std::unique_ptr<examples::ActionsServer> actions_;
};

// Issue 24.5: triage is an agent. Its specialists are tools the agent
// calls side by side; the slow one's timeout fails it, the agent answers
// from the other two; the remediation is an agent's write tool.
TEST_F(Triage, ApprovedFixCompletesAndSlowSpecialistFailsAtItsTimeout) {
  nlohmann::json st = RunTo("fixable", "--approve");
  EXPECT_EQ(st["status"], "completed");
  EXPECT_EQ(st["outcome"], "approved");
  std::map<std::string, nlohmann::json> steps;
  for (const auto& s : st["steps"]) steps[s["path"]] = s;
  EXPECT_EQ(steps["investigate/turn[1]/tool[traces#2]"]["state"], "failed");
  EXPECT_EQ(steps["investigate/turn[1]/tool[traces#2]"]["error_class"], "timeout");
  EXPECT_EQ(steps["investigate/turn[1]/tool[logs#0]"]["state"], "succeeded");
  EXPECT_EQ(steps["investigate/turn[1]/tool[metrics#1]"]["state"], "succeeded");
  EXPECT_EQ(steps["investigate"]["state"], "succeeded");
  EXPECT_EQ(steps["investigate"]["output"]["turns"], 2);
  EXPECT_EQ(steps["investigate"]["output"]["tool_calls"], 3);
  const std::string apply = "remediate/turn[1]/tool[apply#0]";
  EXPECT_EQ(steps[apply]["state"], "succeeded");
  EXPECT_EQ(steps["remediate"]["state"], "succeeded");
  // The remediation was applied once, under the key the ledger derived.
  std::vector<nlohmann::json> applied = actions_->Applied();
  ASSERT_EQ(applied.size(), 1u);
  EXPECT_EQ(applied[0], steps[apply]["output"]["body"]);
  EXPECT_EQ(applied[0]["request"]["action"], "roll back checkout-service to the previous release");
  EXPECT_EQ(steps[apply]["output"]["write"]["source"], "sent");
  EXPECT_EQ(steps[apply]["output"]["write"]["idempotency_key"], applied[0]["idempotency_key"]);
}

// Issue 22.1 (reference 003: writes "keyed by run, proposal and action"):
// a rerun whose gate another reviewer approves writes again (the body names
// the reviewer, so under a key without the decision the store refused it
// and the step failed); a rerun after the gate carries the same decision
// out again and writes nothing. `runloom writes` shows both decisions.
TEST_F(Triage, ANewDecisionWritesAgainAndTheSameDecisionNever) {
  Result run = RunCli({"run", SourceDir() + "/examples/triage.yaml", "--db", db_, "--input",
                       "scenario=fixable", "--input", "actions_url=" + actions_->url()});
  ASSERT_EQ(run.code, 3) << run.out;
  const std::string id = RunIdFrom(run.out);
  auto decide_as = [&](const std::string& reviewer) {
    Result d = RunCli({"decide", id, "--db", db_, "--digest", PendingDigest(StatusJson(db_, id)),
                       "--approve", "--as", reviewer});
    EXPECT_EQ(d.code, 0) << d.out;
    Result w = RunCli({"worker", "--db", db_, "--until-idle"});
    EXPECT_EQ(w.code, 0) << w.out;
  };
  decide_as("alice");
  ASSERT_EQ(StatusJson(db_, id)["status"], "completed");
  // Rerun from the gate's phase: a new decision, by bob.
  Result rerun = RunCli({"rerun", id, "--db", db_, "--from", "approve"});
  ASSERT_EQ(rerun.code, 0) << rerun.out;
  Result to_gate = RunCli({"worker", "--db", db_, "--until-idle"});
  ASSERT_EQ(to_gate.code, 0) << to_gate.out;
  ASSERT_EQ(StatusJson(db_, id)["status"], "paused");
  decide_as("bob");
  nlohmann::json st = StatusJson(db_, id);
  EXPECT_EQ(st["status"], "completed") << st.dump(2);
  std::vector<nlohmann::json> applied = actions_->Applied();
  ASSERT_EQ(applied.size(), 2u);
  EXPECT_EQ(applied[0]["request"]["approved_by"], "alice");
  EXPECT_EQ(applied[1]["request"]["approved_by"], "bob");
  EXPECT_NE(applied[0]["idempotency_key"], applied[1]["idempotency_key"]);
  // Rerun from after the gate: the same decision (bob's, carried), no write.
  rerun = RunCli({"rerun", id, "--db", db_, "--from", "apply"});
  ASSERT_EQ(rerun.code, 0) << rerun.out;
  Result w = RunCli({"worker", "--db", db_, "--until-idle"});
  ASSERT_EQ(w.code, 0) << w.out;
  EXPECT_EQ(StatusJson(db_, id)["status"], "completed");
  EXPECT_EQ(actions_->Applied().size(), 2u);
  // The evidence: one write per decision.
  Result writes = RunCli({"writes", id, "--db", db_, "--json"});
  ASSERT_EQ(writes.code, 0) << writes.out;
  nlohmann::json j = nlohmann::json::parse(writes.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << writes.out;
  ASSERT_EQ(j["writes"].size(), 2u) << writes.out;
  EXPECT_EQ(j["writes"][0]["path"], "remediate/turn[1]/tool[apply#0]");
  EXPECT_EQ(j["writes"][0]["action"], "remediate");
  EXPECT_THAT(j["writes"][0]["decision"].get<std::string>(), HasSubstr("approve_fix@1:sha256:"));
  EXPECT_THAT(j["writes"][1]["decision"].get<std::string>(), HasSubstr("approve_fix@2:sha256:"));
  EXPECT_EQ(j["writes"][1]["state"], "done");
  EXPECT_EQ(j["writes"][1]["http_status"], 201);
  EXPECT_EQ(j["writes"][1]["idempotency_key"], applied[1]["idempotency_key"]);
  Result text = RunCli({"writes", id, "--db", db_});
  EXPECT_EQ(text.code, 0) << text.out;
  EXPECT_THAT(text.out, HasSubstr("approve_fix@2:sha256:"));
  Result unknown = RunCli({"writes", "r_nosuchrun", "--db", db_});
  EXPECT_NE(unknown.code, 0) << unknown.out;
}

TEST_F(Triage, RejectedProposalEndsRejected) {
  nlohmann::json st = RunTo("fixable", "--reject");
  EXPECT_EQ(st["status"], "rejected");
  for (const auto& s : st["steps"]) {
    EXPECT_EQ(s["path"].get<std::string>().find("remediate/"), std::string::npos) << s.dump();
  }
  EXPECT_TRUE(actions_->Applied().empty());
}

TEST_F(Triage, NoRemediationEndsUnresolved) {
  nlohmann::json st = RunTo("unfixable", "--approve");
  EXPECT_EQ(st["status"], "unresolved");
  EXPECT_EQ(st["outcome"], "unresolved");
}

}  // namespace
}  // namespace runloom::testing
