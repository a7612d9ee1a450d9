#include "store/sqlite/write_queue.h"

#include "store/sqlite/wal_gather_vfs.h"

#include "runloom/clock.h"
#include "runloom/mutex.h"

#include "core/fiber.h"
#include "testing/fiber_host.h"
#include "testing/status_matchers.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include <atomic>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace runloom::store_internal {
namespace {

using ::runloom::testing::StatusIs;

class WriteQueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           absl::StrCat("runloom_wq_", getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "q.db").string();
    auto db = Db::Open(path_, absl::Seconds(5));
    ASSERT_OK(db);
    db_ = std::move(*db);
    ASSERT_OK(db_->Exec("PRAGMA journal_mode = WAL"));
    ASSERT_OK(db_->Exec("CREATE TABLE t (x INTEGER PRIMARY KEY)"));
    sqlite3_commit_hook(db_->raw(), &WriteQueueTest::OnCommit, this);
    WriteQueue::Hooks hooks;
    hooks.on_produced = [this] { ++produced_; };
    hooks.after_group = [this] { ++after_group_; };
    queue_ = std::make_unique<WriteQueue>(db_.get(), &db_mu_, std::move(hooks));
  }
  void TearDown() override {
    queue_.reset();
    db_.reset();
    std::filesystem::remove_all(dir_);
  }

  static int OnCommit(void* self) {
    auto* t = static_cast<WriteQueueTest*>(self);
    ++t->commits_;
    return t->fail_commits_ ? 1 : 0;  // non-zero turns the COMMIT into a failure
  }

  absl::Status Insert(int64_t x) {
    return queue_->Write([x](WriteTxn& txn) -> absl::Status {
      static constexpr char kInsert[] = "INSERT INTO t (x) VALUES (?1)";
      absl::StatusOr<Statement> st = txn.db.Prepare(kInsert);
      if (!st.ok()) return st.status();
      st->BindInt(1, x);
      return st->Run();
    });
  }

  std::vector<int64_t> Rows() {
    std::vector<int64_t> out;
    static constexpr char kSelect[] = "SELECT x FROM t ORDER BY x";
    absl::StatusOr<Statement> st = db_->Prepare(kSelect);
    EXPECT_OK(st);
    while (true) {
      absl::StatusOr<bool> row = st->Step();
      EXPECT_OK(row);
      if (!row.ok() || !*row) break;
      out.push_back(st->ColumnInt(0));
    }
    return out;
  }

  // Whether queued fibers suspend (store/internal/group_leader.h): a leader
  // thread holds the queue until `fibers` writers are queued behind it or
  // `patience` has passed, while `fibers` fibers on ONE host thread each
  // insert a row, inside a fiber::SuspendableRegion or not. Returns how many
  // writers the leader saw queued behind it.
  size_t QueuedBehindALeader(int fibers, bool region, absl::Duration patience) {
    const size_t want = static_cast<size_t>(fibers);
    std::atomic<size_t> seen{0};
    std::thread leader([&] {
      EXPECT_OK(queue_->Write([&](WriteTxn&) -> absl::Status {
        const absl::Time give_up = RealClock()->Now() + patience;
        while (queue_->TEST_QueueLength() < want + 1 && RealClock()->Now() < give_up) {
          RealClock()->SleepFor(absl::Milliseconds(1));
        }
        seen = queue_->TEST_QueueLength() - 1;
        return absl::OkStatus();
      }));
    });
    while (queue_->TEST_QueueLength() < 1) RealClock()->SleepFor(absl::Milliseconds(1));
    runloom::testing::FiberHost host;
    for (int i = 0; i < fibers; ++i) {
      host.Spawn([&, i] {
        std::optional<fiber::SuspendableRegion> suspendable;
        if (region) suspendable.emplace();
        EXPECT_OK(Insert(100 + i));
      });
    }
    host.Run(/*threads=*/1);
    leader.join();
    return seen;
  }

  // Blocks the queue with a leader until `n` more writers are queued behind
  // it, so that they run as one group. Returns the leader's thread.
  std::thread BlockUntilQueued(size_t n) {
    std::thread leader([this, n] {
      EXPECT_OK(queue_->Write([this, n](WriteTxn&) -> absl::Status {
        while (queue_->TEST_QueueLength() < n + 1) RealClock()->SleepFor(absl::Milliseconds(1));
        return absl::OkStatus();
      }));
    });
    while (queue_->TEST_QueueLength() < 1) RealClock()->SleepFor(absl::Milliseconds(1));
    return leader;
  }

  std::filesystem::path dir_;
  std::string path_;
  std::unique_ptr<Db> db_;
  runloom::Mutex db_mu_;
  std::unique_ptr<WriteQueue> queue_;
  std::atomic<int> commits_{0};
  std::atomic<int> produced_{0};
  std::atomic<int> after_group_{0};
  std::atomic<bool> fail_commits_{false};
};

