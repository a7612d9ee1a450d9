// End-to-end tests of `runloom --db postgres://… --queue redis://…` (issue 9,
// "Redis Streams transport"; acceptance 4's Redis paths): detached runs
// travel on the stream to a worker, a message past the retry cap is
// dead-lettered, listed and redriven to completion, and a queue that cannot
// be used is one error line with nothing written.
#include "runloom/backend.h"
#include "runloom/clock.h"

#include "testing/own_redis.h"
#include "testing/tcp_probe.h"
#include "testing/test_servers.h"

#include "absl/strings/str_cat.h"
#include "claim_and_die.h"
#include "cli_harness.h"
#include "gtest/gtest.h"

#include <atomic>
#include <set>

namespace runloom::testing {
namespace {

constexpr char kNoop[] = "name: noop\nsteps:\n  - {id: a, kind: noop}\n";

class CliRedisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<TestServers> servers = GetTestServers();
    ASSERT_TRUE(servers.ok()) << servers.status();
    queue_ = servers->redis_url;
    static std::atomic<int> counter{0};
    absl::StatusOr<std::string> db =
        CreateTestPostgresDatabase(absl::StrCat("cli_redis_", counter++));
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *db;
    dir_ = MakeTempDir("cli_redis");
    WriteFile(dir_ + "/noop.yaml", kNoop);
  }

  // Admits `n` detached runs on the Redis queue; returns their ids.
  std::set<std::string> Detach(int n) {
    std::set<std::string> ids;
    for (int i = 0; i < n; ++i) {
      Result r =
          RunStdout({"run", dir_ + "/noop.yaml", "--db", db_, "--queue", queue_, "--detach"});
      EXPECT_EQ(r.code, 0) << r.out;
      ids.insert(r.out.substr(0, r.out.find('\n')));
    }
    return ids;
  }
  Result Worker(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"worker", "--db", db_, "--queue", queue_, "--until-idle"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunCli(args);
  }

  std::string queue_;
  std::string db_;
  std::string dir_;
};

TEST_F(CliRedisTest, DetachedRunsTravelOnTheStreamToAWorker) {
  const std::set<std::string> ids = Detach(3);
  ASSERT_EQ(ids.size(), 3u);
  for (const std::string& id : ids) EXPECT_EQ(StatusJson(db_, id)["status"], "queued");
  Result worker = Worker();
  ASSERT_EQ(worker.code, 0) << worker.out;
  for (const std::string& id : ids) EXPECT_EQ(StatusJson(db_, id)["status"], "completed") << id;
}

// Issue 9, acceptance 4: killed between claiming a message and taking the
// lease; the message is delivered again after its visibility timeout.
TEST_F(CliRedisTest, KilledBetweenClaimAndLeaseTheRunIsDeliveredAgain) {
  const std::set<std::string> ids = Detach(2);
  ClaimAndDie(db_, 2, queue_);
  Result worker = Worker();
  ASSERT_EQ(worker.code, 0) << worker.out;
  for (const std::string& id : ids) {
    const nlohmann::json st = StatusJson(db_, id);
    EXPECT_EQ(st["status"], "completed") << id;
    // Delivered twice, counted once: step counts are distinct records.
    EXPECT_EQ(st["step_counts"],
              nlohmann::json(
                  {{"revision", 1}, {"succeeded", 1}, {"failed", 0}, {"skipped", 0}, {"total", 1}}))
        << st.dump(2);
  }
}

TEST_F(CliRedisTest, MessagePastTheCapIsDeadLetteredListedAndRedrivenToCompletion) {
  const std::set<std::string> ids = Detach(2);
  ClaimAndDie(db_, 2, queue_);
  Result worker = Worker({"--max-deliveries", "1"});
  EXPECT_EQ(worker.code, 0) << worker.out;
  Result listed = RunStdout({"dead-letters", "--db", db_, "--queue", queue_, "--json"});
  ASSERT_EQ(listed.code, 0) << listed.out;
  const nlohmann::json dead = nlohmann::json::parse(listed.out)["dead_letters"];
  ASSERT_EQ(dead.size(), 2u) << worker.out;
  for (const nlohmann::json& d : dead) {
    EXPECT_TRUE(ids.contains(d["run_id"].get<std::string>())) << d.dump();
    EXPECT_NE(d["reason"].get<std::string>().find("cap is 1"), std::string::npos) << d.dump();
  }
  for (const std::string& id : ids) EXPECT_EQ(StatusJson(db_, id)["status"], "queued");
  Result all = RunCli({"dead-letters", "--db", db_, "--queue", queue_, "--redrive-all"});
  ASSERT_EQ(all.code, 0) << all.out;
  Result done = Worker();
  ASSERT_EQ(done.code, 0) << done.out;
  for (const std::string& id : ids) EXPECT_EQ(StatusJson(db_, id)["status"], "completed") << id;
}

// Issue 9, acceptance 4: Redis restarted with no persistence while runs are
// queued; the worker's reconciler restores every one from the database.
TEST_F(CliRedisTest, RedisRestartedWithoutPersistenceWhileRunsAreQueued) {
  OwnRedis own;
  ASSERT_TRUE(own.Start().ok());
  queue_ = own.url();
  const std::set<std::string> ids = Detach(3);
  ASSERT_EQ(ids.size(), 3u);
  own.Kill();
  ASSERT_TRUE(own.Start().ok());  // empty: the messages are gone
  Result worker = Worker({"--queued-grace", "1s"});
  ASSERT_EQ(worker.code, 0) << worker.out;
  for (const std::string& id : ids) EXPECT_EQ(StatusJson(db_, id)["status"], "completed") << id;
}

TEST_F(CliRedisTest, AQueueThatCannotBeUsedExitsTwoWritingNothing) {
  absl::StatusOr<int> closed = ClosedLoopbackPort();
  ASSERT_TRUE(closed.ok());
  const std::string down = absl::StrCat("redis://127.0.0.1:", *closed);
  Result r = RunCli({"run", dir_ + "/noop.yaml", "--db", db_, "--queue", down, "--detach"});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(absl::StrCat("127.0.0.1:", *closed)), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  Result none = RunStdout({"runs", "--db", db_, "--json"});
  EXPECT_EQ(none.code, 0) << none.out;
  EXPECT_EQ(none.out.find("\"id\""), std::string::npos) << "no run admitted: " << none.out;

  const std::string sqlite = dir_ + "/q.db";
  Result s = RunCli({"run", dir_ + "/noop.yaml", "--db", sqlite, "--queue", queue_});
  EXPECT_EQ(s.code, 2) << s.out;
  EXPECT_NE(s.out.find("needs a PostgreSQL store"), std::string::npos) << s.out;
  EXPECT_FALSE(std::filesystem::exists(sqlite));
}

}  // namespace
}  // namespace runloom::testing
