// The CLI on PostgreSQL (the test server, a database per test): detached
// runs executed by a worker process and followed live from a third process,
// and the refusals of a server it cannot use.
#include "core/digest.h"
#include "store/postgres/pg_conn.h"
#include "store/postgres/pg_migrations.h"
#include "testing/status_matchers.h"
#include "testing/test_servers.h"

#include "absl/strings/str_cat.h"
#include "cli_harness.h"
#include "gtest/gtest.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <thread>

namespace runloom::testing {
namespace {

constexpr char kSlow[] =
    "name: slow\nsteps:\n  - {id: a, kind: noop}\n"
    "  - {id: b, kind: sleep, needs: [a], duration: 300ms}\n"
    "  - {id: c, kind: noop, needs: [b]}\n";

ChildSetup Clean(const std::string& cwd) {
  return ChildSetup{cwd, {{"RUNLOOM_DB", ""}, {"RUNLOOM_QUEUE", ""}}};
}

std::vector<nlohmann::json> JsonLines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    if (!line.empty() && line[0] == '{') out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

// Waits up to `limit` for `c`; kills it if it is still running.
int WaitOrKill(Child& c, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    int status = 0;
    pid_t done = waitpid(c.pid(), &status, WNOHANG);
    if (done == c.pid()) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  c.Kill(SIGKILL);
  return c.Wait() + 1000;  // marks the timeout
}

// `run --detach` admits; a worker process executes; `events --follow`, in a
// third process started before the worker, prints every committed event (the
// store's own list, in order) and ends when the run ends.
TEST(CliPostgres, ADetachedRunIsExecutedByAWorkerAndFollowedFromAnotherProcess) {
  absl::StatusOr<std::string> db = CreateTestPostgresDatabase("cli_detach");
  ASSERT_OK(db);
  const std::string dir = MakeTempDir("clipg");
  WriteFile(dir + "/slow.yaml", kSlow);
  Result admitted = RunCli({"run", dir + "/slow.yaml", "--detach", "--db", *db}, Clean(dir));
  ASSERT_EQ(admitted.code, 0) << admitted.out;
  const std::string id = RunIdFrom(admitted.out);
  ASSERT_FALSE(id.empty()) << admitted.out;
  EXPECT_EQ(StatusJson(*db, id)["status"], "queued");

  const std::string follow_log = dir + "/follow.txt";
  Child follower({"events", id, "--follow", "--json", "--db", *db}, follow_log, Clean(dir));
  Result worker = RunCli({"worker", "--until-idle", "--db", *db}, Clean(dir));
  ASSERT_EQ(worker.code, 0) << worker.out;
  ASSERT_EQ(WaitOrKill(follower, std::chrono::seconds(30)), 0) << ReadFile(follow_log);

  EXPECT_EQ(StatusJson(*db, id)["status"], "completed");
  const std::vector<nlohmann::json> followed = JsonLines(ReadFile(follow_log));
  const std::vector<nlohmann::json> stored = EventsJson(*db, id);
  ASSERT_FALSE(stored.empty());
  EXPECT_EQ(followed, stored);
  EXPECT_EQ(stored.back()["type"], "run.finished");
  EXPECT_EQ(std::count_if(stored.begin(), stored.end(),
                          [](const nlohmann::json& e) { return e["type"] == "step.succeeded"; }),
            3);
}

// Issue 25: `runloom prune` on PostgreSQL counts (--dry-run) and deletes the
// finished runs older than its age by the server's clock, and leaves an
// unfinished one.
TEST(CliPostgres, PruneDeletesTheFinishedRunsOlderThanItsAge) {
  absl::StatusOr<std::string> db = CreateTestPostgresDatabase("cli_prune");
  ASSERT_OK(db);
  const std::string dir = MakeTempDir("clipg_prune");
  WriteFile(dir + "/slow.yaml", kSlow);
  Result done = RunCli({"run", dir + "/slow.yaml", "--db", *db}, Clean(dir));
  ASSERT_EQ(done.code, 0) << done.out;
  const std::string finished = RunIdFrom(done.out);
  Result admitted = RunCli({"run", dir + "/slow.yaml", "--detach", "--db", *db}, Clean(dir));
  ASSERT_EQ(admitted.code, 0) << admitted.out;
  const std::string queued = RunIdFrom(admitted.out);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));

  Result dry =
      RunCli({"prune", "--older-than", "1s", "--dry-run", "--json", "--db", *db}, Clean(dir));
  ASSERT_EQ(dry.code, 0) << dry.out;
  const std::vector<nlohmann::json> counted = JsonLines(dry.out);
  ASSERT_EQ(counted.size(), 1u) << dry.out;
  EXPECT_EQ(counted[0]["runs"], 1) << dry.out;
  EXPECT_EQ(StatusJson(*db, finished)["status"], "completed");

