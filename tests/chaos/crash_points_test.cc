// Kill at each named crash point (core/crash_point.h), then recover: a
// `runloom run` of a 5-step exec workflow dies by SIGKILL at the point
// RUNLOOM_CRASH_AT names, and `runloom worker --until-idle` on the same
// database completes the run. Every step's side effect (a line appended to a
// file) happens once, except, for a kill before a COMMIT, the one step whose
// record that commit carried.
//
// Needs a RUNLOOM_TESTING build (crash points compile to nothing otherwise);
// tests/chaos/CMakeLists.txt registers it only there.
#include "core/crash_point.h"

#include "gtest/gtest.h"
#include "integration/cli_harness.h"
#include "sqlite3.h"

#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace runloom::testing {
namespace {

constexpr int kSteps = 5;

// "s<i>", the id of step i. Built with += because GCC 12 at -O2 reports a
// false -Wrestrict on "s" + std::to_string(i) (an error with -Werror).
std::string StepId(int i) {
  std::string id = "s";
  id += std::to_string(i);
  return id;
}

struct Case {
  CrashPoint point;
  // Which hit of the point kills. The store commits, in order: the run's
  // creation (after the workflow's registration), the lease with s1's start,
  // then one commit per step (its record and the next step's start). A hit
  // late enough that the run exists and early enough that steps remain.
  int hit;
  // Steps whose side effect may happen twice: the one whose record was in the
  // transaction a kill before COMMIT loses.
  int may_repeat;
};

void PrintTo(const Case& c, std::ostream* os) { *os << ToString(c.point) << ":" << c.hit; }

const Case kCases[] = {
    {CrashPoint::kBeforeStoreCommit, 4, 1},
    {CrashPoint::kAfterStoreCommit, 4, 0},
    {CrashPoint::kAfterStepCommit, 1, 0},
};

// The one run in `db` (read with SQLite itself: the process that made it is
// dead, and the `runs` table is a documented format, docs/formats/).
std::string OnlyRunId(const std::string& db) {
  sqlite3* h = nullptr;
  std::vector<std::string> ids;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(h, "SELECT id FROM runs", -1, &st, nullptr) == SQLITE_OK) {
      while (sqlite3_step(st) == SQLITE_ROW) {
        ids.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
      }
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(h);
  EXPECT_EQ(ids.size(), 1u) << "runs in " << db;
  return ids.empty() ? "" : ids.front();
}

class CrashPointTest : public ::testing::TestWithParam<Case> {};

TEST(CrashPoints, EveryPointHasACase) {
  for (CrashPoint p : AllCrashPoints()) {
    bool found = false;
    for (const Case& c : kCases) found = found || c.point == p;
    EXPECT_TRUE(found) << ToString(p) << " has no case in kCases";
  }
}

TEST_P(CrashPointTest, KilledRunIsCompletedByAWorkerWithoutRedoingSteps) {
  const Case& c = GetParam();
  const std::string dir = MakeTempDir("crashpoint");
  const std::string db = dir + "/crash.db";
  const std::string effects = dir + "/effects.txt";
  std::string yaml = "name: five\nsteps:\n";
  for (int i = 1; i <= kSteps; ++i) {
    const std::string id = StepId(i);
    yaml += "  - id: " + id + "\n    kind: exec\n    command: \"echo " + id + " >> " + effects +
            "; echo '{}'\"\n";
  }
  WriteFile(dir + "/five.yaml", yaml);

  const std::string at = std::string(ToString(c.point)) + ":" + std::to_string(c.hit);
  setenv("RUNLOOM_CRASH_AT", at.c_str(), 1);
  Child run({"run", dir + "/five.yaml", "--db", db, "--lease-ttl", "1s"}, dir + "/run.log");
  unsetenv("RUNLOOM_CRASH_AT");
  const std::string run_log_path = dir + "/run.log";
  ASSERT_EQ(run.Wait(), 128 + SIGKILL) << ReadFile(run_log_path);
  const std::string run_log = ReadFile(run_log_path);
  EXPECT_NE(run_log.find("crash point " + std::string(ToString(c.point)) + " hit " +
                         std::to_string(c.hit)),
            std::string::npos)
      << run_log;
  const std::string run_id = OnlyRunId(db);
  ASSERT_FALSE(run_id.empty());
  EXPECT_NE(StatusJson(db, run_id)["status"], "completed") << "the kill came too late";

  Result worker = RunCli({"worker", "--db", db, "--until-idle", "--lease-ttl", "1s"});
  EXPECT_EQ(worker.code, 0) << worker.out;
  nlohmann::json st = StatusJson(db, run_id);
  EXPECT_EQ(st["status"], "completed") << st.dump(2);

  std::map<std::string, int> runs;
  std::stringstream lines(ReadFile(effects));
  std::string line;
  while (std::getline(lines, line)) ++runs[line];
  int repeated = 0;
  for (int i = 1; i <= kSteps; ++i) {
    const int n = runs[StepId(i)];
    EXPECT_GE(n, 1) << "s" << i << " never ran";
    EXPECT_LE(n, 2) << "s" << i;
    if (n == 2) ++repeated;
  }
  EXPECT_LE(repeated, c.may_repeat) << "steps done twice after a kill at " << at;

  // The record: one step.succeeded per step.
  std::map<std::string, int> succeeded;
  for (const nlohmann::json& e : EventsJson(db, run_id)) {
    if (e["type"] == "step.succeeded") ++succeeded[e["data"].value("path", "")];
  }
  for (int i = 1; i <= kSteps; ++i) EXPECT_EQ(succeeded[StepId(i)], 1) << "s" << i;
}

INSTANTIATE_TEST_SUITE_P(AllPoints, CrashPointTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(ToString(info.param.point));
                         });

}  // namespace
}  // namespace runloom::testing
