// End-to-end tests of the `runloom` binary: crash recovery, the ingest
// example, and bad input handling.
#include "runloom/clock.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <algorithm>
#include <map>
#include <set>
#include <sqlite3.h>
#include <thread>

namespace runloom::testing {
namespace {

// Acceptance (issue 2, point 2): SIGKILL a `runloom run` in the middle of a
// 6-step workflow whose exec steps append to a counter file; `runloom
// worker` on the same database completes the run, every step executed
// exactly once except at most the one in flight at the kill.
TEST(Cli, KilledRunIsFinishedByWorkerWithoutRedoingSteps) {
  const std::string dir = MakeTempDir("crash");
  const std::string db = dir + "/crash.db";
  const std::string counter = dir + "/counter.txt";
  std::string yaml = "name: six\nsteps:\n";
  for (int i = 1; i <= 6; ++i) {
    yaml += "  - id: s" + std::to_string(i) + "\n    kind: exec\n    command: \"echo s" +
            std::to_string(i) + " >> " + counter + "; sleep 0.4; echo '{}'\"\n";
  }
  WriteFile(dir + "/six.yaml", yaml);
  Child run({"run", dir + "/six.yaml", "--db", db, "--lease-ttl", "1s"}, dir + "/run.log");
  // Wait until step 3 has started, then kill -9 mid-step.
  for (int i = 0; i < 1000; ++i) {
    if (ReadFile(counter).find("s3") != std::string::npos) break;
    RealClock()->SleepFor(absl::Milliseconds(10));
  }
  RealClock()->SleepFor(absl::Milliseconds(100));
  run.Kill(SIGKILL);
  EXPECT_EQ(run.Wait(), 128 + SIGKILL);
  const std::string run_id = RunIdFrom(ReadFile(dir + "/run.log"));
  ASSERT_FALSE(run_id.empty()) << ReadFile(dir + "/run.log");
  EXPECT_EQ(StatusJson(db, run_id)["status"], "running");

  Result worker = RunCli({"worker", "--db", db, "--until-idle", "--lease-ttl", "1s"});
  EXPECT_EQ(worker.code, 0) << worker.out;
  nlohmann::json st = StatusJson(db, run_id);
  EXPECT_EQ(st["status"], "completed") << st.dump(2);
  EXPECT_EQ(st["attempts"], 2);

  std::map<std::string, int> counts;
  std::stringstream ss(ReadFile(counter));
  std::string line;
  while (std::getline(ss, line)) ++counts[line];
  int twice = 0;
  for (int i = 1; i <= 6; ++i) {
    std::string key = "s";
    key += std::to_string(i);  // (not "s" + ...: GCC 12 -O2 warns falsely, -Wrestrict)
    int c = counts[key];
    EXPECT_GE(c, 1) << "s" << i;
    EXPECT_LE(c, 2) << "s" << i;
    if (c == 2) {
      ++twice;
      EXPECT_EQ(i, 3) << "only the step in flight at the kill may run twice";
    }
  }
  EXPECT_LE(twice, 1);
  bool expired = false;
  for (const auto& e : EventsJson(db, run_id))
    expired = expired || e["type"] == "run.lease_expired";
  EXPECT_TRUE(expired) << "the event log records the interruption";
}

// Issue 27, restart recovery: a `runloom run` SIGKILLed mid-step holds its
// run under a lease of an hour; a worker started on the same host proves
// the holder dead (its pid is gone) and takes the run back at once, without
// waiting out the lease. A holder that is alive keeps its run: a second
// worker started beside it leaves it alone.
TEST(Cli, AKilledHoldersRunIsTakenBackAtOnceAndALiveHoldersIsLeftAlone) {
  const std::string dir = MakeTempDir("restart");
  const std::string db = dir + "/restart.db";
  const std::string counter = dir + "/counter.txt";
  std::string yaml = "name: three\nsteps:\n";
  for (int i = 1; i <= 3; ++i) {
    yaml += "  - id: s" + std::to_string(i) + "\n    kind: exec\n    command: \"echo s" +
            std::to_string(i) + " >> " + counter + "; sleep 0.4; echo '{}'\"\n";
  }
  WriteFile(dir + "/three.yaml", yaml);
  Child run({"run", dir + "/three.yaml", "--db", db, "--lease-ttl", "1h"}, dir + "/run.log");
  for (int i = 0; i < 1000; ++i) {
    if (ReadFile(counter).find("s2") != std::string::npos) break;
    RealClock()->SleepFor(absl::Milliseconds(10));
  }
  run.Kill(SIGKILL);
  EXPECT_EQ(run.Wait(), 128 + SIGKILL);
  const std::string run_id = RunIdFrom(ReadFile(dir + "/run.log"));
  ASSERT_FALSE(run_id.empty()) << ReadFile(dir + "/run.log");
  EXPECT_EQ(StatusJson(db, run_id)["status"], "running");

  Result worker = RunCli({"worker", "--db", db, "--until-idle", "--lease-ttl", "1h"});
  EXPECT_EQ(worker.code, 0) << worker.out;
  EXPECT_THAT(worker.out, ::testing::HasSubstr("is gone; its lease ends now"));
  nlohmann::json st = StatusJson(db, run_id);
  EXPECT_EQ(st["status"], "completed") << st.dump(2);
  EXPECT_EQ(st["attempts"], 2);
  const std::string ran = ReadFile(counter);
  EXPECT_EQ(std::count(ran.begin(), ran.end(), '\n'), 4) << ran << " (s2 twice, the others once)";

  // A live holder: a run in a 3 s step, and a worker beside it.
  WriteFile(dir + "/slow.yaml",
            "name: slow\nsteps:\n  - {id: wait, kind: exec, command: \"sleep 3; echo '{}'\"}\n");
  Child live({"run", dir + "/slow.yaml", "--db", db, "--lease-ttl", "1h"}, dir + "/live.log");
  std::string live_id;
  for (int i = 0; i < 500 && live_id.empty(); ++i) {
    live_id = RunIdFrom(ReadFile(dir + "/live.log"));
    RealClock()->SleepFor(absl::Milliseconds(10));
  }
  ASSERT_FALSE(live_id.empty()) << ReadFile(dir + "/live.log");
  Result beside = RunCli({"worker", "--db", db, "--until-idle"});
  EXPECT_EQ(beside.code, 0) << beside.out;
  EXPECT_THAT(beside.out, ::testing::Not(::testing::HasSubstr("its lease ends now")));
  EXPECT_EQ(live.Wait(), 0) << ReadFile(dir + "/live.log");
  nlohmann::json done = StatusJson(db, live_id);
  EXPECT_EQ(done["status"], "completed") << done.dump(2);
  EXPECT_EQ(done["attempts"], 1) << "the live holder kept its lease";
}

// The one integer `sql` yields on the SQLite file `path`, or -1.
int64_t SqliteInt(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  int64_t out = -1;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
      out = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return out;
}

// Issue 27, restart recovery with runs held on fibers: a worker with 2
// executors holds 40 runs at once, each sleeping in its second step (a
// sleep gives its executor back); SIGKILLed there, a worker started on the
// same host takes all 40 back at once (their holder is provably dead; the
// leases would last an hour), reruns the step each was in and not the one
// each had finished.
TEST(Cli, AKilledWorkerHoldingManyRunsOnFibersHasThemAllTakenBackAtOnce) {
  constexpr int kRuns = 40;
  const std::string dir = MakeTempDir("fibers_kill");
  const std::string db = dir + "/fibers.db";
  WriteFile(dir + "/nap.yaml",
            "name: nap\nsteps:\n"
            "  - {id: first, kind: noop}\n"
            "  - {id: nap, kind: sleep, duration: 3s}\n"
            "  - {id: last, kind: noop}\n");
  std::set<std::string> ids;
  for (int i = 0; i < kRuns; ++i) {
    Result made = RunCli({"run", dir + "/nap.yaml", "--db", db, "--detach"});
    ASSERT_EQ(made.code, 0) << made.out;
    ids.insert(RunIdFrom(made.out));
  }
  ASSERT_EQ(ids.size(), static_cast<size_t>(kRuns));
  const std::string held_in_nap =
      "SELECT count(*) FROM run_events WHERE type = 'step.started' AND "
      "json_extract(data, '$.step_id') = 'nap'";
  const std::vector<std::string> worker_args = {"worker",      "--db",     db, "--executors", "2",
                                                "--runs-in-flight", "40", "--lease-ttl", "1h"};
  Child worker(worker_args, dir + "/worker.log");
  for (int i = 0; i < 1000 && SqliteInt(db, held_in_nap) < kRuns; ++i) {
    RealClock()->SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(SqliteInt(db, held_in_nap), kRuns) << ReadFile(dir + "/worker.log");
  // All 40 held at once by one process with 2 executor threads.
  EXPECT_EQ(SqliteInt(db, "SELECT count(DISTINCT lease_owner) FROM runs WHERE status = 'running'"),
            1);
  EXPECT_EQ(SqliteInt(db, "SELECT count(*) FROM runs WHERE status = 'running'"), kRuns);
  worker.Kill(SIGKILL);
  EXPECT_EQ(worker.Wait(), 128 + SIGKILL);

  std::vector<std::string> again = worker_args;
  again.push_back("--until-idle");
  const absl::Time restarted = RealClock()->Now();
  Result after = RunCli(again);
  const absl::Duration took = RealClock()->Now() - restarted;
  EXPECT_EQ(after.code, 0) << after.out;
  EXPECT_THAT(after.out, ::testing::HasSubstr("is gone; its lease ends now"));
  EXPECT_EQ(SqliteInt(db, "SELECT count(*) FROM runs WHERE status = 'completed' AND attempts = 2"),
            kRuns)
      << after.out;
  // The sleep each was in ran again (3 s, all at once), not an hour's lease.
  EXPECT_LT(took, absl::Seconds(30));
  EXPECT_EQ(SqliteInt(db,
                      "SELECT count(*) FROM run_events WHERE type = 'step.started' AND "
                      "json_extract(data, '$.step_id') = 'first'"),
            kRuns)
      << "a step finished before the kill is not run again";
  EXPECT_EQ(SqliteInt(db, held_in_nap), 2 * kRuns);
}

// The id of the run `runloom run` logs to `log`, once the run is waiting
// (polled for about 5 s each); "" when no id came.
std::string AwaitParked(const std::string& log, const std::string& db) {
  std::string run_id;
  for (int i = 0; i < 500 && run_id.empty(); ++i) {
    run_id = RunIdFrom(ReadFile(log));
    RealClock()->SleepFor(absl::Milliseconds(10));
  }
  for (int i = 0; i < 500 && !run_id.empty(); ++i) {
    if (StatusJson(db, run_id)["status"] == "waiting") break;
    RealClock()->SleepFor(absl::Milliseconds(10));
  }
  return run_id;
}

// Issue 23, acceptance 2: a run sleeping 3 s parks (status waiting, no
// executor held); every runloom process is killed with SIGKILL while it
// waits; a worker started afterwards wakes and completes it once its time
// has come, without running the step before the sleep again.
TEST(Cli, ARunSleepingAcrossAKillOfEveryProcessCompletesOnTime) {
  const std::string dir = MakeTempDir("timer");
  const std::string db = dir + "/timer.db";
  const std::string counter = dir + "/counter.txt";
  WriteFile(dir + "/nap.yaml",
            "name: nap\nsteps:\n"
            "  - id: before\n    kind: exec\n    command: \"echo before >> " +
                counter +
                "; echo '{}'\"\n"
                "  - {id: nap, kind: sleep, duration: 3s}\n"
                "  - {id: after, kind: noop}\n");
  const absl::Time started = RealClock()->Now();
  Child run({"run", dir + "/nap.yaml", "--db", db, "--park-sleeps-over", "1s"}, dir + "/run.log");
  const std::string run_id = AwaitParked(dir + "/run.log", db);
  ASSERT_FALSE(run_id.empty()) << ReadFile(dir + "/run.log");
  ASSERT_EQ(StatusJson(db, run_id)["status"], "waiting");
  run.Kill(SIGKILL);
  EXPECT_EQ(run.Wait(), 128 + SIGKILL);
  Result worker = RunCli({"worker", "--db", db, "--until-idle", "--park-sleeps-over", "1s"});
  EXPECT_EQ(worker.code, 0) << worker.out;
  const absl::Duration took = RealClock()->Now() - started;
  nlohmann::json st = StatusJson(db, run_id);
  EXPECT_EQ(st["status"], "completed") << st.dump(2);
  EXPECT_GE(took, absl::Seconds(3));
  EXPECT_LT(took, absl::Seconds(15)) << "a due timer starts again within about a second";
  EXPECT_EQ(ReadFile(counter), "before\n") << "the step before the sleep ran once";
  std::vector<std::string> types;
  for (const auto& e : EventsJson(db, run_id)) types.push_back(e["type"]);
  EXPECT_NE(std::find(types.begin(), types.end(), "run.waiting"), types.end());
  EXPECT_NE(std::find(types.begin(), types.end(), "run.resumed"), types.end());
}

// Issue 23, acceptance 2: a run parked at a wait for a signal resumes when
// the signal is sent by another process (`runloom signal`) than the one
// that parked it; a payload that is not JSON is refused with exit 2 and
// nothing kept; the step's output is the payload.
TEST(Cli, ARunWaitingForASignalResumesWhenAnotherProcessSendsIt) {
  const std::string dir = MakeTempDir("signal");
  const std::string db = dir + "/signal.db";
  WriteFile(dir + "/pay.yaml",
            "name: pay\nsteps:\n"
            "  - {id: before, kind: noop}\n"
            "  - {id: paid, kind: wait, signal: payment}\n"
            "  - {id: after, kind: noop}\n");
  Child run({"run", dir + "/pay.yaml", "--db", db}, dir + "/run.log");
  const std::string run_id = AwaitParked(dir + "/run.log", db);
  ASSERT_FALSE(run_id.empty()) << ReadFile(dir + "/run.log");
  nlohmann::json waiting = StatusJson(db, run_id);
  ASSERT_EQ(waiting["status"], "waiting") << waiting.dump(2);
  EXPECT_EQ(waiting["waiting_for"]["kind"], "signal");
  EXPECT_EQ(waiting["waiting_for"]["signal"], "payment");
  Result bad = RunCli({"signal", run_id, "payment", "--data", "{not json", "--db", db});
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_THAT(bad.out, ::testing::HasSubstr("--data"));
  Result unknown = RunCli({"signal", run_id, "refund", "--db", db});
  EXPECT_EQ(unknown.code, 2) << unknown.out;
  EXPECT_EQ(StatusJson(db, run_id)["status"], "waiting");
  Result sent = RunCli({"signal", run_id, "payment", "--data", R"({"amount": 5})", "--db", db});
  EXPECT_EQ(sent.code, 0) << sent.out;
  EXPECT_THAT(sent.out, ::testing::HasSubstr("resolved"));
  EXPECT_EQ(run.Wait(), 0) << ReadFile(dir + "/run.log");
  nlohmann::json st = StatusJson(db, run_id);
  EXPECT_EQ(st["status"], "completed") << st.dump(2);
  bool found = false;
  for (const nlohmann::json& step : st["steps"]) {
    if (step["path"] != "paid") continue;
    found = true;
    EXPECT_EQ(step["output"], (nlohmann::json{{"amount", 5}}));
  }
  EXPECT_TRUE(found) << st.dump(2);
  std::vector<std::string> types;
  for (const auto& e : EventsJson(db, run_id)) types.push_back(e["type"]);
  EXPECT_NE(std::find(types.begin(), types.end(), "signal.received"), types.end());
}

// Issue 23, acceptance 2: a child run survives a parent crash without a
// duplicate. `runloom run` parks the parent at its run step and executes
// the child itself; it is killed with SIGKILL in the middle of the child's
// step. A worker started afterwards recovers the child (its lease expires),
// whose end wakes the parent; the parent's step finds the child it started,
// so there is exactly one child, and the parent completes with its output.
TEST(Cli, AChildRunSurvivesAParentCrashWithoutADuplicate) {
  const std::string dir = MakeTempDir("child");
  const std::string db = dir + "/child.db";
  const std::string counter = dir + "/counter.txt";
  WriteFile(dir + "/summarize.yaml",
            "name: summarize\ninputs:\n  topic: {type: string}\nsteps:\n"
            "  - id: write\n    kind: exec\n    command: [sh, -c, 'echo child >> " + counter +
                R"(; sleep 2; echo {\"summary\": \"done\"}'])" + "\n");
  WriteFile(dir + "/digest.yaml", R"(name: digest
steps:
  - {id: before, kind: noop}
  - {id: sum, kind: run, workflow: summarize, inputs: {topic: storage}}
  - {id: after, kind: noop, output: {got: "{{ steps.sum.output.outputs.write.summary }}"}}
)");
  Result registered = RunCli({"workflows", "--register", dir + "/summarize.yaml", "--db", db});
  ASSERT_EQ(registered.code, 0) << registered.out;
  EXPECT_THAT(registered.out, ::testing::HasSubstr("registered summarize v1"));
  Result bad = RunCli({"workflows", "--register", dir + "/missing.yaml", "--db", db});
  EXPECT_EQ(bad.code, 2) << bad.out;
  Child run({"run", dir + "/digest.yaml", "--db", db, "--lease-ttl", "2s"}, dir + "/run.log");
  const std::string parent = AwaitParked(dir + "/run.log", db);
  ASSERT_FALSE(parent.empty()) << ReadFile(dir + "/run.log");
  nlohmann::json waiting = StatusJson(db, parent);
  ASSERT_EQ(waiting["waiting_for"]["kind"], "child") << waiting.dump(2);
  const std::string child = waiting["waiting_for"]["child_run_id"];
  // The child's step has started in the `run` process: kill it there.
  for (int i = 0; i < 500 && ReadFile(counter).empty(); ++i) {
    RealClock()->SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(ReadFile(counter), "child\n") << ReadFile(dir + "/run.log");
  run.Kill(SIGKILL);
  EXPECT_EQ(run.Wait(), 128 + SIGKILL);
  Result worker = RunCli({"worker", "--db", db, "--until-idle", "--lease-ttl", "2s"});
  EXPECT_EQ(worker.code, 0) << worker.out;
  nlohmann::json st = StatusJson(db, parent);
  EXPECT_EQ(st["status"], "completed") << st.dump(2);
  nlohmann::json child_st = StatusJson(db, child);
  EXPECT_EQ(child_st["status"], "completed") << child_st.dump(2);
  EXPECT_EQ(child_st["parent_run_id"], parent);
  Result kids = RunCli({"runs", "--parent", parent, "--json", "--db", db});
  ASSERT_EQ(kids.code, 0) << kids.out;
  nlohmann::json page = nlohmann::json::parse(kids.out);
  ASSERT_EQ(page["runs"].size(), 1u) << kids.out;
  EXPECT_EQ(page["runs"][0]["id"], child);
  bool found = false;
  for (const nlohmann::json& step : st["steps"]) {
    if (step["path"] != "after") continue;
    found = true;
    EXPECT_EQ(step["output"], (nlohmann::json{{"got", "done"}}));
  }
  EXPECT_TRUE(found) << st.dump(2);
}

// Processes whose command line is exactly `argv` (zombies have none).
int CountProcesses(const std::vector<std::string>& argv) {
  std::string want;
  for (const std::string& a : argv) want += a + '\0';
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (ReadFile(entry.path().string() + "/cmdline") == want) ++n;
  }
  return n;
}

// Issue 8, finding 6: when the process executing a run is SIGKILLed, its exec
// step's whole process tree dies too (no copy keeps running beside the one a
// resuming worker starts).
TEST(Cli, KilledRunTakesItsStepsProcessTreeWithIt) {
  const std::string dir = MakeTempDir("orphans");
  // A duration no other process on the machine uses.
  const std::string secs = absl::StrCat("300.", getpid());
  WriteFile(dir + "/tree.yaml", absl::StrCat("name: tree\nsteps:\n  - id: s\n    kind: exec\n",
                                             "    command: [sh, -c, 'touch started; sleep ", secs,
                                             " & sleep ", secs, "; wait']\n"));
  Child run({"run", dir + "/tree.yaml", "--db", dir + "/tree.db"}, dir + "/run.log");
  int found = 0;
  for (int i = 0; i < 1000 && found < 2; ++i) {
    RealClock()->SleepFor(absl::Milliseconds(10));
    found = CountProcesses({"sleep", secs});
  }
  ASSERT_EQ(found, 2) << "both sleeps run before the kill: " << ReadFile(dir + "/run.log");
  run.Kill(SIGKILL);
  EXPECT_EQ(run.Wait(), 128 + SIGKILL);
  int left = found;
  for (int i = 0; i < 100 && left > 0; ++i) {
    RealClock()->SleepFor(absl::Milliseconds(10));
    left = CountProcesses({"sleep", secs});
  }
  EXPECT_EQ(left, 0) << "sleeps still running 1 s after the kill";
}

// Issue 8, finding 7: `runloom cancel` from another process stops a running
// step in under a second at the default settings (a 30 s lease, so a
// 10 s heartbeat), and the run ends cancelled.
TEST(Cli, CancelFromAnotherProcessStopsARunningStepWithinASecond) {
  const std::string dir = MakeTempDir("cancel");
  const std::string db = dir + "/cancel.db";
  WriteFile(dir + "/long.yaml",
            "name: long\nsteps:\n  - id: s\n    kind: exec\n    command: [sleep, '30']\n");
  Child run({"run", dir + "/long.yaml", "--db", db}, dir + "/run.log");
  std::string run_id;
  bool started = false;
  for (int i = 0; i < 500 && !started; ++i) {
    RealClock()->SleepFor(absl::Milliseconds(20));
    if (run_id.empty()) run_id = RunIdFrom(ReadFile(dir + "/run.log"));
    if (run_id.empty()) continue;
    for (const auto& e : EventsJson(db, run_id)) started = started || e["type"] == "step.started";
  }
  ASSERT_TRUE(started) << ReadFile(dir + "/run.log");
  const absl::Time asked = RealClock()->Now();
  Result cancel = RunCli({"cancel", run_id, "--db", db});
  ASSERT_EQ(cancel.code, 0) << cancel.out;
  std::string status;
  absl::Duration took;
  while (RealClock()->Now() - asked < absl::Seconds(15)) {
    status = StatusJson(db, run_id)["status"];
    took = RealClock()->Now() - asked;
    if (status == "cancelled") break;
    RealClock()->SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(status, "cancelled");
  EXPECT_LT(took, absl::Seconds(1)) << "from `runloom cancel` to the run's cancelled status";
  run.Kill(SIGKILL);  // in case it did not stop; a no-op once it has exited
  run.Wait();
}

// Issue 25, bounded steps: a hung exec step in a workflow that sets no
// timeout anywhere is stopped at its kind's default timeout (here the
// config file's `step_timeouts: {exec: 1s}`; built in, 1 h), its whole
// process group killed, and the run ends failed with class timeout. The
// same step with `timeout: none` written out is not bounded.
TEST(Cli, AHungExecStepWithNoTimeoutEndsTheRun) {
  const std::string dir = MakeTempDir("hung");
  const std::string db = dir + "/hung.db";
  WriteFile(dir + "/cfg.yaml", "step_timeouts:\n  exec: 1s\n");
  WriteFile(dir + "/hung.yaml",
            "name: hung\nsteps:\n  - id: s\n    kind: exec\n"
            "    command: [sh, -c, 'sleep 3600 & echo $! > grandchild.pid; wait']\n");
  const absl::Time begin = RealClock()->Now();
  Result run = RunCli({"run", dir + "/hung.yaml", "--db", db, "--config", dir + "/cfg.yaml"});
  const absl::Duration took = RealClock()->Now() - begin;
  EXPECT_EQ(run.code, 1) << run.out;
  EXPECT_LT(took, absl::Seconds(60)) << run.out;
  const std::string id = RunIdFrom(run.out);
  ASSERT_FALSE(id.empty()) << run.out;
  const nlohmann::json st = StatusJson(db, id);
  EXPECT_EQ(st["status"], "failed") << st.dump(2);
  ASSERT_EQ(st["steps"].size(), 1u) << st.dump(2);
  EXPECT_EQ(st["steps"][0]["error_class"], "timeout") << st.dump(2);
  EXPECT_THAT(st["steps"][0]["error"].get<std::string>(),
              ::testing::HasSubstr("the step kind's default timeout"));
  // The step's process group was killed: the backgrounded sleep too.
  const std::string pid_text = ReadFile(dir + "/grandchild.pid");
  const pid_t grandchild = static_cast<pid_t>(std::atoi(pid_text.c_str()));
  ASSERT_GT(grandchild, 0) << pid_text;
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = kill(grandchild, 0) != 0;
    if (!gone) RealClock()->SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(gone) << "the hung step's background sleep still runs";

  WriteFile(dir + "/unbounded.yaml",
            "name: unbounded\nsteps:\n  - id: s\n    kind: exec\n    timeout: none\n"
            "    command: [sh, -c, 'sleep 2; echo {}']\n");
  Result unbounded =
      RunCli({"run", dir + "/unbounded.yaml", "--db", db, "--config", dir + "/cfg.yaml"});
  EXPECT_EQ(unbounded.code, 0) << unbounded.out;
}

// Issue 25: `serve --allow-kinds` names step kinds; another name stops it
// before it opens (or creates) the database.
TEST(Cli, ServeRefusesAnUnknownAllowedKindAndWritesNothing) {
  const std::string dir = MakeTempDir("allow");
  const std::string db = dir + "/allow.db";
  Result r = RunCli({"serve", "--allow-kinds", "http, teleport", "--db", db, "--listen",
                     "127.0.0.1:0"});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--allow-kinds: unknown step kind 'teleport'"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(db));
}

// Issue 8, finding 5: a templated value reaches an exec step as data. The
// unsafe form (the value inside an `sh -c` script) is refused at load time
// with nothing written; the safe form passes `$(touch pwned)` through as text.
TEST(Cli, TemplatedValuesNeverRunAsShellCode) {
  const std::string dir = MakeTempDir("inject");
  const std::string db = dir + "/inject.db";
  const std::string evil = "v=$(touch pwned)";
  WriteFile(dir + "/unsafe.yaml",
            "name: unsafe\ninputs:\n  v: {type: string}\nsteps:\n  - id: s\n    kind: exec\n"
            "    command: [sh, -c, 'echo {{ inputs.v }} > out.txt']\n");
  Result refused = RunCli({"run", dir + "/unsafe.yaml", "--db", db, "--input", evil});
  EXPECT_EQ(refused.code, 2) << refused.out;
  EXPECT_NE(refused.out.find("unsafe_shell_templates"), std::string::npos) << refused.out;
  EXPECT_FALSE(std::filesystem::exists(db));
  WriteFile(dir + "/safe.yaml",
            "name: safe\ninputs:\n  v: {type: string}\nsteps:\n  - id: s\n    kind: exec\n"
            "    command: [sh, -c, 'echo \"$1\" > out.txt; echo \"{}\"', sh, '{{ inputs.v }}']\n");
  Result ok = RunCli({"run", dir + "/safe.yaml", "--db", db, "--input", evil});
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_EQ(ReadFile(dir + "/out.txt"), "$(touch pwned)\n");
  EXPECT_FALSE(std::filesystem::exists(dir + "/pwned")) << "the value ran as code";
}

// Issue 8, finding 3: a step that prints a secret puts it nowhere: not in the
// database, its WAL, or any CLI output. Given as a reference and as a value.
TEST(Cli, ALeakedSecretIsScrubbedFromTheDatabaseAndEveryOutput) {
  const std::string dir = MakeTempDir("secret");
  const std::string secret = "s3cr3t-v4lue-" + std::to_string(getpid());
  setenv("RUNLOOM_SECRET_LEAKY_KEY", secret.c_str(), 1);
  WriteFile(dir + "/leak.yaml",
            "name: leak\ninputs:\n  key: {type: string, secret: true}\nsteps:\n"
            "  - id: s\n    kind: exec\n"
            "    command: [sh, -c, 'echo key-is-$0 >&2; echo \"{\\\"k\\\": \\\"$0\\\"}\"; exit 3', "
            "'{{ inputs.key }}']\n");
  for (const std::string& given : {std::string("secret://LEAKY_KEY"), secret}) {
    const std::string db = dir + "/leak-" + std::to_string(given.size()) + ".db";
    Result run = RunCli({"run", dir + "/leak.yaml", "--db", db, "--input", "key=" + given});
    EXPECT_EQ(run.code, 1) << run.out;  // the step fails (exit 3)
    const std::string run_id = RunIdFrom(run.out);
    ASSERT_FALSE(run_id.empty()) << run.out;
    std::string everything = run.out;
    for (const Result& r : ReadRunOutputs(db, run_id)) {
      EXPECT_EQ(r.code, 0) << r.out;
      everything += r.out;
    }
    EXPECT_NE(everything.find("key-is-[secret]"), std::string::npos) << everything;
    EXPECT_EQ(everything.find(secret), std::string::npos) << "printed: " << everything;
    for (const std::string& file : {db, db + "-wal"}) {
      EXPECT_EQ(ReadFile(file).find(secret), std::string::npos) << "in " << file;
    }
  }
  unsetenv("RUNLOOM_SECRET_LEAKY_KEY");
}

// Issue 8, finding 4: a secret given as a reference survives a gate: the run
// is finished by `worker`, another process, which resolves it again.
TEST(Cli, ASecretReferenceIsResolvedByTheWorkerAfterAGate) {
  const std::string dir = MakeTempDir("secret-gate");
  const std::string db = dir + "/gate.db";
  setenv("RUNLOOM_SECRET_GATE_KEY", "gate-secret-value", 1);
  WriteFile(dir + "/gate.yaml",
            "name: gated\ninputs:\n  key: {type: string, secret: true}\nsteps:\n"
            "  - id: review\n    kind: approval\n    proposal: {text: hello}\n"
            "  - id: use\n    kind: exec\n    needs: [review]\n"
            "    command: [sh, -c, 'printf %s \"$0\" > used.txt; echo \"{}\"', "
            "'{{ inputs.key }}']\n");
  Result run = RunCli({"run", dir + "/gate.yaml", "--db", db, "--input", "key=secret://GATE_KEY"});
  const std::string run_id = RunIdFrom(run.out);
  ASSERT_FALSE(run_id.empty()) << run.out;
  nlohmann::json st = StatusJson(db, run_id);
  ASSERT_EQ(st["status"], "paused") << st.dump(2);
  const std::string digest = st["pending_gate"]["proposal_digest"];
  Result decide = RunCli({"decide", run_id, "--db", db, "--digest", digest, "--approve"});
  ASSERT_EQ(decide.code, 0) << decide.out;
  Result worker = RunCli({"worker", "--db", db, "--until-idle"});
  EXPECT_EQ(worker.code, 0) << worker.out;
  st = StatusJson(db, run_id);
  EXPECT_EQ(st["status"], "completed") << st.dump(2);
  EXPECT_EQ(ReadFile(dir + "/used.txt"), "gate-secret-value") << "the step got the value";
  EXPECT_EQ(ReadFile(db).find("gate-secret-value"), std::string::npos);
  unsetenv("RUNLOOM_SECRET_GATE_KEY");
}

class Ingest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("ingest");
    db_ = dir_ + "/ingest.db";
  }
  Result RunIngest(std::vector<std::string> extra) {
    std::vector<std::string> args = {
        "run", SourceDir() + "/examples/ingest.yaml", "--db", db_, "--input", "document_id=doc-7"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunCli(args);
  }
  std::string dir_, db_;
};

TEST_F(Ingest, HappyPathCompletes) {
  Result r = RunIngest({"--input", "format=pdf"});
  EXPECT_EQ(r.code, 0) << r.out;
  std::string id = RunIdFrom(r.out);
  nlohmann::json st = StatusJson(db_, id);
  EXPECT_EQ(st["status"], "completed");
  std::map<std::string, std::string> state;
  for (const auto& s : st["steps"]) state[s["path"]] = s["state"];
  EXPECT_EQ(state["parse_pdf"], "succeeded");
  EXPECT_EQ(state["parse_docx"], "skipped");
  EXPECT_EQ(state["index"], "succeeded");
  EXPECT_EQ(state["status"], "succeeded");
}

// Acceptance (issue 2, point 4a): a transient parser failure is retried with
// backoff and the run completes.
TEST_F(Ingest, TransientParserFailureIsRetriedWithBackoff) {
  Result r = RunIngest({"--input", "format=html", "--input", "fail_parse_times=1"});
  EXPECT_EQ(r.code, 0) << r.out;
  std::string id = RunIdFrom(r.out);
  auto events = EventsJson(db_, id);
  std::vector<nlohmann::json> parse;
  for (const auto& e : events) {
    if (e["data"].value("path", "") == "parse_html") parse.push_back(e);
  }
  ASSERT_EQ(parse.size(), 4u);  // started, failed (will retry), started, succeeded
  EXPECT_EQ(parse[1]["type"], "step.failed");
  EXPECT_EQ(parse[1]["data"]["error_class"], "unavailable");
  EXPECT_EQ(parse[1]["data"]["will_retry"], true);
  EXPECT_EQ(parse[1]["data"]["retry_in_ms"], 1000);
  EXPECT_EQ(parse[2]["data"]["attempt"], 2);
  EXPECT_EQ(parse[3]["type"], "step.succeeded");
  EXPECT_EQ(StatusJson(db_, id)["status"], "completed");
}

// Acceptance (issue 2, point 4b): a failing chunk step is not retried, the
// status step still runs and the run ends failed.
TEST_F(Ingest, ChunkFailureIsNotRetriedAndStatusStillRuns) {
  Result r = RunIngest({"--input", "format=txt", "--input", "fail_chunk=true"});
  EXPECT_EQ(r.code, 1) << r.out;
  std::string id = RunIdFrom(r.out);
  nlohmann::json st = StatusJson(db_, id);
  EXPECT_EQ(st["status"], "failed");
  std::map<std::string, nlohmann::json> steps;
  for (const auto& s : st["steps"]) steps[s["path"]] = s;
  EXPECT_EQ(steps["chunk"]["state"], "failed");
  EXPECT_EQ(steps["chunk"]["attempt"], 1);
  EXPECT_EQ(steps["index"]["state"], "skipped");
  EXPECT_EQ(steps["status"]["state"], "succeeded");
  EXPECT_EQ(steps["status"]["output"]["outcome"], "failed");
  int chunk_starts = 0;
  for (const auto& e : EventsJson(db_, id)) {
    if (e["type"] == "step.started" && e["data"]["path"] == "chunk") ++chunk_starts;
  }
  EXPECT_EQ(chunk_starts, 1);
}

// `events --follow` in one process prints an event committed by another
// (`runloom run`) promptly, woken by the backend's change watcher, and
// exits once the run's terminal event is printed.
TEST(Cli, EventsFollowPrintsAnotherProcesssEventsAndExitsAtTheEnd) {
  const std::string dir = MakeTempDir("follow");
  const std::string db = dir + "/follow.db";
  WriteFile(dir + "/slow.yaml",
            "name: slow\nsteps:\n  - id: a\n    kind: exec\n    command: \"sleep 1; echo '{}'\"\n"
            "  - id: b\n    kind: exec\n    command: \"sleep 0.5; echo '{}'\"\n");
  Child run({"run", dir + "/slow.yaml", "--db", db}, dir + "/run.log");
  const std::string run_id = AwaitRunIdIn(dir + "/run.log");
  ASSERT_FALSE(run_id.empty()) << ReadFile(dir + "/run.log");
  Child follow({"events", run_id, "--db", db, "--follow"}, dir + "/follow.log");
  // Step b starts about 1 s after the run; the follower prints it soon after.
  absl::Time seen_b = absl::InfiniteFuture();
  for (int i = 0; i < 2000; ++i) {
    const std::string log = ReadFile(dir + "/follow.log");
    if (log.find("step.started") != std::string::npos && log.find("\"b\"") != std::string::npos) {
      seen_b = absl::Now();
      break;
    }
    RealClock()->SleepFor(absl::Milliseconds(2));
  }
  EXPECT_EQ(run.Wait(), 0) << ReadFile(dir + "/run.log");
  const absl::Time run_done = absl::Now();
  EXPECT_EQ(follow.Wait(), 0);
  const absl::Duration exit_after = absl::Now() - run_done;
  const std::string out = ReadFile(dir + "/follow.log");
  EXPECT_NE(seen_b, absl::InfiniteFuture()) << out;
  EXPECT_NE(out.find("run.finished"), std::string::npos) << out;
  // Woken by the commit, not by the 1 s re-check.
  EXPECT_LT(exit_after, absl::Milliseconds(900)) << out;
}

// Issue 24, streaming across processes: `events --follow --json` in one
// process prints the text of a model call that `runloom run` streams in
// another, as it grows (llm.delta lines, from the store's live_text rows),
// then its end; replayed by offset, the pieces are the step's stored text.
TEST(Cli, EventsFollowShowsTheTextAnotherProcessStreamsAsItGrows) {
  const std::string dir = MakeTempDir("follow-stream");
  const std::string db = dir + "/stream.db";
  WriteFile(dir + "/talk.yaml",
            "name: talk\nsteps:\n  - id: talk\n    kind: llm\n    stream: true\n"
            "    prompt: \"one two three four five six seven eight nine ten eleven twelve\"\n"
            "    fake: {latency: 3s}\n");
  Child run({"run", dir + "/talk.yaml", "--db", db}, dir + "/run.log");
  const std::string run_id = AwaitRunIdIn(dir + "/run.log");
  ASSERT_FALSE(run_id.empty()) << ReadFile(dir + "/run.log");
  Child follow({"events", run_id, "--db", db, "--follow", "--json"}, dir + "/follow.log");
  EXPECT_EQ(run.Wait(), 0) << ReadFile(dir + "/run.log");
  EXPECT_EQ(follow.Wait(), 0);
  const std::string out = ReadFile(dir + "/follow.log");
  std::string text;
  int deltas = 0, ends = 0;
  bool finished = false;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    if (line[0] != '{') continue;  // a log line (stderr shares the file)
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(j.is_discarded()) << "not JSON: " << line;
    const std::string type = j.value("type", "");
    if (type == "run.finished") finished = true;
    if (type != "llm.delta" && type != "llm.reset" && type != "llm.end") continue;
    EXPECT_EQ(j["run_id"], run_id);
    EXPECT_FALSE(j.contains("seq")) << "a streamed frame is not an event: " << line;
    EXPECT_EQ(j["data"]["path"], "talk");
    if (type == "llm.reset") text.clear();
    if (type == "llm.end") ++ends;
    if (type != "llm.delta") continue;
    EXPECT_EQ(j["data"]["offset"].get<int64_t>(), static_cast<int64_t>(text.size())) << line;
    text += j["data"]["text"].get<std::string>();
    ++deltas;
  }
  EXPECT_TRUE(finished) << out;
  EXPECT_GE(deltas, 3) << "the text did not come as it grew:\n" << out;
  EXPECT_EQ(ends, 1) << out;
  const nlohmann::json status = StatusJson(db, run_id);
  ASSERT_EQ(status["steps"].size(), 1u) << status.dump();
  const std::string stored = status["steps"][0]["output"].value("text", "");
  EXPECT_FALSE(stored.empty()) << status.dump();
  EXPECT_EQ(text, stored);
}

// Issue 28: the attempt cap is the workflow's `max_attempts:`, stored on
// the run by the process that admits it (`run --detach`, which executes
// nothing, and `run`); `worker --max-attempts`, which never governed a run
// (the cap was fixed when the run was admitted), is refused as an unknown
// flag with exit 2 before the worker takes anything.
TEST(Cli, AWorkflowsMaxAttemptsIsStoredWhereverTheRunIsAdmitted) {
  const std::string dir = MakeTempDir("attempts");
  const std::string db = dir + "/attempts.db";
  const std::string wf = dir + "/capped.yaml";
  WriteFile(wf, "name: capped\nmax_attempts: 7\nsteps:\n  - {id: a, kind: noop}\n");
  Result detached = RunStdout({"run", wf, "--db", db, "--detach"});
  ASSERT_EQ(detached.code, 0) << detached.out;
  const std::string id = detached.out.substr(0, detached.out.find('\n'));
  nlohmann::json st = StatusJson(db, id);
  EXPECT_EQ(st["status"], "queued") << st.dump(2);
  EXPECT_EQ(st["max_attempts"], 7) << st.dump(2);
  EXPECT_EQ(st["attempts"], 0) << st.dump(2);
  Result text = RunCli({"status", id, "--db", db});
  EXPECT_NE(text.out.find("attempts 0/7"), std::string::npos) << text.out;

  Result refused = RunCli({"worker", "--db", db, "--until-idle", "--max-attempts", "3"});
  EXPECT_EQ(refused.code, 2) << refused.out;
  EXPECT_NE(refused.out.find("--max-attempts"), std::string::npos) << refused.out;
  EXPECT_EQ(StatusJson(db, id)["status"], "queued") << "the refused worker took nothing";

  Result worker = RunCli({"worker", "--db", db, "--until-idle"});
  ASSERT_EQ(worker.code, 0) << worker.out;
  st = StatusJson(db, id);
  EXPECT_EQ(st["status"], "completed") << st.dump(2);
  EXPECT_EQ(st["attempts"], 1) << st.dump(2);
  EXPECT_EQ(st["max_attempts"], 7) << st.dump(2);

  Result ran = RunStdout({"run", wf, "--db", db, "--json"});
  ASSERT_EQ(ran.code, 0) << ran.out;
  const nlohmann::json j = nlohmann::json::parse(ran.out);
  EXPECT_EQ(j["status"], "completed") << j.dump(2);
  EXPECT_EQ(j["max_attempts"], 7) << j.dump(2);
}

TEST(CliBadInput, ErrorsExitTwoAndWriteNothing) {
  const std::string dir = MakeTempDir("bad");
  const std::string db = dir + "/bad.db";
  const std::string wf = SourceDir() + "/examples/ingest.yaml";
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  };
  WriteFile(dir + "/broken.yaml",
            "name: broken\nsteps:\n  - id: a\n    kind: noop\n    needs: [zzz]\n");
  WriteFile(dir + "/notyaml.yaml", "name: [unclosed\n");
  // Hostile files (issue 8, findings 1 and 2): refused after bounded work.
  std::string bomb = "name: bomb\nsteps:\n  - id: a\n    kind: noop\n    output:\n";
  bomb += "      a0: &a0 [x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 9; ++i) {
    bomb += absl::StrCat("      a", i, ": &a", i, " [*a", i - 1);
    for (int k = 1; k < 9; ++k) bomb += absl::StrCat(", *a", i - 1);
    bomb += "]\n";
  }
  WriteFile(dir + "/bomb.yaml", bomb);
  WriteFile(dir + "/huge.yaml", "name: huge\ndescription: " + std::string(2 << 20, 'x') + "\n");
  WriteFile(dir + "/deep.json", std::string(100000, '['));
  std::vector<Case> cases = {
      {{"run", dir + "/missing.yaml", "--db", db}, "missing.yaml"},
      {{"run", dir + "/broken.yaml", "--db", db}, "broken.yaml:5"},
      {{"run", dir + "/notyaml.yaml", "--db", db}, "notyaml.yaml"},
      {{"run", wf, "--db", db, "--input", "document_id=d", "--input", "nope=1"}, "nope"},
      {{"run", wf, "--db", db, "--input", "document_id=d", "--input", "format=exe"}, "format"},
      {{"run", wf, "--db", db, "--input", "oops"}, "--input"},
      {{"run", wf, "--db", db, "--input", "document_id=a", "--input", "document_id=b"},
       "--input 'document_id' is given more than once"},
      {{"run", wf, "--db", db}, "document_id"},
      {{"run", dir + "/bomb.yaml", "--db", db}, "max_nodes"},
      {{"run", dir + "/huge.yaml", "--db", db}, "max_bytes"},
      {{"run", wf, "--db", db, "--input-file", dir + "/deep.json"}, "max_depth"},
  };
  for (const Case& c : cases) {
    Result r = RunCli(c.args);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.expect << " in: " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << "one clear line: " << r.out;
    EXPECT_FALSE(std::filesystem::exists(db)) << "nothing written for " << c.args[1];
  }
  // An unknown run id on an existing database.
  Result ok = RunCli({"run", wf, "--db", db, "--input", "document_id=d"});
  EXPECT_EQ(ok.code, 0) << ok.out;
  Result unknown = RunCli({"status", "r_nope", "--db", db});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.out.find("r_nope"), std::string::npos);
  Result wfs = RunCli({"workflows", "--db", db});
  EXPECT_EQ(wfs.code, 0);
  EXPECT_NE(wfs.out.find("ingest"), std::string::npos);
}

