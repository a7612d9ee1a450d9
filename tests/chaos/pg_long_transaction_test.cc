// Issue 9, acceptance 6: a transaction that holds a run's row lock and
// blocks a step's write is terminated by the PostgreSQL backend's
// long-transaction sweep, and the run proceeds; old transactions that block
// nobody, and a blocking one in another database, are left alone.
#include "runloom/engine.h"
#include "runloom/postgres.h"

#include "store/postgres/pg_conn.h"
#include "store/postgres/pg_sweep.h"
#include "testing/capturing_logger.h"
#include "testing/engine_test_util.h"
#include "testing/status_matchers.h"
#include "testing/test_servers.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include <iostream>
#include <libpq-fe.h>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

namespace runloom::chaos {
namespace {

constexpr absl::Duration kLimit = absl::Seconds(1);
constexpr absl::Duration kSweepInterval = absl::Milliseconds(100);

// One libpq connection of the test's own (never the store's pool).
class TestSession {
 public:
  // `application_name` marks it in pg_stat_activity and in the sweep's log.
  TestSession(const std::string& url, const std::string& application_name) {
    const std::string conninfo = absl::StrCat(url, url.find('?') == std::string::npos ? "?" : "&",
                                              "application_name=", application_name);
    conn_.reset(PQconnectdb(conninfo.c_str()));
    EXPECT_EQ(PQstatus(conn_.get()), CONNECTION_OK) << PQerrorMessage(conn_.get());
  }

  // Runs `sql` (no parameters); true when it succeeded.
  bool Exec(const std::string& sql) {
    PGresult* r = PQexec(conn_.get(), sql.c_str());
    const ExecStatusType st = PQresultStatus(r);
    last_error_ = PQresultErrorMessage(r);
    PQclear(r);
    return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
  }
  // Sends `sql` without waiting for it (a statement that will wait on a lock).
  bool Send(const std::string& sql) { return PQsendQuery(conn_.get(), sql.c_str()) == 1; }
  // True while a sent statement has not finished.
  bool Busy() {
    PQconsumeInput(conn_.get());
    return PQisBusy(conn_.get()) == 1;
  }
  // Reads the results of a sent statement; true when it succeeded.
  bool Finish() {
    bool ok = true;
    while (PGresult* r = PQgetResult(conn_.get())) {
      const ExecStatusType st = PQresultStatus(r);
      ok = ok && (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK);
      PQclear(r);
    }
    return ok;
  }
  // Whether the session is alive and still inside its transaction: a cheap
  // statement in it succeeds.
  bool AliveInTransaction() {
    return PQtransactionStatus(conn_.get()) == PQTRANS_INTRANS && Exec("SELECT 1") &&
           PQtransactionStatus(conn_.get()) == PQTRANS_INTRANS;
  }
  int pid() const { return PQbackendPID(conn_.get()); }
  const std::string& last_error() const { return last_error_; }

 private:
  std::unique_ptr<PGconn, decltype(&PQfinish)> conn_{nullptr, &PQfinish};
  std::string last_error_;
};

TEST(PgLongTransactionSweep, TerminatesOnlyTheOldBlockerAndTheRunProceeds) {
  absl::StatusOr<std::string> url = testing::CreateTestPostgresDatabase("long_txn");
  ASSERT_OK(url);
  absl::StatusOr<std::string> other_url = testing::CreateTestPostgresDatabase("long_txn_other");
  ASSERT_OK(other_url);

  testing::CapturingLogger log;
  PostgresOptions po;
  po.long_transaction_limit = kLimit;
  po.long_transaction_sweep_interval = kSweepInterval;
  po.logger = &log;
  absl::StatusOr<Backend> backend = OpenPostgres(*url, po);
  ASSERT_OK(backend);

  auto kind = std::make_shared<CountingKind>();
  EngineOptions eo;
  std::shared_ptr<StepRegistry> registry = StepRegistry::WithBuiltins();
  registry->Register("block", kind);
  eo.registry = registry;
  eo.executors = 1;
  eo.env.logger = &log;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Open(eo, *std::move(backend));
  ASSERT_OK(engine);

  absl::StatusOr<Workflow> wf = LoadWorkflowYaml(R"(
name: locked
steps:
  - {id: first, kind: block, block: true}
  - {id: second, kind: block}
)",
                                                 "locked.yaml");
  ASSERT_OK(wf);
  absl::StatusOr<CreateRunResult> started = (*engine)->StartRun({.workflow = *wf});
  ASSERT_OK(started);
  const std::string run_id = started->run.id;
  (*engine)->Start();
  ASSERT_TRUE(kind->entered.WaitForNotificationWithTimeout(absl::Seconds(10)));

