// Issue 3 at the engine level: approval gates, decisions bound to digests,
// revisions, cancel, admin reset, and failing closed on a changed version.
#include "runloom/gate.h"

#include "testing/engine_test_util.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <fstream>
#include <signal.h>
#include <sqlite3.h>
#include <thread>

namespace runloom {
namespace {

using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kGated[] = R"(
name: gated
steps:
  - id: draft
    kind: count
    phase: drafting
  - id: review
    kind: approval
    phase: review
    proposal: {text: "draft {{ steps.draft.output.n }}"}
    revision_phase: drafting
  - id: after
    kind: count
    phase: finish
    echo: "{{ steps.review.output.proposal.text }} by {{ steps.review.output.reviewer }}"
)";

struct Started {
  std::string id;
  RunRecord paused;
};

Started StartToPause(Harness& h, const std::string& yaml) {
  auto wf = LoadWorkflowYaml(yaml, "gated.yaml");
  EXPECT_OK(wf);
  auto started = h.engine->StartRun({.workflow = *wf});
  EXPECT_OK(started);
  auto r = h.engine->ExecuteRun(started->run.id);
  EXPECT_OK(r);
  EXPECT_EQ(r->status, RunStatus::kPaused);
  return {started->run.id, *r};
}

// Alive and not a zombie (an orphaned zombie waits for whoever reaps here).
bool Alive(pid_t pid) {
  if (kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_s, comm, state;
  stat >> pid_s >> comm >> state;
  return state != "Z";
}

std::string Digest(const RunRecord& r) {
  absl::StatusOr<PendingGate> gate = PendingGateOf(r);
  EXPECT_OK(gate);
  return gate.ok() ? gate->proposal_digest : "";
}

TEST(Decisions, GatePausesReleasesLeaseAndRecordsProposal) {
  Harness h;
  Started s = StartToPause(h, kGated);
  EXPECT_TRUE(s.paused.lease_token.empty());
  absl::StatusOr<PendingGate> gate = PendingGateOf(s.paused);
  ASSERT_OK(gate);
  EXPECT_EQ(gate->step_path, "review");
  EXPECT_EQ(gate->step_id, "review");
  EXPECT_EQ(gate->phase, "review");
  EXPECT_EQ(gate->proposal["text"], "draft 1");
  EXPECT_EQ(gate->proposal_digest.rfind("sha256:", 0), 0u);
  EXPECT_EQ(gate->allowed_decisions,
            std::vector<std::string>(std::begin(kDecisions), std::end(kDecisions)));
  EXPECT_EQ(gate->revision_phase, "drafting");
  EXPECT_EQ(gate->title, "review");
  EXPECT_EQ(h.kind->count.load(), 1);
  // Issue 8, finding 9: the paused run is in the gate's phase, not the
  // previous step's.
  auto run = h.engine->store()->GetRun(s.id);
  ASSERT_OK(run);
  EXPECT_EQ(run->phase, "review");
}

TEST(Decisions, WrongDigestIsRefusedAndNothingIsRecorded) {
  Harness h;
  Started s = StartToPause(h, kGated);
  DecisionRequest d{.proposal_digest = "sha256:0000", .decision = Decision::kApprove};
  auto refused = h.engine->Decide(s.id, d, "alice");
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kAborted,
                                HasSubstr(absl::StrCat("runloom status ", s.id))));
  // Issue 8, finding 9: the refusal does not hand out the current digest.
  EXPECT_EQ(refused.status().message().find(Digest(s.paused)), std::string::npos)
      << refused.status();
  auto run = h.engine->store()->GetRun(s.id);
  ASSERT_OK(run);
  EXPECT_EQ(run->status, RunStatus::kPaused);
  EXPECT_EQ(run->last_event_seq, s.paused.last_event_seq);
  EXPECT_FALSE(h.Steps(s.id).count("review"));
}

TEST(Decisions, ApproveResumesWithoutRedoingEarlierSteps) {
  Harness h;
  Started s = StartToPause(h, kGated);
  DecisionRequest d{.proposal_digest = Digest(s.paused), .decision = Decision::kApprove};
  auto decided = h.engine->Decide(s.id, d, "alice");
  ASSERT_OK(decided);
  EXPECT_EQ(decided->status, RunStatus::kQueued);
  auto done = h.engine->ExecuteRun(s.id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCompleted);
  EXPECT_EQ(h.kind->count.load(), 2);  // draft once, after once
  auto steps = h.Steps(s.id);
  EXPECT_EQ(steps["review"].output["reviewer"], "alice");
  EXPECT_EQ(steps["after"].output["echo"], "draft 1 by alice");
}