// Runs `sql` on `path` through the SQLite C API (creating the file).
void SqliteExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

// Every file under `path` (or `path` itself) with its bytes.
std::map<std::string, std::string> Snapshot(const std::string& path) {
  std::map<std::string, std::string> out;
  if (std::filesystem::is_directory(path)) {
    for (const auto& e : std::filesystem::recursive_directory_iterator(path)) {
      out[e.path().string()] = e.is_regular_file() ? ReadFile(e.path().string()) : "";
    }
  } else {
    out[path] = ReadFile(path);
  }
  return out;
}

// Issue 8, finding 8: a --db that cannot be runloom's exits 2 with one line
// in every command, and the file is left byte for byte as it was (a foreign
// SQLite database with application_id 0 gets no runloom tables).
TEST(CliBadInput, UnusableDbExitsTwoInEveryCommandAndIsLeftAlone) {
  const std::string dir = MakeTempDir("baddb");
  const std::string wf = dir + "/noop.yaml";
  WriteFile(wf, "name: noop\nsteps:\n  - id: a\n    kind: noop\n");
  WriteFile(dir + "/text.db", "this is a text file, not a database\n");
  std::filesystem::create_directories(dir + "/dir.db");
  SqliteExec(dir + "/foreign.db", "CREATE TABLE mine (x); INSERT INTO mine VALUES (1)");
  const std::string newer = dir + "/newer.db";
  Result made = RunCli({"run", wf, "--db", newer});
  ASSERT_EQ(made.code, 0) << made.out;
  // Issue 8, finding 9: no `outcome:` and no gate reads plain "completed".
  Result st = RunCli({"status", RunIdFrom(made.out), "--db", newer});
  EXPECT_NE(st.out.find("completed"), std::string::npos) << st.out;
  EXPECT_EQ(st.out.find("outcome"), std::string::npos) << st.out;
  SqliteExec(newer, "PRAGMA user_version = 99");
  struct Db {
    std::string path;
    std::string expect;
  };
  const std::vector<Db> dbs = {
      {dir + "/text.db", "not an SQLite database"},
      {dir + "/dir.db", "is a directory"},
      {dir + "/foreign.db", "another application"},
      {newer, "schema version 99"},
  };
  std::vector<std::vector<std::string>> commands = BackendCommands(wf);
  commands.push_back({"bench", "--runs", "1"});
  for (const Db& db : dbs) {
    const std::map<std::string, std::string> before = Snapshot(db.path);
    for (std::vector<std::string> args : commands) {
      const std::string cmd = args[0];
      args.insert(args.end(), {"--db", db.path});
      Result r = RunCli(args);
      EXPECT_EQ(r.code, 2) << cmd << " " << db.path << ": " << r.out;
      EXPECT_NE(r.out.find(db.expect), std::string::npos) << cmd << ": " << r.out;
      EXPECT_NE(r.out.find(db.path), std::string::npos) << cmd << " names the file: " << r.out;
      EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << cmd << ": " << r.out;
      EXPECT_TRUE(Snapshot(db.path) == before) << cmd << " changed " << db.path;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/foreign.db-wal"));
}

// `runloom runs`: newest first, pages joined by cursors (JSON and the text
// form's next-page command), filters, and bad input exiting 2.
TEST(Cli, RunsListsPagesAndRefusesBadInput) {
  const std::string dir = MakeTempDir("runs");
  const std::string db = dir + "/runs.db";
  WriteFile(dir + "/alpha.yaml", "name: alpha\nsteps:\n  - {id: a, kind: noop}\n");
  WriteFile(dir + "/beta.yaml", "name: beta\nsteps:\n  - {id: b, kind: noop}\n");
  WriteFile(dir + "/gated.yaml",
            "name: gated\nsteps:\n  - id: review\n    kind: approval\n"
            "    proposal: {text: hello}\n");
  for (const char* wf : {"alpha", "beta", "alpha", "beta", "alpha"}) {
    Result r = RunCli({"run", dir + "/" + wf + ".yaml", "--db", db});
    ASSERT_EQ(r.code, 0) << r.out;
  }
  Result paused = RunCli({"run", dir + "/gated.yaml", "--db", db});
  ASSERT_EQ(paused.code, 3) << paused.out;
  const std::string paused_id = RunIdFrom(paused.out);

  // JSON pages of 2, followed by their cursors: every run once, newest first.
  std::vector<nlohmann::json> runs;
  std::string cursor;
  int pages = 0;
  do {
    std::vector<std::string> args = {"runs", "--db", db, "--json", "--limit", "2"};
    if (!cursor.empty()) {
      args.push_back("--cursor");
      args.push_back(cursor);
    }
    Result r = RunStdout(args);
    ASSERT_EQ(r.code, 0) << r.out;
    nlohmann::json page = nlohmann::json::parse(r.out);
    EXPECT_LE(page["runs"].size(), 2u);
    for (const auto& run : page["runs"]) runs.push_back(run);
    cursor = page["next_cursor"];
    ++pages;
  } while (!cursor.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  ASSERT_EQ(runs.size(), 6u);
  EXPECT_EQ(runs[0]["id"], paused_id);
  std::set<std::string> ids;
  for (size_t i = 0; i < runs.size(); ++i) {
    ids.insert(runs[i]["id"].get<std::string>());
    if (i > 0) {
      EXPECT_GE(runs[i - 1]["created_at"].get<std::string>(),
                runs[i]["created_at"].get<std::string>());
    }
  }
  EXPECT_EQ(ids.size(), 6u);

  // Filters.
  Result alpha =
      RunStdout({"runs", "--db", db, "--json", "--workflow", "alpha", "--status", "completed"});
  ASSERT_EQ(alpha.code, 0) << alpha.out;
  nlohmann::json alpha_page = nlohmann::json::parse(alpha.out);
  EXPECT_EQ(alpha_page["runs"].size(), 3u);
  EXPECT_EQ(alpha_page["next_cursor"], "");
  Result paused_only = RunStdout({"runs", "--db", db, "--json", "--status", "paused"});
  ASSERT_EQ(paused_only.code, 0);
  EXPECT_EQ(nlohmann::json::parse(paused_only.out)["runs"].size(), 1u);

  // The text form: a table, then the exact command for the next page.
  Result text = RunCli({"runs", "--db", db, "--limit", "4"});
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_EQ(text.out.rfind("RUN ", 0), 0u) << text.out;
  EXPECT_NE(text.out.find(paused_id), std::string::npos) << text.out;
  const std::string prefix = "more runs: runloom runs --db " + db + " --limit 4 --cursor ";
  size_t more = text.out.find(prefix);
  ASSERT_NE(more, std::string::npos) << text.out;
  EXPECT_EQ(std::count(text.out.begin(), text.out.end(), '\n'), 6) << text.out;
  std::string next_cursor = text.out.substr(more + prefix.size());
  next_cursor = next_cursor.substr(0, next_cursor.find('\n'));
  Result next = RunCli({"runs", "--db", db, "--limit", "4", "--cursor", next_cursor});
  ASSERT_EQ(next.code, 0) << next.out;
  EXPECT_EQ(std::count(next.out.begin(), next.out.end(), '\n'), 3) << next.out;
  EXPECT_EQ(next.out.find("more runs"), std::string::npos) << next.out;

  // Bad input: exit 2, one line that says how to fix it.
  Result bad_cursor = RunCli({"runs", "--db", db, "--cursor", "bm90IGEgY3Vyc29y!"});
  EXPECT_EQ(bad_cursor.code, 2) << bad_cursor.out;
  EXPECT_NE(bad_cursor.out.find("--cursor"), std::string::npos) << bad_cursor.out;
  EXPECT_NE(bad_cursor.out.find("next_cursor"), std::string::npos) << bad_cursor.out;
  EXPECT_EQ(std::count(bad_cursor.out.begin(), bad_cursor.out.end(), '\n'), 1) << bad_cursor.out;
  Result bad_status = RunCli({"runs", "--db", db, "--status", "done"});
  EXPECT_EQ(bad_status.code, 2) << bad_status.out;
  EXPECT_NE(bad_status.out.find("'done'"), std::string::npos) << bad_status.out;
  EXPECT_NE(bad_status.out.find("queued, running, paused, waiting, completed"), std::string::npos)
      << bad_status.out;
  EXPECT_EQ(RunCli({"runs", "--db", db, "--limit", "0"}).code, 2);
  Result no_db = RunCli({"runs", "--db", dir + "/missing.db"});
  EXPECT_EQ(no_db.code, 2) << no_db.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/missing.db"));

  // `status --json` of a paused run carries its gate; of a finished run, null.
  nlohmann::json st = StatusJson(db, paused_id);
  ASSERT_TRUE(st.contains("pending_gate")) << st.dump(2);
  EXPECT_EQ(st["pending_gate"]["path"], "review");
  EXPECT_EQ(st["pending_gate"]["proposal"]["text"], "hello");
  EXPECT_EQ(st["pending_gate"]["proposal_digest"].get<std::string>().rfind("sha256:", 0), 0u);
  EXPECT_TRUE(StatusJson(db, runs.back()["id"])["pending_gate"].is_null());
}

// Issue 25, `runloom backup --to FILE`: a copy taken while a run executes in
// another process is a whole database (integrity_check ok) that runloom
// reads; a FILE that exists is refused with exit 2 and left as it was.
TEST(Cli, BackupCopiesTheDatabaseWhileARunExecutesAndNeverOverwrites) {
  const std::string dir = MakeTempDir("backup");
  const std::string db = dir + "/live.db";
  WriteFile(dir + "/slow.yaml",
            "name: slow\nsteps:\n  - id: a\n    kind: exec\n    command: \"sleep 1; echo '{}'\"\n"
            "  - id: b\n    kind: exec\n    command: \"sleep 1; echo '{}'\"\n");
  Child run({"run", dir + "/slow.yaml", "--db", db}, dir + "/run.log");
  const std::string run_id = AwaitRunIdIn(dir + "/run.log");
  ASSERT_FALSE(run_id.empty()) << ReadFile(dir + "/run.log");
  RealClock()->SleepFor(absl::Milliseconds(1200));  // step a has committed, b runs
  const std::string copy = dir + "/copy.db";
  Result made = RunCli({"backup", "--to", copy, "--db", db});
  EXPECT_EQ(made.code, 0) << made.out;
  EXPECT_EQ(run.Wait(), 0) << ReadFile(dir + "/run.log");
  ASSERT_TRUE(std::filesystem::exists(copy));
  EXPECT_FALSE(std::filesystem::exists(copy + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(copy + ".part"));
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open_v2(copy.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(raw, "PRAGMA integrity_check", -1, &st, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "ok");
    sqlite3_finalize(st);
    sqlite3_close(raw);
  }
  const nlohmann::json status = StatusJson(copy, run_id);
  EXPECT_EQ(status["status"], "running") << status.dump();  // as it was at the copy
  const std::map<std::string, std::string> before = Snapshot(copy);
  Result again = RunCli({"backup", "--to", copy, "--db", db});
  EXPECT_EQ(again.code, 2) << again.out;
  EXPECT_THAT(again.out, ::testing::HasSubstr("never overwrites"));
  EXPECT_EQ(Snapshot(copy), before);
}

// `--to` is a file name, never a command: shell metacharacters are part of
// the name. What cannot be written is refused with nothing left behind.
TEST(Cli, BackupTakesItsFileNameLiterallyAndRefusesWhatItCannotWrite) {
  const std::string dir = MakeTempDir("backup-hostile");
  const std::string db = dir + "/live.db";
  WriteFile(dir + "/wf.yaml", "name: tiny\nsteps:\n  - {id: a, kind: noop}\n");
  ASSERT_EQ(RunCli({"run", dir + "/wf.yaml", "--db", db}).code, 0);
  const std::string odd = dir + "/a;touch pwned.db $(id) `id`";
  Result made = RunCli({"backup", "--to", odd, "--db", db});
  EXPECT_EQ(made.code, 0) << made.out;
  EXPECT_TRUE(std::filesystem::exists(odd));
  EXPECT_FALSE(std::filesystem::exists(dir + "/pwned.db"));
  EXPECT_FALSE(std::filesystem::exists("pwned.db"));

  Result no_dir = RunCli({"backup", "--to", dir + "/missing/x.db", "--db", db});
  EXPECT_EQ(no_dir.code, 1) << no_dir.out;
  EXPECT_THAT(no_dir.out, ::testing::HasSubstr("cannot create"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/missing"));
  Result a_dir = RunCli({"backup", "--to", dir, "--db", db});
  EXPECT_EQ(a_dir.code, 2) << a_dir.out;
  EXPECT_THAT(a_dir.out, ::testing::HasSubstr("never overwrites"));
  Result no_db = RunCli({"backup", "--to", dir + "/y.db", "--db", dir + "/none.db"});
  EXPECT_EQ(no_db.code, 2) << no_db.out;
  EXPECT_THAT(no_db.out, ::testing::HasSubstr("no database at"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/y.db"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/none.db"));
  // A name no file system takes: refused, and not echoed back in full.
  Result long_name = RunCli({"backup", "--to", dir + "/" + std::string(5000, 'x'), "--db", db});
  EXPECT_EQ(long_name.code, 2) << long_name.out.substr(0, 300);
  EXPECT_THAT(long_name.out, ::testing::HasSubstr("name a shorter one"));
  EXPECT_LT(long_name.out.size(), 500u);
}

// Issue 25, retention: `runloom prune` counts (--dry-run) and deletes the
// runs finished before its age, never an unfinished one, and refuses a bad
// age with exit 2 before it opens the database.
TEST(Cli, PruneDeletesFinishedRunsOlderThanItsAgeAndNothingElse) {
  const std::string dir = MakeTempDir("prune");
  const std::string db = dir + "/runs.db";
  WriteFile(dir + "/noop.yaml", "name: noop\nsteps:\n  - id: a\n    kind: noop\n");
  Result done = RunCli({"run", dir + "/noop.yaml", "--db", db});
  ASSERT_EQ(done.code, 0) << done.out;
  const std::string finished = RunIdFrom(done.out);
  Result queued = RunStdout({"run", dir + "/noop.yaml", "--detach", "--db", db});
  ASSERT_EQ(queued.code, 0) << queued.out;
  const std::string waiting = queued.out.substr(0, queued.out.find('\n'));
  ASSERT_FALSE(waiting.empty()) << queued.out;

  // Bad ages: exit 2, one line naming the flag, the file untouched.
  const std::map<std::string, std::string> before = Snapshot(db);
  for (const char* bad : {"30x", "0d", "", "d", "none", "1.5d"}) {
    Result r = RunCli({"prune", "--older-than", bad, "--db", db});
    EXPECT_EQ(r.code, 2) << bad << ": " << r.out;
    EXPECT_THAT(r.out, ::testing::HasSubstr("--older-than")) << bad;
  }
  Result bad_horizon =
      RunCli({"prune", "--older-than", "1d", "--audit-horizon", "soon", "--db", db});
  EXPECT_EQ(bad_horizon.code, 2) << bad_horizon.out;
  EXPECT_EQ(RunCli({"prune", "--db", db}).code, 2);  // --older-than is required
  EXPECT_TRUE(Snapshot(db) == before);

  // Not old enough yet: nothing.
  Result young = RunCli({"prune", "--older-than", "1d", "--db", db});
  EXPECT_EQ(young.code, 0) << young.out;
  EXPECT_THAT(young.out, ::testing::HasSubstr("deleted 0 finished runs"));
  RealClock()->SleepFor(absl::Milliseconds(1100));
  Result dry = RunCli({"prune", "--older-than", "1s", "--dry-run", "--json", "--db", db});
  ASSERT_EQ(dry.code, 0) << dry.out;
  const nlohmann::json counted = nlohmann::json::parse(dry.out);
  EXPECT_EQ(counted["dry_run"], true);
  EXPECT_EQ(counted["runs"], 1) << dry.out;
  EXPECT_GT(counted["rows"].get<int64_t>(), 1) << dry.out;     // its events and step record too
  EXPECT_EQ(StatusJson(db, finished)["status"], "completed");  // a dry run deletes nothing

  Result pruned = RunCli({"prune", "--older-than", "1s", "--db", db});
  ASSERT_EQ(pruned.code, 0) << pruned.out;
  EXPECT_THAT(pruned.out, ::testing::HasSubstr("deleted 1 finished runs ("));
  EXPECT_THAT(pruned.out, ::testing::HasSubstr(counted["rows"].dump() + " rows)"));
  EXPECT_EQ(RunCli({"status", finished, "--db", db}).code, 2);  // gone
  EXPECT_EQ(StatusJson(db, waiting)["status"], "queued");       // an unfinished run stays
  Result again = RunCli({"prune", "--older-than", "1s", "--json", "--db", db});
  EXPECT_EQ(nlohmann::json::parse(again.out)["runs"], 0) << again.out;
}

}  // namespace
}  // namespace runloom::testing