  Result pruned = RunCli({"prune", "--older-than", "1s", "--json", "--db", *db}, Clean(dir));
  ASSERT_EQ(pruned.code, 0) << pruned.out;
  const std::vector<nlohmann::json> deleted = JsonLines(pruned.out);
  ASSERT_EQ(deleted.size(), 1u) << pruned.out;
  EXPECT_EQ(deleted[0]["runs"], 1);
  EXPECT_EQ(deleted[0]["rows"], counted[0]["rows"]);
  EXPECT_EQ(RunCli({"status", finished, "--db", *db}, Clean(dir)).code, 2);
  EXPECT_EQ(StatusJson(*db, queued)["status"], "queued");
}

// A server that does not answer, and a database whose runloom schema is
// newer than this binary: one line, exit 2, nothing written.
TEST(CliPostgres, AnUnreachableServerOrANewerSchemaExitsTwoWithOneLine) {
  const std::string dir = MakeTempDir("clipgbad");
  Result down = RunCli({"runs", "--db", "postgres://runloom:secret@127.0.0.1:1/none"}, Clean(dir));
  EXPECT_EQ(down.code, 2) << down.out;
  EXPECT_EQ(std::count(down.out.begin(), down.out.end(), '\n'), 1) << down.out;
  EXPECT_NE(down.out.find("127.0.0.1:1"), std::string::npos) << down.out;
  EXPECT_EQ(down.out.find("secret"), std::string::npos) << down.out;

  absl::StatusOr<std::string> db = CreateTestPostgresDatabase("cli_newer");
  ASSERT_OK(db);
  ASSERT_EQ(RunCli({"runs", "--db", *db}, Clean(dir)).code, 0);  // creates the schema
  {
    absl::StatusOr<std::unique_ptr<store_internal::PgConn>> c =
        store_internal::PgConn::Connect(*db, "");
    ASSERT_OK(c);
    ASSERT_OK(
        (*c)->ExecScript("UPDATE runloom.meta SET value = '99' WHERE key = 'schema_version'"));
  }
  WriteFile(dir + "/slow.yaml", kSlow);
  Result newer = RunCli({"run", dir + "/slow.yaml", "--detach", "--db", *db}, Clean(dir));
  EXPECT_EQ(newer.code, 2) << newer.out;
  EXPECT_EQ(std::count(newer.out.begin(), newer.out.end(), '\n'), 1) << newer.out;
  EXPECT_NE(newer.out.find("schema version 99"), std::string::npos) << newer.out;
  Result runs = RunStdout({"runs", "--db", *db, "--json"});
  EXPECT_EQ(runs.code, 2);  // still refused: nothing was admitted
}

// `runloom token` on PostgreSQL (schema version 5): the token is printed
// once; the tokens table holds its hash, and no later output shows either.
TEST(CliPostgres, TokensAreStoredAsHashesAndShownOnce) {
  absl::StatusOr<std::string> db = CreateTestPostgresDatabase("cli_tokens");
  ASSERT_OK(db);
  const std::string dir = MakeTempDir("clipgtok");
  Result created = RunStdout({"token", "create", "--name", "ci", "--role", "admin", "--db", *db});
  ASSERT_EQ(created.code, 0) << created.out;
  const std::string token = created.out.substr(0, created.out.find('\n'));
  ASSERT_EQ(token.size(), 3u + 64u) << created.out;
  const std::string hash = Sha256Hex(token);
  Result list = RunCli({"token", "list", "--db", *db}, Clean(dir));
  EXPECT_EQ(list.code, 0) << list.out;
  EXPECT_NE(list.out.find("admin"), std::string::npos) << list.out;
  Result revoked = RunCli({"token", "revoke", "ci", "--db", *db}, Clean(dir));
  EXPECT_EQ(revoked.code, 0) << revoked.out;
  Result again = RunCli({"token", "revoke", "ci", "--db", *db}, Clean(dir));
  EXPECT_EQ(again.code, 2) << again.out;
  for (const Result* r : {&list, &revoked, &again}) {
    EXPECT_EQ(r->out.find(token), std::string::npos) << r->out;
    EXPECT_EQ(r->out.find(hash), std::string::npos) << r->out;
  }
  absl::StatusOr<std::unique_ptr<store_internal::PgConn>> c =
      store_internal::PgConn::Connect(*db, "");
  ASSERT_OK(c);
  static constexpr char kRows[] =
      "SELECT count(*) FILTER (WHERE hash = $1), count(*) FILTER (WHERE hash = $2 OR name = $2 "
      "OR id = $2), count(*) FILTER (WHERE revoked_at IS NOT NULL) FROM runloom.tokens";
  absl::StatusOr<store_internal::PgResult> r =
      (*c)->Exec(kRows, store_internal::PgParams().Text(hash).Text(token));
  ASSERT_OK(r);
  EXPECT_EQ(r->row(0).ColumnInt(0), 1);  // the hash is stored
  EXPECT_EQ(r->row(0).ColumnInt(1), 0);  // the token is not
  EXPECT_EQ(r->row(0).ColumnInt(2), 1);  // and it is revoked
}