  // Old transactions that block nobody: one idle in its transaction, one
  // holding a row lock nobody asks for.
  TestSession idle(*url, "test-idle");
  ASSERT_TRUE(idle.Exec("BEGIN; SELECT 1"));
  TestSession unwanted(*url, "test-unwanted");
  ASSERT_TRUE(
      unwanted.Exec("CREATE TABLE public.unwanted (id int); INSERT INTO unwanted VALUES (1)"));
  ASSERT_TRUE(unwanted.Exec("BEGIN; SELECT id FROM public.unwanted FOR UPDATE"));
  // An old transaction that blocks another session, in another database.
  TestSession elsewhere(*other_url, "test-elsewhere");
  TestSession elsewhere_waiter(*other_url, "test-elsewhere-waiter");
  ASSERT_TRUE(elsewhere.Exec("CREATE TABLE public.t (id int)"));
  ASSERT_TRUE(elsewhere.Exec("BEGIN; LOCK TABLE public.t IN ACCESS EXCLUSIVE MODE"));
  ASSERT_TRUE(elsewhere_waiter.Send("SELECT * FROM public.t"));
  // The blocker: the run's row, locked as the store's writes lock it.
  TestSession blocker(*url, "test-blocker");
  ASSERT_TRUE(blocker.Exec(
      absl::StrCat("BEGIN; SELECT id FROM runloom.runs WHERE id = '", run_id, "' FOR UPDATE")));
  const int blocker_pid = blocker.pid();  // libpq forgets it once the connection is lost

  // Past the limit, while nobody waits on it, the blocker is old but blocks
  // nobody: it stays.
  RealClock()->SleepFor(kLimit + 3 * kSweepInterval);
  EXPECT_TRUE(blocker.AliveInTransaction()) << blocker.last_error();
  EXPECT_EQ(log.Count(LogLevel::kWarning, "terminated backend"), 0);

  // The step finishes; its write waits on the row lock until the sweep
  // terminates the blocker; then the run goes on to the end.
  kind->release.Notify();
  absl::StatusOr<RunRecord> done =
      (*engine)->AwaitRun(run_id, RealClock()->Now() + absl::Seconds(20));
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCompleted);
  EXPECT_EQ(kind->count.load(), 2);  // each step once

  EXPECT_FALSE(blocker.AliveInTransaction());
  EXPECT_TRUE(idle.AliveInTransaction()) << idle.last_error();
  EXPECT_TRUE(unwanted.AliveInTransaction()) << unwanted.last_error();
  EXPECT_TRUE(elsewhere.AliveInTransaction()) << elsewhere.last_error();
  EXPECT_TRUE(elsewhere_waiter.Busy());  // still waiting: its blocker was not touched
  ASSERT_TRUE(elsewhere.Exec("ROLLBACK"));
  EXPECT_TRUE(elsewhere_waiter.Finish());

  // One line, for the blocker only, naming what it blocked.
  EXPECT_EQ(log.Count(LogLevel::kWarning, "terminated backend"), 1);
  const std::string expected =
      absl::StrCat("PostgreSQL long-transaction sweep: terminated backend ", blocker_pid,
                   " (application_name 'test-blocker', client ");
  EXPECT_EQ(log.Count(LogLevel::kWarning, expected), 1);
  for (const testing::CapturingLogger::Line& line : log.lines()) {
    if (line.message.find("terminated backend") != std::string::npos) {
      std::cerr << line.message << "\n";  // what an operator sees
      EXPECT_NE(line.message.find(", blocking backends "), std::string::npos) << line.message;
      EXPECT_NE(line.message.find(", transaction open "), std::string::npos) << line.message;
    }
  }
  (*engine)->Stop();
}

// A session that holds a table lock, and one that waits on it, in a fresh
// database; `sweeper` connects as `role` ("" = the test server's own).
struct LockedTable {
  explicit LockedTable(const std::string& db_url)
      : holder(db_url, "test-holder"), waiter(db_url, "test-waiter") {
    EXPECT_TRUE(holder.Exec("CREATE TABLE public.t (id int)"));
    EXPECT_TRUE(holder.Exec("BEGIN; LOCK TABLE public.t IN ACCESS EXCLUSIVE MODE"));
    EXPECT_TRUE(waiter.Send("SELECT * FROM public.t"));
    // The waiter's lock request is visible to pg_blocking_pids once it waits.
    for (int i = 0; i < 200 && !Waiting(db_url); ++i) {
      RealClock()->SleepFor(absl::Milliseconds(5));
    }
  }
  bool Waiting(const std::string& db_url) {
    TestSession probe(db_url, "test-probe");
    return probe.Exec(
        absl::StrCat("DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_locks WHERE pid = ", waiter.pid(),
                     " AND NOT granted) THEN RAISE 'no'; END IF; END $$"));
  }
  TestSession holder;
  TestSession waiter;
};