TEST(Decisions, EditBecomesTheGateOutput) {
  Harness h;
  Started s = StartToPause(h, kGated);
  DecisionRequest d{.proposal_digest = Digest(s.paused),
                    .decision = Decision::kEdit,
                    .edited_proposal = {{"text", "better draft"}}};
  ASSERT_OK(h.engine->Decide(s.id, d, "bob"));
  auto done = h.engine->ExecuteRun(s.id);
  ASSERT_OK(done);
  EXPECT_EQ(h.Steps(s.id)["after"].output["echo"], "better draft by bob");
}

// Issue 8, finding 9: an edit of another JSON type than the proposal (an
// array for an object) is refused; nothing is recorded.
TEST(Decisions, EditOfAnotherShapeIsRefused) {
  Harness h;
  Started s = StartToPause(h, kGated);
  DecisionRequest d{.proposal_digest = Digest(s.paused),
                    .decision = Decision::kEdit,
                    .edited_proposal = nlohmann::json::array({"better draft"})};
  EXPECT_THAT(h.engine->Decide(s.id, d, "bob"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the edited proposal is a JSON array but the proposal at review "
                                 "is a JSON object")));
  auto run = h.engine->store()->GetRun(s.id);
  ASSERT_OK(run);
  EXPECT_EQ(run->status, RunStatus::kPaused);
  EXPECT_EQ(run->last_event_seq, s.paused.last_event_seq);
}

TEST(Decisions, RejectEndsTheRunRejected) {
  Harness h;
  Started s = StartToPause(h, kGated);
  ASSERT_OK(h.engine->Decide(
      s.id, {.proposal_digest = Digest(s.paused), .decision = Decision::kReject}, "carol"));
  auto done = h.engine->ExecuteRun(s.id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kRejected);
  EXPECT_EQ(h.kind->count.load(), 1);  // `after` never ran
}

