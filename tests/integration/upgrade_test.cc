// Issue 25, "Upgrades from real older versions": databases written by older
// binaries of this repository (tests/upgrade/fixtures/<commit>/, made by
// tests/upgrade/make_fixture.sh with a binary built from that commit) are
// opened by today's binary. Each holds a finished run, a run paused at a
// gate, a queued run and a running one whose process was SIGKILLed (its
// lease long expired). Today's binary migrates the database, reads the
// finished run as the old binary did, takes the old digest's decision,
// recovers the expired run (its finished first step is not run again) and
// executes everything to completion.
#include "store/postgres/pg_conn.h"
#include "testing/status_matchers.h"
#include "testing/test_servers.h"

#include "absl/strings/str_cat.h"
#include "cli_harness.h"
#include "gtest/gtest.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace runloom::testing {
namespace {

using json = nlohmann::json;

struct Fixture {
  std::string name;  // the commit
  std::filesystem::path dir;
};

// Every fixture directory holding `file` (runloom.db or runloom.sql).
std::vector<Fixture> FixturesWith(const std::string& file) {
  std::vector<Fixture> out;
  const std::filesystem::path root = std::filesystem::path(SourceDir()) / "tests/upgrade/fixtures";
  for (const auto& e : std::filesystem::directory_iterator(root)) {
    if (std::filesystem::exists(e.path() / file)) out.push_back({e.path().filename(), e.path()});
  }
  std::sort(out.begin(), out.end(),
            [](const Fixture& a, const Fixture& b) { return a.name < b.name; });
  return out;
}

// Every field the old binary printed reads the same today. `context` was
// the stored JSON blob; today's wire form names its fields instead (its
// working_dir is not shown), so it is left out.
void ExpectSameAsBefore(const json& before, const json& now, const std::string& path) {
  if (before.is_object()) {
    ASSERT_TRUE(now.is_object()) << path;
    for (const auto& [k, v] : before.items()) {
      if (path.empty() && k == "context") continue;
      ASSERT_TRUE(now.contains(k)) << path << "/" << k << " is gone";
      ExpectSameAsBefore(v, now[k], path + "/" + k);
    }
  } else if (before.is_array()) {
    ASSERT_TRUE(now.is_array() && now.size() == before.size()) << path;
    for (size_t i = 0; i < before.size(); ++i) {
      ExpectSameAsBefore(before[i], now[i], absl::StrCat(path, "[", i, "]"));
    }
  } else {
    EXPECT_EQ(before, now) << path;
  }
}

// The whole upgrade on `db` (a copy of the fixture, or the database its dump
// was loaded into).
void UpgradeAndCarryOn(const Fixture& f, const std::string& db) {
  SCOPED_TRACE(f.name);
  const json runs = json::parse(ReadFile((f.dir / "runs.json").string()));
  const json finished_before = json::parse(ReadFile((f.dir / "finished.json").string()));
  const std::string finished = runs["finished"];
  const std::string paused = runs["paused"];
  const std::string queued = runs["queued"];
  const std::string expired = runs["expired"];

  ExpectSameAsBefore(finished_before, StatusJson(db, finished), "");
  EXPECT_EQ(StatusJson(db, paused)["status"], "paused");
  EXPECT_EQ(StatusJson(db, queued)["status"], "queued");
  EXPECT_EQ(StatusJson(db, expired)["status"], "running");

  Result decided = RunCli({"decide", paused, "--db", db, "--digest", runs["digest"], "--approve"});
  ASSERT_EQ(decided.code, 0) << decided.out;
  Result worker = RunCli({"worker", "--db", db, "--until-idle"});
  ASSERT_EQ(worker.code, 0) << worker.out;
  for (const std::string& id : {paused, queued, expired}) {
    EXPECT_EQ(StatusJson(db, id)["status"], "completed") << id << "\n" << worker.out;
  }
  // The killed run: its first step finished before the kill and is not run
  // again; its second, cut by the kill, is.
  const json slow = StatusJson(db, expired);
  for (const json& s : slow["steps"]) {
    if (s["path"] == "first") {
      EXPECT_EQ(s["attempt"], 1) << s.dump();
    }
  }
  ExpectSameAsBefore(finished_before, StatusJson(db, finished), "");
}

TEST(Upgrade, SqliteDatabasesOfOlderBinariesMigrateAndCarryOn) {
  const std::vector<Fixture> fixtures = FixturesWith("runloom.db");
  ASSERT_GE(fixtures.size(), 3u)
      << "tests/upgrade/fixtures/ holds fewer than three SQLite fixtures";
  for (const Fixture& f : fixtures) {
    const std::string dir = MakeTempDir("upgrade-" + f.name);
    const std::string db = dir + "/runloom.db";
    std::filesystem::copy_file(f.dir / "runloom.db", db);
    UpgradeAndCarryOn(f, db);
  }
}

TEST(Upgrade, PostgresDumpsOfOlderBinariesMigrateAndCarryOn) {
  const std::vector<Fixture> fixtures = FixturesWith("runloom.sql");
  ASSERT_GE(fixtures.size(), 3u)
      << "tests/upgrade/fixtures/ holds fewer than three PostgreSQL dumps";
  for (const Fixture& f : fixtures) {
    absl::StatusOr<std::string> db = CreateTestPostgresDatabase("upgrade_" + f.name);
    ASSERT_OK(db);
    absl::StatusOr<std::unique_ptr<store_internal::PgConn>> conn =
        store_internal::PgConn::Connect(*db, "");
    ASSERT_OK(conn);
    ASSERT_OK((*conn)->ExecScript(ReadFile((f.dir / "runloom.sql").string())));
    conn->reset();
    UpgradeAndCarryOn(f, *db);
  }
}

// The schema version the refusal tests write: above any this binary knows.
constexpr int kFutureVersion = 1000;

// A database a NEWER binary migrated is refused by this one: each command
// exits 2 with one line naming the version, and `state()` (what a command
// could have changed) reads the same after it as before.
void ExpectRefusedAndLeftAlone(const Fixture& f, const std::string& db,
                               const std::function<std::string()>& state) {
  const json runs = json::parse(ReadFile((f.dir / "runs.json").string()));
  const std::string before = state();
  const std::vector<std::vector<std::string>> commands = {
      {"status", runs["finished"], "--db", db},
      {"decide", runs["paused"], "--db", db, "--digest", runs["digest"], "--approve"},
      {"worker", "--db", db, "--until-idle"},
  };
  for (const std::vector<std::string>& args : commands) {
    Result r = RunCli(args);
    EXPECT_EQ(r.code, 2) << args[0] << ": " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << args[0] << ": " << r.out;
    EXPECT_NE(r.out.find(absl::StrCat("schema version ", kFutureVersion)), std::string::npos)
        << args[0] << ": " << r.out;
    EXPECT_TRUE(state() == before) << args[0] << " changed " << db;
  }
}

// The newest fixture with its version set to kFutureVersion stands for a
// database of a newer binary; the file stays byte for byte as it was.
TEST(Upgrade, ASqliteDatabaseNewerThanThisBinaryIsRefusedAndLeftAlone) {
  const std::vector<Fixture> fixtures = FixturesWith("runloom.db");
  ASSERT_FALSE(fixtures.empty());
  const std::string db = MakeTempDir("upgrade-newer") + "/runloom.db";
  std::filesystem::copy_file(fixtures.back().dir / "runloom.db", db);
  {
    // PRAGMA user_version is the big-endian 32-bit integer at byte 60 of
    // the header (https://www.sqlite.org/fileformat.html#user_version_number).
    std::fstream file(db, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(60);
    const char version[4] = {0, 0, static_cast<char>(kFutureVersion >> 8),
                             static_cast<char>(kFutureVersion & 0xff)};
    file.write(version, 4);
    ASSERT_TRUE(file.good());
  }
  ExpectRefusedAndLeftAlone(fixtures.back(), db, [&] { return ReadFile(db); });
}

// On PostgreSQL: the version row, the runs' statuses and the event log.
TEST(Upgrade, APostgresDatabaseNewerThanThisBinaryIsRefusedAndLeftAlone) {
  const std::vector<Fixture> fixtures = FixturesWith("runloom.sql");
  ASSERT_FALSE(fixtures.empty());
  absl::StatusOr<std::string> db = CreateTestPostgresDatabase("upgrade_newer");
  ASSERT_OK(db);
  absl::StatusOr<std::unique_ptr<store_internal::PgConn>> conn =
      store_internal::PgConn::Connect(*db, "");
  ASSERT_OK(conn);
  ASSERT_OK((*conn)->ExecScript(ReadFile((fixtures.back().dir / "runloom.sql").string())));
  ASSERT_OK((*conn)->ExecScript(absl::StrCat("UPDATE runloom.meta SET value = '", kFutureVersion,
                                             "' WHERE key = 'schema_version'")));
  ExpectRefusedAndLeftAlone(fixtures.back(), *db, [&]() -> std::string {
    absl::StatusOr<store_internal::PgResult> r = (*conn)->Exec(
        "SELECT (SELECT value FROM runloom.meta WHERE key = 'schema_version') || ' ' ||"
        " (SELECT string_agg(id || ':' || status, ',' ORDER BY id) FROM runloom.runs) || ' ' ||"
        " (SELECT count(*) FROM runloom.run_events)");
    return r.ok() ? r->row(0).ColumnText(0) : r.status().ToString();
  });
}

}  // namespace
}  // namespace runloom::testing