TEST_F(WriteQueueTest, SingleWriteCommits) {
  ASSERT_OK(Insert(1));
  EXPECT_EQ(Rows(), std::vector<int64_t>{1});
  EXPECT_EQ(commits_, 1);
}

TEST_F(WriteQueueTest, LoneFailingOpIsRolledBack) {
  absl::Status s = queue_->Write([](WriteTxn& txn) -> absl::Status {
    static constexpr char kInsert[] = "INSERT INTO t (x) VALUES (5)";
    absl::StatusOr<Statement> st = txn.db.Prepare(kInsert);
    if (!st.ok()) return st.status();
    if (absl::Status r = st->Run(); !r.ok()) return r;
    return absl::FailedPreconditionError("refused after writing");
  });
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_TRUE(Rows().empty());
  EXPECT_EQ(commits_, 0);
  EXPECT_TRUE(db_->autocommit());
  EXPECT_OK(Insert(6));
  EXPECT_EQ(Rows(), std::vector<int64_t>{6});
}

TEST_F(WriteQueueTest, FailingOpIsRolledBackAloneInItsGroup) {
  std::thread leader = BlockUntilQueued(3);
  absl::Status a, b, c;
  std::thread ta([&] { a = Insert(1); });
  while (queue_->TEST_QueueLength() < 2) RealClock()->SleepFor(absl::Milliseconds(1));
  std::thread tb([&] {
    b = queue_->Write([](WriteTxn& txn) -> absl::Status {
      static constexpr char kInsert[] = "INSERT INTO t (x) VALUES (2)";
      absl::StatusOr<Statement> st = txn.db.Prepare(kInsert);
      if (!st.ok()) return st.status();
      if (absl::Status s = st->Run(); !s.ok()) return s;
      return absl::AbortedError("refused after writing");  // its insert must vanish
    });
  });
  while (queue_->TEST_QueueLength() < 3) RealClock()->SleepFor(absl::Milliseconds(1));
  std::thread tc([&] { c = Insert(3); });
  leader.join();
  ta.join();
  tb.join();
  tc.join();
  EXPECT_OK(a);
  EXPECT_THAT(b, StatusIs(absl::StatusCode::kAborted));
  EXPECT_OK(c);
  EXPECT_EQ(Rows(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(commits_, 2) << "the leader's group and one group for the three writers";
  EXPECT_EQ(queue_->TEST_groups(), 2u);
  EXPECT_EQ(queue_->TEST_ops(), 4u);
  EXPECT_EQ(after_group_, 1) << "one leader ran both groups";
}

TEST_F(WriteQueueTest, ConstraintViolationFailsOnlyThatOp) {
  ASSERT_OK(Insert(7));
  std::thread leader = BlockUntilQueued(2);
  absl::Status dup, fresh;
  std::thread t1([&] { dup = Insert(7); });
  while (queue_->TEST_QueueLength() < 2) RealClock()->SleepFor(absl::Milliseconds(1));
  std::thread t2([&] { fresh = Insert(8); });
  leader.join();
  t1.join();
  t2.join();
  EXPECT_THAT(dup, StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_OK(fresh);
  EXPECT_EQ(Rows(), (std::vector<int64_t>{7, 8}));
}

TEST_F(WriteQueueTest, ProducedCallbackRunsOnlyAfterAKeptOp) {
  absl::Status refused = queue_->Write([](WriteTxn& txn) {
    txn.produced_message = true;
    return absl::AbortedError("refused");
  });
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(produced_, 0);
  ASSERT_OK(queue_->Write([](WriteTxn& txn) {
    txn.produced_message = true;
    return absl::OkStatus();
  }));
  EXPECT_EQ(produced_, 1);
}

TEST_F(WriteQueueTest, FailedCommitPoisonsTheQueue) {
  fail_commits_ = true;
  EXPECT_THAT(Insert(1), StatusIs(absl::StatusCode::kDataLoss));
  fail_commits_ = false;
  EXPECT_THAT(queue_->poisoned(), StatusIs(absl::StatusCode::kDataLoss));
  absl::Status later = Insert(2);
  EXPECT_THAT(later, StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_NE(std::string(later.message()).find("reopen"), std::string::npos) << later;
  EXPECT_TRUE(Rows().empty());
  EXPECT_TRUE(db_->autocommit());
}

TEST_F(WriteQueueTest, BusyDatabaseIsUnavailableAndNotPoisoned) {
  sqlite3_busy_timeout(db_->raw(), 0);
  auto other = Db::Open(path_, absl::ZeroDuration());
  ASSERT_OK(other);
  ASSERT_OK((*other)->Exec("BEGIN IMMEDIATE"));
  EXPECT_THAT(Insert(1), StatusIs(absl::StatusCode::kUnavailable));
  ASSERT_OK((*other)->Exec("ROLLBACK"));
  EXPECT_OK(queue_->poisoned());
  EXPECT_OK(Insert(1));
  EXPECT_EQ(Rows(), std::vector<int64_t>{1});
}

TEST_F(WriteQueueTest, ManyThreadsAllCommitInFewerTransactions) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 50;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        if (!Insert(t * kPerThread + i).ok()) ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(Rows().size(), static_cast<size_t>(kThreads * kPerThread));
  EXPECT_EQ(queue_->TEST_ops(), static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_EQ(static_cast<uint64_t>(commits_.load()), queue_->TEST_groups());
}

TEST_F(WriteQueueTest, FibersInASuspendableRegionQueueUpOnOneThreadAndShareAGroup) {
  constexpr int kFibers = 10;
  // Suspended, each fiber gives the one thread to the next, so all ten queue
  // up behind the leader (blocked, the first would hold the thread: see below).
  EXPECT_EQ(QueuedBehindALeader(kFibers, /*region=*/true, absl::Seconds(30)),
            static_cast<size_t>(kFibers));
  EXPECT_EQ(Rows().size(), static_cast<size_t>(kFibers));
  EXPECT_EQ(queue_->TEST_groups(), 2u);  // the leader's, then all ten fibers' in one
  EXPECT_EQ(queue_->TEST_ops(), static_cast<uint64_t>(kFibers + 1));
}

TEST_F(WriteQueueTest, AFiberOutsideASuspendableRegionBlocksItsThread) {
  // Outside a region (a lock another fiber may need could be held) the first
  // fiber's wait blocks the host's only thread: the second never queues
  // while the leader waits, and each fiber then commits alone.
  EXPECT_EQ(QueuedBehindALeader(2, /*region=*/false, absl::Milliseconds(300)), 1u);
  EXPECT_EQ(Rows().size(), 2u);
  EXPECT_EQ(queue_->TEST_groups(), 3u);
}

// A leader never hands the lead to a suspended fiber (group_leader.h,
// TurnSignal). Here it would deadlock: a leader thread runs kMaxRounds (8)
// groups of one writer each; as the 8th runs, a fiber F queues (suspended),
// then a thread T behind it, while the fiber host's only thread is blocked by
// another fiber G until T's write is done (as a parallel step blocks its
// executor until its branch threads have committed). Handed the lead, F would
// wait for that thread forever; G gives up after 10 s, so the test fails
// instead of hanging.
TEST_F(WriteQueueTest, ALeaderNeverHandsTheLeadToASuspendedFiber) {
  runloom::Notification round8;       // the 8th group's op is running
  runloom::Notification t_committed;  // T's write is done
  std::atomic<bool> g_gave_up{false};
  runloom::testing::FiberHost host;
  host.Spawn([&] {  // F: waits (blocking the host thread) for the 8th group, then queues
    round8.WaitForNotification();
    fiber::SuspendableRegion suspendable;
    EXPECT_OK(Insert(900));
  });
  host.Spawn([&] {  // G: blocks the host thread until T has committed
    if (!t_committed.WaitForNotificationWithTimeout(absl::Seconds(10))) g_gave_up = true;
  });
  std::thread host_thread([&] { host.Run(/*threads=*/1); });

  std::vector<std::thread> chain;
  std::thread t;
  // The op of the k-th group: starts the next writer and waits until it is
  // queued behind this group (queue length: this group's writer + it).
  std::function<absl::Status(int)> write_chained = [&](int k) -> absl::Status {
    return queue_->Write([&, k](WriteTxn& txn) -> absl::Status {
      auto wait_queued = [&](size_t n) {
        while (queue_->TEST_QueueLength() < n) RealClock()->SleepFor(absl::Milliseconds(1));
      };
      if (k < 8) {
        chain.emplace_back([&, k] { EXPECT_OK(write_chained(k + 1)); });
        wait_queued(2);
      } else {
        round8.Notify();
        wait_queued(2);  // F
        t = std::thread([&] {
          EXPECT_OK(Insert(901));
          t_committed.Notify();
        });
        wait_queued(3);  // T, behind F
      }
      absl::StatusOr<Statement> st = txn.db.Prepare("INSERT INTO t (x) VALUES (?1)");
      if (!st.ok()) return st.status();
      st->BindInt(1, k);
      return st->Run();
    });
  };
  std::thread leader([&] { EXPECT_OK(write_chained(1)); });
  leader.join();
  // chain grows only inside ops, which have all run once the leader's
  // write returned and the chain's writers were joined in order.
  for (size_t i = 0; i < chain.size(); ++i) chain[i].join();
  host_thread.join();
  if (t.joinable()) t.join();
  EXPECT_FALSE(g_gave_up) << "the lead went to the suspended fiber, whose thread was blocked";
  EXPECT_EQ(Rows().size(), 10u);  // eight chained, F's and T's
}

// The WAL shim (wal_gather_vfs.h): every connection Db::Open makes goes
// through it, and what it writes is what SQLite asked for, read back by a
// connection on the plain unix VFS, in commits of every size (one frame;
// past the 120 KiB the unix VFS writes at a time; past the 512 KiB buffer).
class WalGatherVfsTest : public WriteQueueTest {
 protected:
  // `sql`'s first column of its first row, on a plain-VFS connection to `path`.
  static std::string PlainQuery(const std::string& path, const std::string& sql) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, "unix"), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sql;
    std::string out;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != nullptr) {
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
  }
};

TEST_F(WalGatherVfsTest, EveryConnectionUsesIt) {
  ASSERT_NE(WalGatherVfsName(), nullptr);
  sqlite3_vfs* vfs = nullptr;
  ASSERT_EQ(sqlite3_file_control(db_->raw(), "main", SQLITE_FCNTL_VFS_POINTER, &vfs), SQLITE_OK);
  ASSERT_NE(vfs, nullptr);
  EXPECT_STREQ(vfs->zName, WalGatherVfsName());
}

TEST_F(WalGatherVfsTest, CommitsOfEverySizeReadBackOnThePlainVfs) {
  ASSERT_OK(db_->Exec("CREATE TABLE b (id INTEGER PRIMARY KEY, v BLOB)"));
  const std::vector<int> sizes = {1, 5000, 200'000, 1'500'000};
  for (size_t i = 0; i < sizes.size(); ++i) {
    ASSERT_OK(db_->Exec(absl::StrCat("INSERT INTO b VALUES (", i, ", randomblob(", sizes[i], "))")));
  }
  // Many pages in one commit, each a frame of its own.
  ASSERT_OK(db_->Exec("BEGIN"));
  for (int i = 0; i < 300; ++i) {
    ASSERT_OK(db_->Exec(absl::StrCat("INSERT INTO b VALUES (", 100 + i, ", randomblob(3000))")));
  }
  ASSERT_OK(db_->Exec("COMMIT"));
  // The writer's own view and a plain connection's agree byte for byte.
  const std::string sums = "SELECT group_concat(hex(v), ',') FROM (SELECT v FROM b ORDER BY id)";
  absl::StatusOr<std::string> mine = db_->QueryText(sums);
  ASSERT_OK(mine);
  EXPECT_EQ(PlainQuery(path_, sums), *mine);
  EXPECT_EQ(PlainQuery(path_, "SELECT count(*) FROM b"), "304");
  EXPECT_EQ(PlainQuery(path_, "PRAGMA integrity_check"), "ok");
}

// What a crash leaves: the files copied while the writer is open recover
// every commit; a transaction that spilled frames to the WAL and rolled
// back leaves nothing.
TEST_F(WalGatherVfsTest, ACopyTakenWhileOpenHasEveryCommitAndNoRollback) {
  ASSERT_OK(db_->Exec("PRAGMA cache_size = 10"));  // a big transaction spills
  ASSERT_OK(db_->Exec("CREATE TABLE b (id INTEGER PRIMARY KEY, v BLOB)"));
  for (int i = 0; i < 50; ++i) {
    ASSERT_OK(db_->Exec(absl::StrCat("INSERT INTO b VALUES (", i, ", randomblob(2000))")));
  }
  ASSERT_OK(db_->Exec("BEGIN"));
  for (int i = 0; i < 400; ++i) {
    ASSERT_OK(db_->Exec(absl::StrCat("INSERT INTO b VALUES (", 1000 + i, ", randomblob(4000))")));
  }
  // Read back inside the transaction: spilled pages come from the WAL.
  absl::StatusOr<std::string> inside = db_->QueryText("SELECT count(*) FROM b");
  ASSERT_OK(inside);
  EXPECT_EQ(*inside, "450");
  ASSERT_OK(db_->Exec("ROLLBACK"));
  ASSERT_OK(db_->Exec("INSERT INTO b VALUES (50, randomblob(10))"));

  const std::filesystem::path copy = dir_ / "crashed.db";
  std::filesystem::copy_file(path_, copy);
  std::filesystem::copy_file(path_ + "-wal", copy.string() + "-wal");
  EXPECT_EQ(PlainQuery(copy.string(), "SELECT count(*) || ':' || max(id) FROM b"), "51:50");
  EXPECT_EQ(PlainQuery(copy.string(), "PRAGMA integrity_check"), "ok");
}

// A write transaction that spilled frames and rolled back leaves nothing
// buffered once it lets go of the write lock: another connection's commit
// at the same WAL offsets stays as written when the first one reads again.
TEST_F(WalGatherVfsTest, ARolledBackSpillNeverOverwritesAnotherWritersFrames) {
  ASSERT_OK(db_->Exec("CREATE TABLE b (id INTEGER PRIMARY KEY, v BLOB)"));
  ASSERT_OK(db_->Exec("PRAGMA cache_size = 10"));
  // An empty WAL: the rollback below then reads nothing back from it (a
  // read would write the buffer out while the lock is still held).
  ASSERT_OK(db_->QueryText("PRAGMA wal_checkpoint(TRUNCATE)").status());
  ASSERT_OK(db_->Exec("BEGIN"));
  for (int i = 0; i < 100; ++i) {
    ASSERT_OK(db_->Exec(absl::StrCat("INSERT INTO b VALUES (", i, ", randomblob(4000))")));
  }
  ASSERT_OK(db_->Exec("ROLLBACK"));
  absl::StatusOr<std::unique_ptr<Db>> other = Db::Open(path_, absl::Seconds(5));
  ASSERT_OK(other);
  ASSERT_OK((*other)->Exec("BEGIN"));
  for (int i = 0; i < 60; ++i) {
    ASSERT_OK((*other)->Exec(absl::StrCat("INSERT INTO b VALUES (", i, ", zeroblob(4000))")));
  }
  ASSERT_OK((*other)->Exec("COMMIT"));
  absl::StatusOr<std::string> seen = db_->QueryText("SELECT count(*) FROM b");
  ASSERT_OK(seen);
  EXPECT_EQ(*seen, "60");
  ASSERT_OK(db_->Exec("INSERT INTO b VALUES (1000, zeroblob(10))"));
  EXPECT_EQ(PlainQuery(path_, "SELECT count(*) || ':' || sum(length(v)) || ':' || "
                              "sum(v = zeroblob(length(v))) FROM b"),
            "61:240010:61");
  EXPECT_EQ(PlainQuery(path_, "PRAGMA integrity_check"), "ok");
}

}  // namespace
}  // namespace runloom::store_internal