TEST(PgLongTransactionSweep, SweepsByAgeAndReportsWhatItTerminated) {
  absl::StatusOr<std::string> url = testing::CreateTestPostgresDatabase("long_txn_direct");
  ASSERT_OK(url);
  LockedTable locked(*url);
  const int holder_pid = locked.holder.pid();
  absl::StatusOr<std::unique_ptr<store_internal::PgConn>> c =
      store_internal::PgConn::Connect(*url, "");
  ASSERT_OK(c);
  testing::CapturingLogger log;

  // Younger than the limit: it blocks, but stays.
  absl::StatusOr<std::vector<store_internal::TerminatedBackend>> swept =
      store_internal::SweepLongTransactions(**c, absl::Hours(1), &log);
  ASSERT_OK(swept);
  EXPECT_TRUE(swept->empty());
  EXPECT_TRUE(locked.holder.AliveInTransaction());

  RealClock()->SleepFor(absl::Milliseconds(50));
  swept = store_internal::SweepLongTransactions(**c, absl::Milliseconds(10), &log);
  ASSERT_OK(swept);
  ASSERT_EQ(swept->size(), 1u);
  const store_internal::TerminatedBackend& t = (*swept)[0];
  EXPECT_EQ(t.pid, holder_pid);
  EXPECT_EQ(t.application_name, "test-holder");
  EXPECT_EQ(t.client.rfind("127.0.0.1:", 0), 0u) << t.client;
  EXPECT_GE(t.transaction_age, absl::Milliseconds(50));
  EXPECT_EQ(t.blocked_pids, std::vector<int64_t>{locked.waiter.pid()});
  EXPECT_EQ(log.Count(LogLevel::kWarning, store_internal::DescribeTermination(t)), 1);
  EXPECT_TRUE(locked.waiter.Finish());  // the lock is gone: the waiter's SELECT ran
  EXPECT_FALSE(locked.holder.AliveInTransaction());
}

TEST(PgLongTransactionSweep, ARefusedTerminationIsLoggedAndNothingIsTerminated) {
  absl::StatusOr<std::string> url = testing::CreateTestPostgresDatabase("long_txn_refused");
  ASSERT_OK(url);
  LockedTable locked(*url);  // the holder is the test server's superuser
  // A role that may see every session (pg_read_all_stats) but not signal a
  // superuser's.
  const std::string role = absl::StrCat("rl_sweep_weak_", getpid());
  TestSession admin(*url, "test-admin");
  ASSERT_TRUE(admin.Exec(absl::StrCat("DROP ROLE IF EXISTS ", role, "; CREATE ROLE ", role,
                                      " LOGIN; GRANT pg_read_all_stats TO ", role)))
      << admin.last_error();
  const size_t at = url->find("://") + 3;
  const std::string weak_url = url->substr(0, at) + role + url->substr(url->find('@'));
  absl::StatusOr<std::unique_ptr<store_internal::PgConn>> c =
      store_internal::PgConn::Connect(weak_url, "");
  ASSERT_OK(c);
  testing::CapturingLogger log;
  RealClock()->SleepFor(absl::Milliseconds(50));
  absl::StatusOr<std::vector<store_internal::TerminatedBackend>> swept =
      store_internal::SweepLongTransactions(**c, absl::Milliseconds(10), &log);
  ASSERT_OK(swept);
  EXPECT_TRUE(swept->empty());
  EXPECT_EQ(log.Count(LogLevel::kWarning,
                      absl::StrCat("could not terminate backend ", locked.holder.pid())),
            1);
  EXPECT_TRUE(locked.holder.AliveInTransaction());
  c->reset();
  EXPECT_TRUE(locked.holder.Exec("ROLLBACK"));
  EXPECT_TRUE(locked.waiter.Finish());
  EXPECT_TRUE(admin.Exec(absl::StrCat("DROP ROLE ", role))) << admin.last_error();
}

TEST(PgLongTransactionSweep, RejectsAnIntervalOfZeroWhileOn) {
  absl::StatusOr<testing::TestServers> servers = testing::GetTestServers();
  ASSERT_OK(servers);
  PostgresOptions po;
  po.long_transaction_sweep_interval = absl::ZeroDuration();
  EXPECT_THAT(OpenPostgres(servers->postgres_url, po),
              testing::StatusIs(absl::StatusCode::kInvalidArgument));
  po.long_transaction_limit = absl::ZeroDuration();  // off: no interval needed
  absl::StatusOr<std::string> url = testing::CreateTestPostgresDatabase("long_txn_off");
  ASSERT_OK(url);
  EXPECT_OK(OpenPostgres(*url, po));
}

}  // namespace
}  // namespace runloom::chaos
