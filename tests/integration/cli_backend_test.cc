// End-to-end tests of the `runloom` binary's backend surface (issue 9,
// "Contract"): --db/--queue and RUNLOOM_DB/RUNLOOM_QUEUE, `run --detach`
// picked up by a worker, and `dead-letters` listing and redriving.
#include "runloom/backend.h"
#include "runloom/clock.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "claim_and_die.h"
#include "cli_harness.h"
#include "gtest/gtest.h"

#include <algorithm>
#include <map>
#include <set>
#include <sqlite3.h>

namespace runloom::testing {
namespace {

constexpr char kNoop[] = "name: noop\nsteps:\n  - {id: a, kind: noop}\n";

// Neither variable leaks in from the shell that runs the tests.
ChildSetup In(const std::string& cwd, const std::string& db_env = "",
              const std::string& queue_env = "") {
  return ChildSetup{cwd, {{"RUNLOOM_DB", db_env}, {"RUNLOOM_QUEUE", queue_env}}};
}

int Lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

// Every file below `dir`.
std::set<std::string> FilesIn(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    out.insert(e.path().string());
  }
  return out;
}

// A wrong --db or RUNLOOM_DB: one line naming the URL (and the variable
// when it came from there), exit 2, nothing written, in every command.
TEST(CliBackendFlags, ABadDbUrlExitsTwoInEveryCommandAndWritesNothing) {
  const std::string dir = MakeTempDir("baddburl");
  const std::string wf = MakeTempDir("wf") + "/noop.yaml";
  WriteFile(wf, kNoop);
  for (const std::string url : {"mysql://h/db", "sqlite:nope", "sqlite://", "postgress://h/d"}) {
    for (std::vector<std::string> args : BackendCommands(wf)) {
      Result env = RunCli(args, In(dir, url));
      args.insert(args.end(), {"--db", url});
      Result flag = RunCli(args, In(dir));
      for (const Result& r : {env, flag}) {
        EXPECT_EQ(r.code, 2) << args[0] << " " << url << ": " << r.out;
        EXPECT_NE(r.out.find(url), std::string::npos) << args[0] << ": " << r.out;
        EXPECT_NE(r.out.find("accepted"), std::string::npos) << args[0] << ": " << r.out;
        EXPECT_EQ(Lines(r.out), 1) << args[0] << ": " << r.out;
      }
      EXPECT_NE(env.out.find("RUNLOOM_DB"), std::string::npos) << args[0] << ": " << env.out;
      EXPECT_EQ(flag.out.find("RUNLOOM_DB"), std::string::npos) << args[0] << ": " << flag.out;
    }
  }
  Result bench = RunCli({"bench", "--runs", "1", "--db", "mysql://h/db"}, In(dir));
  EXPECT_EQ(bench.code, 2) << bench.out;
  EXPECT_EQ(Lines(bench.out), 1) << bench.out;
  EXPECT_TRUE(FilesIn(dir).empty()) << *FilesIn(dir).begin();
}

// A queue URL not of the form redis://host:port[/n]: one line naming the
// flag or variable, the value and the accepted form; exit 2; no database.
TEST(CliBackendFlags, ABadQueueUrlExitsTwoInEveryCommandAndWritesNothing) {
  const std::string dir = MakeTempDir("badqueue");
  const std::string wf = MakeTempDir("wf") + "/noop.yaml";
  WriteFile(wf, kNoop);
  const std::string db = dir + "/q.db";
  for (const std::string url :
       {"http://h:6379", "redis://h", "redis://h:0", "redis://h:99999", "redis://h:6379/x",
        "redis://:6379", "redis://u:p@h:6379", "redis://[::1]", "rediss://h:6379"}) {
    for (std::vector<std::string> args : BackendCommands(wf)) {
      args.insert(args.end(), {"--db", db});
      Result env = RunCli(args, In(dir, "", url));
      args.insert(args.end(), {"--queue", url});
      Result flag = RunCli(args, In(dir));
      for (const Result& r : {env, flag}) {
        EXPECT_EQ(r.code, 2) << args[0] << " " << url << ": " << r.out;
        EXPECT_NE(r.out.find("'" + url + "'"), std::string::npos) << args[0] << ": " << r.out;
        EXPECT_NE(r.out.find("redis://host:port[/n]"), std::string::npos) << r.out;
        EXPECT_EQ(Lines(r.out), 1) << args[0] << ": " << r.out;
      }
      EXPECT_NE(env.out.find("RUNLOOM_QUEUE '"), std::string::npos) << args[0] << ": " << env.out;
      EXPECT_NE(flag.out.find("--queue '"), std::string::npos) << args[0] << ": " << flag.out;
    }
  }
  Result bench = RunCli({"bench", "--runs", "1", "--queue", "redis://h"}, In(dir));
  EXPECT_EQ(bench.code, 2) << bench.out;
  EXPECT_EQ(Lines(bench.out), 1) << bench.out;
  EXPECT_TRUE(FilesIn(dir).empty()) << *FilesIn(dir).begin();
}

// The default database stays ./runloom.db; RUNLOOM_DB replaces it; --db
// beats RUNLOOM_DB; an empty --queue beats RUNLOOM_QUEUE.
TEST(CliBackendFlags, FlagsBeatTheEnvironmentWhichBeatsTheDefault) {
  const std::string dir = MakeTempDir("precedence");
  const std::string wf = dir + "/noop.yaml";
  WriteFile(wf, kNoop);
  Result by_default = RunCli({"run", wf}, In(dir));
  ASSERT_EQ(by_default.code, 0) << by_default.out;
  EXPECT_TRUE(std::filesystem::exists(dir + "/runloom.db"));

  const std::string env_db = dir + "/env.db";
  Result by_env = RunCli({"run", wf}, In(dir, env_db));
  ASSERT_EQ(by_env.code, 0) << by_env.out;
  const std::string id = RunIdFrom(by_env.out);
  EXPECT_EQ(RunCli({"status", id}, In(dir, env_db)).code, 0);
  EXPECT_EQ(RunCli({"status", id}, In(dir)).code, 2) << "not in ./runloom.db";
  Result flag = RunCli({"status", id, "--db", dir + "/other.db"}, In(dir, env_db));
  EXPECT_EQ(flag.code, 2) << flag.out;
  EXPECT_NE(flag.out.find("other.db"), std::string::npos) << flag.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/other.db"));
  Result by_flag = RunCli({"status", id, "--db", env_db}, In(dir, dir + "/other.db"));
  EXPECT_EQ(by_flag.code, 0) << by_flag.out;

  Result bad_env_queue = RunCli({"status", id}, In(dir, env_db, "nonsense"));
  EXPECT_EQ(bad_env_queue.code, 2) << bad_env_queue.out;
  Result own_queue = RunCli({"status", id, "--queue", ""}, In(dir, env_db, "nonsense"));
  EXPECT_EQ(own_queue.code, 0) << own_queue.out;
}

// `run --detach` admits the run and exits; a worker executes it.
TEST(Cli, DetachedRunIsQueuedUntilAWorkerCompletesIt) {
  const std::string dir = MakeTempDir("detach");
  const std::string db = dir + "/detach.db";
  const std::string wf = dir + "/noop.yaml";
  WriteFile(wf, kNoop);
  Result detached = RunStdout({"run", wf, "--db", db, "--detach", "--idempotency-key", "k1"});
  ASSERT_EQ(detached.code, 0) << detached.out;
  const std::string id = detached.out.substr(0, detached.out.find('\n'));
  ASSERT_EQ(detached.out, id + "\n") << "the id alone on stdout";
  nlohmann::json st = StatusJson(db, id);
  EXPECT_EQ(st["status"], "queued") << st.dump(2);
  EXPECT_TRUE(st["steps"].empty()) << st.dump(2);

  // The same key: the same run, not a second one.
  Result again =
      RunStdout({"run", wf, "--db", db, "--detach", "--json", "--idempotency-key", "k1"});
  ASSERT_EQ(again.code, 0) << again.out;
  const nlohmann::json j = nlohmann::json::parse(again.out);
  EXPECT_EQ(j["id"], id);
  EXPECT_EQ(j["status"], "queued");
  EXPECT_EQ(j["created"], false);

  Result worker = RunCli({"worker", "--db", db, "--until-idle"});
  ASSERT_EQ(worker.code, 0) << worker.out;
  st = StatusJson(db, id);
  EXPECT_EQ(st["status"], "completed") << st.dump(2);
  EXPECT_EQ(st["steps"].size(), 1u) << st.dump(2);

  // Validated as `run` is, and a secret value no worker could resolve is
  // refused: exit 2, nothing written.
  const std::string fresh = dir + "/fresh.db";
  WriteFile(dir + "/secret.yaml",
            "name: s\ninputs:\n  key: {type: string, secret: true}\nsteps:\n"
            "  - {id: a, kind: noop}\n");
  Result secret =
      RunCli({"run", dir + "/secret.yaml", "--db", fresh, "--detach", "--input", "key=v"});
  EXPECT_EQ(secret.code, 2) << secret.out;
  EXPECT_NE(secret.out.find("secret://"), std::string::npos) << secret.out;
  Result unknown = RunCli({"run", wf, "--db", fresh, "--detach", "--input", "nope=1"});
  EXPECT_EQ(unknown.code, 2) << unknown.out;
  EXPECT_NE(unknown.out.find("nope"), std::string::npos) << unknown.out;
  EXPECT_FALSE(std::filesystem::exists(fresh));
}

// Poison (issue 22.6, reference 002): a run whose pinned workflow no longer
// decodes (its stored text damaged, or written by a release that stores it
// otherwise) is failed with the reason once, not retried forever, and the
// worker goes on with the next run.
TEST(Cli, ARunWhosePinnedWorkflowNoLongerDecodesFailsWithTheReason) {
  const std::string dir = MakeTempDir("poison");
  const std::string db = dir + "/poison.db";
  const std::string wf = dir + "/noop.yaml";
  WriteFile(wf, kNoop);
  Result detached = RunStdout({"run", wf, "--db", db, "--detach"});
  ASSERT_EQ(detached.code, 0) << detached.out;
  const std::string id = detached.out.substr(0, detached.out.find('\n'));
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
  sqlite3_busy_timeout(raw, 5000);
  char* err = nullptr;
  ASSERT_EQ(
      sqlite3_exec(
          raw, "UPDATE workflows SET canonical = '{\"name\": \"noop\", trunc' WHERE name = 'noop'",
          nullptr, nullptr, &err),
      SQLITE_OK)
      << (err != nullptr ? err : "");
  sqlite3_close(raw);
  // Another workflow's run in the same database is not held up.
  const std::string other = dir + "/other.yaml";
  WriteFile(other, "name: other\nsteps:\n  - {id: a, kind: noop}\n");
  Result second = RunStdout({"run", other, "--db", db, "--detach"});
  ASSERT_EQ(second.code, 0) << second.out;
  const std::string other_id = second.out.substr(0, second.out.find('\n'));

  Result worker = RunCli({"worker", "--db", db, "--until-idle"});
  ASSERT_EQ(worker.code, 0) << worker.out;
  nlohmann::json st = StatusJson(db, id);
  EXPECT_EQ(st["status"], "failed") << st.dump(2);
  EXPECT_NE(st["error"].get<std::string>().find("no longer decodes"), std::string::npos)
      << st.dump(2);
  EXPECT_NE(st["error"].get<std::string>().find("fails closed"), std::string::npos) << st.dump(2);
  EXPECT_EQ(st["attempts"], 1) << "failed at once, not retried";
  EXPECT_EQ(StatusJson(db, other_id)["status"], "completed");
}

nlohmann::json DeadLetters(const std::string& db) {
  Result r = RunStdout({"dead-letters", "--db", db, "--json"});
  return r.code == 0 ? nlohmann::json::parse(r.out)["dead_letters"] : nlohmann::json::array();
}

// Issue 9, acceptance 4: a message past the retry cap is dead-lettered,
// listed, and redriven to completion.
TEST(Cli, DeadLettersAreListedAndRedrivenToCompletion) {
  const std::string dir = MakeTempDir("dead");
  const std::string db = dir + "/dead.db";
  WriteFile(dir + "/noop.yaml", kNoop);
  std::set<std::string> ids;
  for (int i = 0; i < 2; ++i) {
    Result r = RunStdout({"run", dir + "/noop.yaml", "--db", db, "--detach"});
    ASSERT_EQ(r.code, 0) << r.out;
    ids.insert(r.out.substr(0, r.out.find('\n')));
  }
  ClaimAndDie(db, 2);
  // The worker's claim is each message's second delivery, past a cap of 1;
  // with only dead-lettered runs left it is idle.
  Result worker = RunCli({"worker", "--db", db, "--max-deliveries", "1", "--until-idle"});
  EXPECT_EQ(worker.code, 0) << worker.out;
  EXPECT_NE(worker.out.find("2 queued runs are dead-lettered"), std::string::npos) << worker.out;
  const nlohmann::json dead = DeadLetters(db);
  ASSERT_EQ(dead.size(), 2u) << worker.out;
  std::set<std::string> listed;
  for (const nlohmann::json& d : dead) {
    listed.insert(d["run_id"].get<std::string>());
    EXPECT_EQ(d["deliveries"], 1) << d.dump();
    EXPECT_NE(d["reason"].get<std::string>().find("cap is 1"), std::string::npos) << d.dump();
  }
  EXPECT_EQ(listed, ids);
  for (const std::string& id : ids) EXPECT_EQ(StatusJson(db, id)["status"], "queued");
  Result table = RunCli({"dead-letters", "--db", db});
  EXPECT_EQ(table.code, 0);
  EXPECT_EQ(table.out.rfind("ID ", 0), 0u) << table.out;
  EXPECT_EQ(Lines(table.out), 3) << table.out;
  Result limited = RunCli({"dead-letters", "--db", db, "--limit", "1"});
  EXPECT_NE(limited.out.find("more dead letters"), std::string::npos) << limited.out;

  // Redrive one by id, then the rest.
  const std::string first = dead[0]["id"];
  for (const std::string bad : {"nope", "99999"}) {
    Result r = RunCli({"dead-letters", "--db", db, "--redrive", bad});
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find(bad), std::string::npos) << r.out;
    EXPECT_EQ(Lines(r.out), 1) << r.out;
  }
  ASSERT_EQ(RunCli({"dead-letters", "--db", db, "--redrive", first}).code, 0);
  EXPECT_EQ(RunCli({"dead-letters", "--db", db, "--redrive", first}).code, 2) << "redriven";
  ASSERT_EQ(DeadLetters(db).size(), 1u);
  EXPECT_EQ(DeadLetters(db)[0]["id"], dead[1]["id"]);
  Result all = RunStdout({"dead-letters", "--db", db, "--redrive-all", "--json"});
  ASSERT_EQ(all.code, 0) << all.out;
  EXPECT_EQ(nlohmann::json::parse(all.out)["redriven"], 1) << all.out;
  EXPECT_TRUE(DeadLetters(db).empty());