// Acceptance (issue 3, point 3): two racing decisions on the same pause:
// exactly one is recorded.
TEST(Decisions, RacingDecisionsExactlyOneWins) {
  for (int round = 0; round < 5; ++round) {
    Harness h;
    Started s = StartToPause(h, kGated);
    const std::string digest = Digest(s.paused);
    std::atomic<int> ok{0};
    std::vector<std::thread> threads;
    for (const char* who : {"alice", "bob", "carol", "dave"}) {
      threads.emplace_back([&, who] {
        auto r = h.engine->Decide(s.id, {.proposal_digest = digest, .decision = Decision::kApprove},
                                  who);
        if (r.ok()) ++ok;
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(ok.load(), 1);
    int decided_events = 0;
    for (const Event& e : h.Events(s.id)) decided_events += e.type == "run.decided";
    EXPECT_EQ(decided_events, 1);
  }
}

TEST(Decisions, DecisionOnARunThatIsNotPausedIsAConflict) {
  Harness h;
  Started s = StartToPause(h, kGated);
  const std::string digest = Digest(s.paused);
  ASSERT_OK(
      h.engine->Decide(s.id, {.proposal_digest = digest, .decision = Decision::kApprove}, "alice"));
  EXPECT_THAT(
      h.engine->Decide(s.id, {.proposal_digest = digest, .decision = Decision::kReject}, "bob"),
      StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(
      h.engine->Decide(s.id, {.proposal_digest = digest, .decision = Decision::kApprove}, ""),
      StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(Decisions, RequestRevisionStartsNewRevisionFromPhase) {
  Harness h;
  Started s = StartToPause(h, R"(
name: revise
steps:
  - id: intro
    kind: count
    phase: intro
  - id: body
    kind: count
    phase: body
    echo: "{{ run.feedback }}"
  - id: review
    kind: approval
    phase: review
    proposal: {n: "{{ steps.body.output.n }}"}
    revision_phase: body
)");
  ASSERT_OK(h.engine->Decide(s.id,
                             {.proposal_digest = Digest(s.paused),
                              .decision = Decision::kRequestRevision,
                              .feedback = "more detail"},
                             "erin"));
  auto run = h.engine->store()->GetRun(s.id);
  ASSERT_OK(run);
  EXPECT_EQ(run->revision, 2);
  EXPECT_EQ(run->entry, RunEntry::kRevision);
  EXPECT_EQ(run->context["rerun_from"], "body");
  auto paused_again = h.engine->ExecuteRun(s.id);
  ASSERT_OK(paused_again);
  EXPECT_EQ(paused_again->status, RunStatus::kPaused);
  EXPECT_EQ(h.kind->count.load(), 3);  // intro once, body twice
  auto r2 = h.engine->store()->ListSteps(s.id, 2);
  ASSERT_OK(r2);
  std::map<std::string, StepRecord> by_path;
  for (auto& r : *r2) by_path[r.path] = r;
  EXPECT_EQ(by_path["intro"].output["n"], 1);  // carried, not rerun
  EXPECT_EQ(by_path["body"].output["echo"], "more detail");
  auto r1 = h.engine->store()->ListSteps(s.id, 1);
  ASSERT_OK(r1);
  bool kept = false;
  for (auto& r : *r1)
    kept = kept || (r.path == "review" && r.output["decision"] == "request_revision");
  EXPECT_TRUE(kept) << "revision 1 keeps its records for history";
  // A revision from a phase after the gate is refused.
  EXPECT_THAT(h.engine->Decide(s.id,
                               {.proposal_digest = Digest(*paused_again),
                                .decision = Decision::kRequestRevision,
                                .from_phase = "nope"},
                               "erin"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(Decisions, RerunFinishedRunFromPhase) {
  Harness h;
  RunRecord r = h.RunYaml(R"(
name: rerun
steps:
  - {id: a, kind: count, phase: one}
  - {id: b, kind: count, phase: two}
)");
  ASSERT_EQ(r.status, RunStatus::kCompleted);
  auto q = h.engine->Rerun(r.id, "two", "again", "ops");
  ASSERT_OK(q);
  EXPECT_EQ(q->status, RunStatus::kQueued);
  EXPECT_EQ(q->entry, RunEntry::kRerun);
  auto done = h.engine->ExecuteRun(r.id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCompleted);
  EXPECT_EQ(done->revision, 2);
  EXPECT_EQ(h.kind->count.load(), 3);
  EXPECT_THAT(h.engine->Rerun(r.id, "zzz", "", "ops"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// A cancel requested while a run was running, which it finished before
// seeing, does not cancel the run's next revision (the model check found
// the rerun kept the flag).
TEST(Decisions, RerunDropsTheCancelRequestOfTheFinishedExecution) {
  Harness h;
  RunRecord r = h.RunYaml(R"(
name: rerun
steps:
  - {id: a, kind: count, phase: one}
)");
  ASSERT_EQ(r.status, RunStatus::kCompleted);
  // The race as the store saw it: the request landed after the last check.
  RunWrite request;
  request.run_id = r.id;
  request.party = Party::kCancel;
  request.expected = {RunStatus::kCompleted};
  request.cancel_requested = true;
  ASSERT_OK(h.engine->store()->Commit(request));
  auto q = h.engine->Rerun(r.id, "one", "", "ops");
  ASSERT_OK(q);
  EXPECT_FALSE(q->cancel_requested);
  auto done = h.engine->ExecuteRun(r.id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCompleted);
  EXPECT_EQ(done->revision, 2);
}

TEST(Decisions, CancelQueuedAndPausedAtOnce) {
  Harness h;
  Started s = StartToPause(h, kGated);
  auto c = h.engine->Cancel(s.id, "ops");
  ASSERT_OK(c);
  EXPECT_EQ(c->status, RunStatus::kCancelled);
  EXPECT_THAT(h.engine->Cancel(s.id, "ops"), StatusIs(absl::StatusCode::kFailedPrecondition));
  auto wf = LoadWorkflowYaml(kGated, "gated.yaml");
  auto queued = h.engine->StartRun({.workflow = *wf});
  ASSERT_OK(queued);
  auto c2 = h.engine->Cancel(queued->run.id, "ops");
  ASSERT_OK(c2);
  EXPECT_EQ(c2->status, RunStatus::kCancelled);
}

// Acceptance (issue 3, point 4, engine level): cancel while a step sleeps:
// the executor stops within one heartbeat, no later step starts, the status
// is cancelled. (tests/integration covers the exec process group.)
TEST(Decisions, CancelRunningStopsAtNextSafePoint) {
  EngineOptions opts;
  opts.lease_ttl = absl::Milliseconds(600);  // heartbeat 200 ms
  Harness h(opts);
  auto wf = LoadWorkflowYaml(R"(
name: cancel
steps:
  - {id: nap, kind: sleep, duration: 60s}
  - {id: after, kind: count}
)",
                             "cancel.yaml");
  ASSERT_OK(wf);
  auto started = h.engine->StartRun({.workflow = *wf});
  ASSERT_OK(started);
  const std::string id = started->run.id;
  absl::StatusOr<RunRecord> result;
  std::thread exec([&] { result = h.engine->ExecuteRun(id); });
  AwaitLastEvent(h.engine->store(), id, "step.started");
  auto c = h.engine->Cancel(id, "ops");
  ASSERT_OK(c);
  EXPECT_EQ(c->status, RunStatus::kRunning);
  EXPECT_TRUE(c->cancel_requested);
  exec.join();
  ASSERT_OK(result);
  EXPECT_EQ(result->status, RunStatus::kCancelled);
  EXPECT_EQ(h.kind->count.load(), 0);
  int starts = 0;
  for (const Event& e : h.Events(id)) starts += e.type == "step.started";
  EXPECT_EQ(starts, 1);
}

// Acceptance (issue 3, point 4): cancel while an exec step sleeps: the
// process group is gone within one heartbeat, no later step starts, the
// status is cancelled.
TEST(Decisions, CancelKillsExecProcessGroupWithinOneHeartbeat) {
  EngineOptions opts;
  opts.lease_ttl = absl::Milliseconds(900);  // heartbeat 300 ms
  Harness h(opts);
  const std::string pidfile = std::filesystem::path(h.path).parent_path() / "grandchild.pid";
  auto wf = LoadWorkflowYaml(R"(
name: cancel_exec
steps:
  - id: nap
    kind: exec
    command: "sleep 60 & echo $! > )" +
                                 pidfile + R"(; wait"
  - {id: after, kind: count}
)",
                             "cancel_exec.yaml");
  ASSERT_OK(wf);
  auto started = h.engine->StartRun({.workflow = *wf});
  ASSERT_OK(started);
  const std::string id = started->run.id;
  absl::StatusOr<RunRecord> result;
  std::thread exec([&] { result = h.engine->ExecuteRun(id); });
  pid_t grandchild = 0;
  for (int i = 0; i < 1000 && grandchild == 0; ++i) {
    std::ifstream in(pidfile);
    in >> grandchild;
    if (grandchild == 0) RealClock()->SleepFor(absl::Milliseconds(5));
  }
  ASSERT_GT(grandchild, 0);
  ASSERT_TRUE(Alive(grandchild));
  const absl::Time acked = RealClock()->Now();
  ASSERT_OK(h.engine->Cancel(id, "ops"));
  bool gone = false;
  while (RealClock()->Now() - acked < absl::Milliseconds(300 + 200)) {
    if (!Alive(grandchild)) {
      gone = true;
      break;
    }
    RealClock()->SleepFor(absl::Milliseconds(5));
  }
  EXPECT_TRUE(gone) << "the sleep's process group outlived one heartbeat";
  exec.join();
  ASSERT_OK(result);
  EXPECT_EQ(result->status, RunStatus::kCancelled);
  EXPECT_EQ(h.kind->count.load(), 0);
  bool cancel_seen = false;
  for (const Event& e : h.Events(id)) {
    if (e.type == "run.cancel_requested") cancel_seen = true;
    EXPECT_FALSE(cancel_seen && e.type == "step.started") << "a step started after the cancel";
  }
}

TEST(Decisions, AdminResetCancelsEveryUnfinishedRun) {
  Harness h;
  Started paused = StartToPause(h, kGated);
  auto wf = LoadWorkflowYaml(kGated, "gated.yaml");
  auto queued = h.engine->StartRun({.workflow = *wf});
  ASSERT_OK(queued);
  RunRecord done = h.RunYaml("name: done\nsteps:\n  - {id: a, kind: noop}\n");
  auto n = h.engine->ResetAll("admin");
  ASSERT_OK(n);
  EXPECT_EQ(*n, 2);
  EXPECT_EQ(h.engine->store()->GetRun(paused.id)->status, RunStatus::kCancelled);
  EXPECT_EQ(h.engine->store()->GetRun(queued->run.id)->status, RunStatus::kCancelled);
  EXPECT_EQ(h.engine->store()->GetRun(done.id)->status, RunStatus::kCompleted);
}

// Reference 003's admin reset of a running run: the run is cancelled at
// once, the execution holding it stops (the cancel watch sees the run ended
// under it), and no later step starts.
TEST(Decisions, AdminResetOfARunningRunStopsItsExecution) {
  EngineOptions opts;
  opts.cancel_check = absl::Milliseconds(20);
  // No renewal within the test's time: only the cancel watch can stop the
  // step (reference 003; before, the step lived until the next renewal).
  opts.lease_ttl = absl::Hours(3);
  opts.heartbeat = absl::Hours(1);
  Harness h(opts);
  auto wf = LoadWorkflowYaml(R"(
name: long
steps:
  - {id: work, kind: count, block: true}
  - {id: after, kind: count}
)",
                             "long.yaml");
  ASSERT_OK(wf);
  auto started = h.engine->StartRun({.workflow = *wf});
  ASSERT_OK(started);
  const std::string id = started->run.id;
  absl::StatusOr<RunRecord> result;
  std::thread exec([&] { result = h.engine->ExecuteRun(id); });
  h.kind->entered.WaitForNotification();
  auto n = h.engine->ResetAll("admin");
  ASSERT_OK(n);
  EXPECT_EQ(*n, 1);
  exec.join();  // the blocked step saw Stopping(): the reset stopped it
  ASSERT_OK(result);
  EXPECT_EQ(result->status, RunStatus::kCancelled);
  EXPECT_EQ(result->error, "admin reset by admin");
  EXPECT_EQ(h.kind->count.load(), 1);  // `after` never ran
  bool finished = false;
  for (const Event& e : h.Events(id)) {
    if (e.type == "run.finished") finished = true;
    EXPECT_FALSE(finished && e.type == "step.started") << "a step started after the reset";
  }
  EXPECT_TRUE(finished);
}

// Acceptance (issue 3, point 5): the graph of a pinned version changes while
// a run is paused: the run fails closed and no step runs.
TEST(Decisions, ChangedGraphUnderPinnedVersionFailsClosed) {
  Harness h;
  Started s = StartToPause(h, kGated);
  // Someone rewrites version 1 in place: `after` now runs twice as `after2`.
  auto v = h.engine->store()->GetWorkflow("gated", 1);
  ASSERT_OK(v);
  nlohmann::json changed = v->canonical;
  nlohmann::json extra = changed["steps"].back();
  extra["id"] = "after2";
  changed["steps"].push_back(extra);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(h.path.c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(
                db, "UPDATE workflows SET canonical = ? WHERE name = 'gated' AND version = 1", -1,
                &st, nullptr),
            SQLITE_OK);
  std::string text = changed.dump();
  sqlite3_bind_text(st, 1, text.c_str(), -1, SQLITE_TRANSIENT);
  ASSERT_EQ(sqlite3_step(st), SQLITE_DONE);
  sqlite3_finalize(st);
  sqlite3_close(db);

  ASSERT_OK(h.engine->Decide(
      s.id, {.proposal_digest = Digest(s.paused), .decision = Decision::kApprove}, "alice"));
  auto done = h.engine->ExecuteRun(s.id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kFailed);
  EXPECT_NE(done->error.find("fails closed"), std::string::npos) << done->error;
  EXPECT_EQ(h.kind->count.load(), 1);  // only the draft from before the pause
  int starts_after_decision = 0;
  bool decided = false;
  for (const Event& e : h.Events(s.id)) {
    if (e.type == "run.decided") decided = true;
    if (decided && e.type == "step.started") ++starts_after_decision;
  }
  EXPECT_EQ(starts_after_decision, 0);
}

TEST(Decisions, ApprovalInsideParallelIsRefusedAtLoad) {
  auto wf = LoadWorkflowYaml(R"(
name: bad
steps:
  - id: par
    kind: parallel
    branches:
      - steps:
          - {id: gate, kind: approval, proposal: {}}
)",
                             "bad.yaml");
  ASSERT_OK(wf);
  auto registry = StepRegistry::WithBuiltins();
  EXPECT_THAT(ValidateStepKinds(*wf, *registry), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace runloom