// A database of schema version 4 (before tokens and the write-operations
// ledger) gets both tables on its next open (and every later migration),
// and keeps its runs.
TEST(CliPostgres, AVersion4DatabaseMigratesToTheLatest) {
  absl::StatusOr<std::string> db = CreateTestPostgresDatabase("cli_v4");
  ASSERT_OK(db);
  const std::string dir = MakeTempDir("clipgv4");
  WriteFile(dir + "/slow.yaml", kSlow);
  Result admitted = RunCli({"run", dir + "/slow.yaml", "--detach", "--db", *db}, Clean(dir));
  ASSERT_EQ(admitted.code, 0) << admitted.out;
  const std::string id = RunIdFrom(admitted.out);
  absl::StatusOr<std::unique_ptr<store_internal::PgConn>> c =
      store_internal::PgConn::Connect(*db, "");
  ASSERT_OK(c);
  ASSERT_OK(
      (*c)->ExecScript("DROP TABLE runloom.tokens; UPDATE runloom.meta SET value = '4' "
                       "WHERE key = 'schema_version'"));
  Result created = RunStdout({"token", "create", "--name", "ci", "--role", "viewer", "--db", *db});
  EXPECT_EQ(created.code, 0) << created.out;
  static constexpr char kVersion[] =
      "SELECT value::bigint, (SELECT count(*) FROM runloom.tokens),"
      " (SELECT count(*) FROM runloom.write_operations) FROM runloom.meta "
      "WHERE key = 'schema_version'";
  absl::StatusOr<store_internal::PgResult> r = (*c)->Exec(kVersion);
  ASSERT_OK(r);
  EXPECT_EQ(r->row(0).ColumnInt(0), store_internal::LatestPostgresSchemaVersion());
  EXPECT_EQ(r->row(0).ColumnInt(1), 1);
  EXPECT_EQ(r->row(0).ColumnInt(2), 0);
  EXPECT_EQ(StatusJson(*db, id)["status"], "queued");
}

// Poison (issue 22.6, reference 002) on PostgreSQL: a pinned workflow whose
// stored text no longer decodes, and one that decodes to something that is
// no workflow, each fail their run once with the reason; a worker goes on.
TEST(CliPostgres, ARunWhosePinnedWorkflowNoLongerParsesFailsWithTheReason) {
  absl::StatusOr<std::string> db = CreateTestPostgresDatabase("cli_poison");
  ASSERT_OK(db);
  const std::string dir = MakeTempDir("clipgpoison");
  std::vector<std::string> ids;
  for (const char* name : {"torn", "alien", "fine"}) {
    WriteFile(absl::StrCat(dir, "/", name, ".yaml"),
              absl::StrCat("name: ", name, "\nsteps:\n  - {id: a, kind: noop}\n"));
    Result admitted =
        RunCli({"run", absl::StrCat(dir, "/", name, ".yaml"), "--detach", "--db", *db}, Clean(dir));
    ASSERT_EQ(admitted.code, 0) << admitted.out;
    ids.push_back(RunIdFrom(admitted.out));
  }
  absl::StatusOr<std::unique_ptr<store_internal::PgConn>> c =
      store_internal::PgConn::Connect(*db, "");
  ASSERT_OK(c);
  ASSERT_OK((*c)->ExecScript(
      "UPDATE runloom.workflows SET canonical = '{\"name\": \"torn\", \"st' WHERE name = 'torn';"
      "UPDATE runloom.workflows SET canonical = '{\"name\": \"alien\", \"steps\": 7}' "
      "WHERE name = 'alien'"));
  Result worker = RunCli({"worker", "--until-idle", "--db", *db}, Clean(dir));
  ASSERT_EQ(worker.code, 0) << worker.out;
  const nlohmann::json torn = StatusJson(*db, ids[0]);
  EXPECT_EQ(torn["status"], "failed") << torn.dump(2);
  EXPECT_NE(torn["error"].get<std::string>().find("no longer decodes"), std::string::npos)
      << torn.dump(2);
  const nlohmann::json alien = StatusJson(*db, ids[1]);
  EXPECT_EQ(alien["status"], "failed") << alien.dump(2);
  EXPECT_NE(alien["error"].get<std::string>().find("changed under its pinned digest"),
            std::string::npos)
      << alien.dump(2);
  for (const nlohmann::json& st : {torn, alien}) {
    EXPECT_EQ(st["attempts"], 1) << "failed at once, not retried: " << st.dump(2);
  }
  EXPECT_EQ(StatusJson(*db, ids[2])["status"], "completed");
}

}  // namespace
}  // namespace runloom::testing