  Result done = RunCli({"worker", "--db", db, "--until-idle"});
  ASSERT_EQ(done.code, 0) << done.out;
  for (const std::string& id : ids) EXPECT_EQ(StatusJson(db, id)["status"], "completed") << id;
}

// `bench --workers 2`: a `runloom worker` child shares the runs with the
// bench process; the bench waits for every run, whoever executed it, and
// stops the child. Without --db there is nothing to share: exit 2.
TEST(CliBench, WorkerProcessesShareTheRunsOfADatabase) {
  const std::string dir = MakeTempDir("benchworkers");
  // --runs-in-flight is this process's and the child's (passed on).
  Result r = RunCli({"bench", "--runs", "40", "--executors", "4", "--producers", "2", "--workers",
                     "2", "--runs-in-flight", "8", "--db", dir + "/b.db", "--json"},
                    In(dir));
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json out = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(out["completed"], 40);
  EXPECT_EQ(out["workers"], 2);
  EXPECT_EQ(out["runs_in_flight"], 8);

  Result no_db = RunCli({"bench", "--runs", "1", "--workers", "2"}, In(dir));
  EXPECT_EQ(no_db.code, 2) << no_db.out;
  EXPECT_NE(no_db.out.find("--workers"), std::string::npos) << no_db.out;

  // A runaway count starts nothing: one line, exit 2.
  Result many =
      RunCli({"bench", "--runs", "1", "--workers", "100000", "--db", dir + "/m.db"}, In(dir));
  EXPECT_EQ(many.code, 2) << many.out;
  EXPECT_NE(many.out.find("at most 64"), std::string::npos) << many.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/m.db"));
}

// `bench --rate`: runs created on a schedule all come to their end; a rate
// that is not a number from 0 to 10,000,000 (negative, NaN, infinite, huge,
// text with shell metacharacters) is refused with nothing opened.
TEST(CliBench, ARateSpacesTheRunsAndABadOneIsRefused) {
  const std::string dir = MakeTempDir("benchrate");
  Result r = RunCli({"bench", "--runs", "20", "--executors", "4", "--rate", "200", "--db",
                     dir + "/r.db", "--json"},
                    In(dir));
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json out = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(out["completed"], 20);
  EXPECT_EQ(out["rate_per_s"], 200);
  // 20 runs at 200 a second: the last is due 95 ms after the start.
  EXPECT_GE(out["elapsed_s"].get<double>(), 0.09);
  for (const char* bad : {"-1", "nan", "inf", "1e300", "5; rm -rf /", "$(id)"}) {
    Result refused = RunCli({"bench", "--runs", "1", "--rate", bad, "--db", dir + "/x.db"}, In(dir));
    EXPECT_EQ(refused.code, 2) << bad << ": " << refused.out;
    EXPECT_NE(refused.out.find("--rate"), std::string::npos) << bad << ": " << refused.out;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.db"));
}

// `bench --waiting` measures one process: bad counts are refused with
// nothing opened (its figures are a benchmark's, docs/performance.md, not
// a test's).
TEST(CliBench, WaitingRefusesWhatItCannotMeasure) {
  const std::string dir = MakeTempDir("benchwaiting");
  Result workers = RunCli({"bench", "--waiting", "--runs", "10", "--workers", "2", "--db",
                           dir + "/w.db"},
                          In(dir));
  EXPECT_EQ(workers.code, 2) << workers.out;
  EXPECT_NE(workers.out.find("--workers must be 1"), std::string::npos) << workers.out;
  Result one = RunCli({"bench", "--waiting", "--runs", "1", "--db", dir + "/w.db"}, In(dir));
  EXPECT_EQ(one.code, 2) << one.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/w.db"));
}

// `bench --llm`: runs waiting on model calls hold no executor (issue 27):
// 40 runs of three 300 ms fake calls on 2 executors are all held at once
// (the sampled peak is far above the executors), and all complete. The wall
// time is a benchmark's figure (docs/performance.md), not checked here.
// Bad values of --runs-in-flight and --llm-latency are refused with nothing
// opened, on bench (with --llm and without), worker and serve alike.
TEST(CliBench, LlmRunsWaitingOnModelCallsHoldNoExecutor) {
  const std::string dir = MakeTempDir("benchllm");
  Result r = RunCli({"bench", "--llm", "--runs", "40", "--llm-latency", "300ms", "--executors",
                     "2", "--runs-in-flight", "40", "--db", dir + "/l.db", "--json"},
                    In(dir));
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json out = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(out["completed"], 40);
  EXPECT_EQ(out["runs_in_flight"], 40);
  EXPECT_GT(out["peak_runs_held"].get<int>(), 2) << out.dump();
  for (const char* bad : {"-1", "20001", "1e9", "$(id)"}) {
    for (const std::vector<std::string>& cmd :
         std::vector<std::vector<std::string>>{{"bench", "--llm"}, {"bench"}, {"worker"}, {"serve"}}) {
      std::vector<std::string> args = cmd;
      args.insert(args.end(), {"--runs-in-flight", bad, "--db", dir + "/x.db"});
      Result refused = RunCli(args, In(dir));
      const std::string what = absl::StrCat(absl::StrJoin(cmd, " "), " ", bad, ": ", refused.out);
      EXPECT_EQ(refused.code, 2) << what;
      EXPECT_NE(refused.out.find("--runs-in-flight"), std::string::npos) << what;
    }
  }
  for (const char* bad : {"-1s", "11m", "soon"}) {
    Result refused =
        RunCli({"bench", "--llm", "--llm-latency", bad, "--db", dir + "/x.db"}, In(dir));
    EXPECT_EQ(refused.code, 2) << bad << ": " << refused.out;
    EXPECT_NE(refused.out.find("--llm-latency"), std::string::npos) << bad << ": " << refused.out;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.db"));
}

}  // namespace
}  // namespace runloom::testing
