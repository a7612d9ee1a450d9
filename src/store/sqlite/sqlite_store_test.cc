// SQLite-only behaviour of OpenSqlite(): schema versioning, PRAGMAs, dead
// letters and busy handling, checked on the file itself.
#include "runloom/clock.h"
#include "runloom/sqlite.h"
#include "runloom/store.h"

#include "testing/status_matchers.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <sqlite3.h>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace runloom {
namespace {

using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;

// What versions 14 (the streamed text's table) and 13 add (the queue rows'
// fair group and priority, their index and triggers; runs_keyed_limit for
// runs_keyed), undone so that a test can set user_version 12.
#define RUNLOOM_DROP_FAIR_HEADS                                                        \
  "DROP TABLE live_text; "                                                             \
  "DROP TRIGGER runs_fair_group; DROP TRIGGER runs_fair_gone; DROP INDEX queue_fair; " \
  "ALTER TABLE queue DROP COLUMN fair_key; ALTER TABLE queue DROP COLUMN priority; "   \
  "DROP INDEX runs_keyed_limit; "                                                      \
  "CREATE INDEX runs_keyed ON runs (status, concurrency_key) WHERE concurrency_key <> ''; "
constexpr char kDropFairHeads[] = RUNLOOM_DROP_FAIR_HEADS;

// What versions 6, 8, 9, 10, 11, 12 and 13 add (the budget ledger; the
// timers' column and index; the signals' table and columns; the schedules;
// the child runs' column and index; the concurrency columns and indexes;
// the fair heads), undone so that a test can set an older user_version.
constexpr char kDropBudgets[] = RUNLOOM_DROP_FAIR_HEADS
    "DROP TABLE budget_reservations; DROP TABLE budget_runs; DROP TABLE budget_tenants; "
    "DROP INDEX runs_waiting; ALTER TABLE runs DROP COLUMN wake_at; "
    "DROP TABLE signals; ALTER TABLE runs DROP COLUMN wait_signal; "
    "ALTER TABLE runs DROP COLUMN wait_key; DROP TABLE schedules; "
    "DROP INDEX runs_parent; ALTER TABLE runs DROP COLUMN parent_run_id; "
    "DROP INDEX runs_keyed; DROP INDEX runs_prioritized; "
    "ALTER TABLE runs DROP COLUMN concurrency_key; ALTER TABLE runs DROP COLUMN concurrency_limit; "
    "ALTER TABLE runs DROP COLUMN priority; ";

class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = std::filesystem::path(::testing::TempDir()) /
           absl::StrCat("runloom_sqlite_", getpid(), "_", counter++, "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "runloom.db").string();
    options_.clock = &clock_;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs `sql` on a raw connection; returns the first column of the first row.
  std::string Raw(const std::string& sql) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    std::string out;
    char* err = nullptr;
    auto cb = [](void* o, int n, char** vals, char**) {
      auto* s = static_cast<std::string*>(o);
      if (s->empty() && n > 0 && vals[0] != nullptr) *s = vals[0];
      return 0;
    };
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), cb, &out, &err), SQLITE_OK) << (err ? err : "");
    sqlite3_free(err);
    sqlite3_close(db);
    return out;
  }

  // Opens the file at path_ (migrating it), adds a queued run `id`, closes it.
  void CreateRunInNewFile(const std::string& id) {
    absl::StatusOr<Backend> b = OpenSqlite(path_, options_);
    ASSERT_OK(b);
    NewRun n;
    n.id = id;
    n.workflow_name = "wf";
    ASSERT_OK(b->store->CreateRun(n, {}));
  }

  std::filesystem::path dir_;
  std::string path_;
  SimulatedClock clock_;
  SqliteOptions options_;
};

TEST_F(SqliteStoreTest, NewFileGetsSchemaVersionAndWal) {
  absl::StatusOr<Backend> b = OpenSqlite(path_, options_);
  ASSERT_OK(b);
  EXPECT_EQ(Raw("PRAGMA user_version"), "15");
  EXPECT_EQ(Raw("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(Raw("PRAGMA application_id"), std::to_string(0x524C4F4D));
  for (const char* table : {"workflows", "runs", "step_records", "run_events", "queue",
                            "dead_letters", "write_operations"}) {
    EXPECT_EQ(
        Raw(absl::StrCat("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '",
                         table, "'")),
        "1")
        << table;
  }
}

TEST_F(SqliteStoreTest, NewerSchemaIsRefusedUntouched) {
  { ASSERT_OK(OpenSqlite(path_, options_)); }
  Raw("PRAGMA user_version = 99");
  absl::StatusOr<Backend> b = OpenSqlite(path_, options_);
  EXPECT_THAT(b, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(std::string(b.status().message()),
              HasSubstr(absl::StrCat("database ", path_,
                                     " has schema version 99 but this runloom supports up to 15; "
                                     "upgrade runloom")));
  EXPECT_EQ(Raw("PRAGMA user_version"), "99");
}

TEST_F(SqliteStoreTest, ForeignDatabaseIsRefused) {
  Raw("PRAGMA application_id = 42; CREATE TABLE x (y)");
  EXPECT_THAT(OpenSqlite(path_, options_), StatusIs(absl::StatusCode::kFailedPrecondition));
  std::filesystem::remove(path_);
  {
    std::FILE* f = std::fopen(path_.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("this is not a database, just some text that is long enough to look like a header",
               f);
    std::fclose(f);
  }
  EXPECT_THAT(OpenSqlite(path_, options_), StatusIs(absl::StatusCode::kFailedPrecondition));
}

// Issue 8, finding 8: an SQLite file with application_id 0 and tables of
// its own is another application's; it is refused, not migrated, and keeps
// its header (no WAL mode) and its table list.
TEST_F(SqliteStoreTest, UnmarkedDatabaseWithTablesIsRefusedAndGetsNoTables) {
  Raw("CREATE TABLE mine (x); INSERT INTO mine VALUES (1)");
  absl::StatusOr<Backend> b = OpenSqlite(path_, options_);
  EXPECT_THAT(b,
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr(absl::StrCat("database ", path_,
                                              " is an SQLite database of another application"))));
  EXPECT_EQ(Raw("SELECT group_concat(name) FROM sqlite_master"), "mine");
  EXPECT_EQ(Raw("PRAGMA application_id"), "0");
  EXPECT_EQ(Raw("PRAGMA user_version"), "0");
  EXPECT_EQ(Raw("PRAGMA journal_mode"), "delete");
}

// An empty file, or an SQLite file with no tables, is a new database.
TEST_F(SqliteStoreTest, EmptyFileIsInitialized) {
  {
    std::FILE* f = std::fopen(path_.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  ASSERT_OK(OpenSqlite(path_, options_));
  EXPECT_EQ(Raw("PRAGMA user_version"), "15");
}

TEST_F(SqliteStoreTest, DirectoryOrMissingParentIsFailedPrecondition) {
  EXPECT_THAT(OpenSqlite(dir_.string(), options_),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("is a directory")));
  EXPECT_THAT(OpenSqlite((dir_ / "no" / "such.db").string(), options_),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("does not exist")));
}

TEST_F(SqliteStoreTest, BadOptionsAreInvalidArguments) {
  SqliteOptions o = options_;
  o.synchronous = "sometimes";
  absl::StatusOr<Backend> b = OpenSqlite(path_, o);
  EXPECT_THAT(b, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("sometimes"));
  o.synchronous = "full";
  EXPECT_OK(OpenSqlite(path_, o));
  o.busy_timeout = absl::Seconds(-1);
  EXPECT_THAT(OpenSqlite(path_, o), StatusIs(absl::StatusCode::kInvalidArgument));
  o.busy_timeout = absl::Seconds(1);
  o.wal_checkpoint_pages = 0;
  EXPECT_THAT(OpenSqlite(path_, o), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(OpenSqlite("", options_), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_FALSE(OpenSqlite((dir_ / "no" / "such" / "dir.db").string(), options_).ok());
}

// Continuous writes while a reader is always in a read transaction: the
// PASSIVE checkpoints never copy the WAL's last pages, so the WAL never
// started over and grew by every write (issue 25's retention benchmark:
// 92 MB after 10,000 runs). Past twice wal_checkpoint_pages a RESTART
// checkpoint lets it start over, so the file stays near that size.
TEST_F(SqliteStoreTest, TheWalStartsOverUnderContinuousWritesAndReads) {
  SqliteOptions o = options_;
  o.wal_checkpoint_pages = 128;
  absl::StatusOr<Backend> b = OpenSqlite(path_, o);
  ASSERT_OK(b);
  std::atomic<bool> stop{false};
  // A reader whose read transactions overlap: a new one begins before the
  // last one ends, so some snapshot is always open, as an engine's many
  // reading threads keep one.
  std::thread reader([&] {
    sqlite3* db[2] = {nullptr, nullptr};
    for (sqlite3*& d : db) ASSERT_EQ(sqlite3_open(path_.c_str(), &d), SQLITE_OK);
    for (int i = 0; !stop.load(); ++i) {
      sqlite3* d = db[i % 2];
      sqlite3_exec(d, "BEGIN; SELECT count(*) FROM runs;", nullptr, nullptr, nullptr);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      sqlite3_exec(db[(i + 1) % 2], "COMMIT", nullptr, nullptr, nullptr);
    }
    for (sqlite3* d : db) {
      sqlite3_exec(d, "COMMIT", nullptr, nullptr, nullptr);
      sqlite3_close(d);
    }
  });
  const nlohmann::json inputs = {{"text", std::string(3000, 'x')}};
  for (int i = 0; i < 2000; ++i) {
    NewRun n;
    n.id = absl::StrCat("r_wal", i);
    n.workflow_name = "wf";
    n.inputs = inputs;
    ASSERT_OK(b->store->CreateRun(n, {}));
  }
  stop = true;
  reader.join();
  const uintmax_t page = std::stoull(Raw("PRAGMA page_size"));
  const uintmax_t wal = std::filesystem::file_size(path_ + "-wal");
  // 2,000 runs of 3 KB write about 24,000 pages, and without the RESTART
  // checkpoint the WAL ended holding all of them (23,575 measured). With
  // it, the WAL starts over past 2 x 128 pages, once the checkpoint thread
  // has caught up: at so small an interval its wake-up and syncs take as
  // long as the writer takes for hundreds of pages, so the file's largest
  // extent is some thousands of pages whatever the run count (measured
  // 2,983-5,208 with the WAL shim's faster commits, 1,108-3,095 before;
  // 1,000 runs gave as much as 2,000), and more when a RESTART finds a
  // reader that stays past its 100 ms wait and is tried again 128 pages
  // later.
  EXPECT_LT(wal / (page + 24), 10'000) << " pages in the WAL";
}

// SqliteOptions::preallocate_wal: the WAL file is sized at open (2.5 x
// wal_checkpoint_pages frames), commits overwrite the zeros past the last
// frame, and a copy taken while the writer is open (what a crash leaves)
// recovers every commit: the zeros are never taken for frames.
TEST_F(SqliteStoreTest, APreallocatedWalKeepsEveryCommitThroughACrash) {
  SqliteOptions o = options_;
  o.wal_checkpoint_pages = 128;
  o.preallocate_wal = true;
  absl::StatusOr<Backend> b = OpenSqlite(path_, o);
  ASSERT_OK(b);
  const uintmax_t page = std::stoull(Raw("PRAGMA page_size"));
  const uintmax_t sized = 32 + 320 * (page + 24);
  EXPECT_EQ(std::filesystem::file_size(path_ + "-wal"), sized);
  for (int i = 0; i < 20; ++i) {
    NewRun n;
    n.id = absl::StrCat("r_pre", i);
    n.workflow_name = "wf";
    ASSERT_OK(b->store->CreateRun(n, {}));
  }
  EXPECT_EQ(std::filesystem::file_size(path_ + "-wal"), sized) << "commits overwrite the zeros";
  // A second handle on the same file finds it sized and writes nothing.
  absl::StatusOr<Backend> again = OpenSqlite(path_, o);
  ASSERT_OK(again);
  EXPECT_EQ(std::filesystem::file_size(path_ + "-wal"), sized);

  const std::filesystem::path copy = dir_ / "crashed";
  std::filesystem::create_directories(copy);
  std::filesystem::copy_file(path_, copy / "runloom.db");
  std::filesystem::copy_file(path_ + "-wal", copy / "runloom.db-wal");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((copy / "runloom.db").c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM runs WHERE id LIKE 'r_pre%'", -1, &st,
                               nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), 20);
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST_F(SqliteStoreTest, ConcurrentOpensMigrateOnce) {
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      absl::StatusOr<Backend> b = OpenSqlite(path_, options_);
      if (!b.ok()) {
        ++failures;
        ADD_FAILURE() << b.status();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(Raw("PRAGMA user_version"), "15");
}

TEST_F(SqliteStoreTest, MemoryDatabasesArePrivate) {
  SqliteOptions o = options_;
  absl::StatusOr<Backend> a = OpenSqlite(":memory:", o);
  absl::StatusOr<Backend> b = OpenSqlite(":memory:", o);
  ASSERT_OK(a);
  ASSERT_OK(b);
  ASSERT_OK(a->store->RegisterWorkflow("wf", "sha256:x", nlohmann::json::object()));
  EXPECT_THAT(b->store->GetWorkflow("wf", 0), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(SqliteStoreTest, DeadLettersAreKept) {
  absl::StatusOr<Backend> b = OpenSqlite(path_, options_);
  ASSERT_OK(b);
  NewRun n;
  n.id = "r_dead";
  n.workflow_name = "wf";
  ASSERT_OK(b->store->CreateRun(n, {}));
  for (int i = 0; i < 11; ++i) {
    ASSERT_OK(b->transport->Claim("c", 1, absl::Seconds(1)));
    clock_.Advance(absl::Seconds(1));
  }
  EXPECT_EQ(Raw("SELECT count(*) FROM queue"), "0");
  EXPECT_EQ(Raw("SELECT run_id || ':' || deliveries FROM dead_letters"), "r_dead:10");
}

TEST_F(SqliteStoreTest, LockedDatabaseIsUnavailableNotPoisoned) {
  SqliteOptions o = options_;
  o.busy_timeout = absl::Milliseconds(10);
  absl::StatusOr<Backend> b = OpenSqlite(path_, o);
  ASSERT_OK(b);
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  NewRun n;
  n.id = "r_busy";
  n.workflow_name = "wf";
  EXPECT_THAT(b->store->CreateRun(n, {}), StatusIs(absl::StatusCode::kUnavailable));
  ASSERT_EQ(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(other);
  EXPECT_OK(b->store->CreateRun(n, {}));
  EXPECT_OK(b->store->GetRun("r_busy"));
}

TEST_F(SqliteStoreTest, TimesAreUnixMicroseconds) {
  absl::StatusOr<Backend> b = OpenSqlite(path_, options_);
  ASSERT_OK(b);
  NewRun n;
  n.id = "r_time";
  n.workflow_name = "wf";
  ASSERT_OK(b->store->CreateRun(n, {}));
  EXPECT_EQ(Raw("SELECT created_at FROM runs"), std::to_string(absl::ToUnixMicros(clock_.Now())));
  EXPECT_EQ(Raw("SELECT status FROM runs"), "queued");
}

TEST_F(SqliteStoreTest, Version1DatabaseMigratesToTheLatest) {
  { ASSERT_OK(OpenSqlite(path_, options_)); }
  // Back to what schema version 1 wrote.
  Raw("DROP INDEX dead_letters_live; ALTER TABLE dead_letters DROP COLUMN redriven_at; "
      "INSERT INTO dead_letters (message_id, run_id, deliveries, reason, at) "
      "VALUES (7, 'r_old', 10, 'old', 0); "
      "CREATE INDEX runs_created ON runs (created_at); DROP INDEX runs_created_id; "
      "DROP TABLE tokens; " +
      std::string(kDropBudgets) + "PRAGMA user_version = 1");
  absl::StatusOr<Backend> b = OpenSqlite(path_, options_);
  ASSERT_OK(b);
  EXPECT_EQ(Raw("PRAGMA user_version"), "15");
  // A dead letter of version 1 is live (not redriven) after the migration.
  absl::StatusOr<std::vector<DeadLetter>> dl = b->transport->ListDeadLetters(0);
  ASSERT_OK(dl);
  ASSERT_EQ(dl->size(), 1u);
  EXPECT_EQ((*dl)[0].run_id, "r_old");
  EXPECT_EQ((*dl)[0].message_id, "7");
}

// Version 3 swaps the created_at index for one on (created_at, id); the
// runs of a version 2 file page as on a new one.
TEST_F(SqliteStoreTest, Version2DatabaseMigratesToVersion3) {
  { ASSERT_OK(OpenSqlite(path_, options_)); }
  Raw("CREATE INDEX runs_created ON runs (created_at); DROP INDEX runs_created_id; "
      "DROP TABLE tokens; " +
      std::string(kDropBudgets) + "PRAGMA user_version = 2");
  {
    absl::StatusOr<Backend> b = OpenSqlite(path_, options_);
    ASSERT_OK(b);
    for (const char* id : {"r_a", "r_b", "r_c"}) {
      NewRun n;
      n.id = id;
      n.workflow_name = "wf";
      ASSERT_OK(b->store->CreateRun(n, {}));
    }
    RunFilter f;
    f.limit = 2;
    f.after = RunPosition{clock_.Now(), "r_c"};
    absl::StatusOr<std::vector<RunRecord>> page = b->store->ListRuns(f);
    ASSERT_OK(page);
    ASSERT_EQ(page->size(), 2u);
    EXPECT_EQ((*page)[0].id, "r_b");
    EXPECT_EQ((*page)[1].id, "r_a");
  }
  EXPECT_EQ(Raw("PRAGMA user_version"), "15");
  EXPECT_EQ(Raw("SELECT count(*) FROM sqlite_master WHERE name = 'runs_created_id'"), "1");
  EXPECT_EQ(Raw("SELECT count(*) FROM sqlite_master WHERE name = 'runs_created'"), "0");
}

// Version 4 adds the tokens table; a version 3 file keeps its runs and can
// store tokens after the migration.
TEST_F(SqliteStoreTest, Version3DatabaseMigratesToVersion4) {
  {
    absl::StatusOr<Backend> b = OpenSqlite(path_, options_);
    ASSERT_OK(b);
    NewRun n;
    n.id = "r_v3";
    n.workflow_name = "wf";
    ASSERT_OK(b->store->CreateRun(n, {}));
  }
  Raw(absl::StrCat("DROP TABLE tokens; ", kDropBudgets, "PRAGMA user_version = 3"));
  absl::StatusOr<Backend> b = OpenSqlite(path_, options_);
  ASSERT_OK(b);
  EXPECT_EQ(Raw("PRAGMA user_version"), "15");
  EXPECT_OK(b->store->GetRun("r_v3"));
  TokenRecord t;
  t.id = "tok_1";
  t.name = "ci";
  t.role = Role::kOperator;
  ASSERT_OK(b->store->CreateToken(t, std::string(64, 'a')));
  EXPECT_EQ(Raw("SELECT name || ' ' || role FROM tokens"), "ci operator");
}

// Version 5 replaces the table version 1 reserved (never written) with the
// write-operations ledger; a version 4 file keeps its runs and tokens.
TEST_F(SqliteStoreTest, Version4DatabaseGetsTheWriteLedger) {
  ASSERT_NO_FATAL_FAILURE(CreateRunInNewFile("r_v4"));
  Raw("DROP TABLE write_operations; "
      "CREATE TABLE write_operations (run_id TEXT NOT NULL REFERENCES runs (id),"
      " step_path TEXT NOT NULL, action_key TEXT NOT NULL, status TEXT NOT NULL,"
      " request_digest TEXT NOT NULL, response TEXT, created_at INTEGER NOT NULL,"
      " updated_at INTEGER NOT NULL, PRIMARY KEY (run_id, step_path, action_key)) WITHOUT ROWID;"
      " " +
      std::string(kDropBudgets) + "PRAGMA user_version = 4");
  absl::StatusOr<Backend> b = OpenSqlite(path_, options_);
  ASSERT_OK(b);
  EXPECT_EQ(Raw("PRAGMA user_version"), "15");
  EXPECT_OK(b->store->GetRun("r_v4"));
  EXPECT_EQ(Raw("SELECT count(*) FROM pragma_table_info('write_operations')"
                " WHERE name IN ('action', 'state', 'idempotency_key', 'begins', 'source')"),
            "5");
  absl::StatusOr<std::vector<WriteOperation>> none = b->store->ListWrites("r_v4");
  ASSERT_OK(none);
  EXPECT_TRUE(none->empty());
}

// Version 6 adds the budget ledger; a version 5 file keeps its runs and can
// reserve after the migration.
TEST_F(SqliteStoreTest, Version5DatabaseGetsTheBudgetLedger) {
  ASSERT_NO_FATAL_FAILURE(CreateRunInNewFile("r_v5"));
  Raw(absl::StrCat(kDropBudgets, "PRAGMA user_version = 5"));
  absl::StatusOr<Backend> b = OpenSqlite(path_, options_);
  ASSERT_OK(b);
  EXPECT_EQ(Raw("PRAGMA user_version"), "15");
  EXPECT_OK(b->store->GetRun("r_v5"));
  absl::StatusOr<TenantBudget> t = b->store->SetTenantBudget("acme", 5'000'000);
  ASSERT_OK(t);
  EXPECT_EQ(t->figures.left_micros(), 5'000'000);
  EXPECT_EQ(Raw("SELECT tenant || ' ' || limit_micros FROM budget_tenants"), "acme 5000000");
}

// Version 7 keys a write by the decision it carries out; a version 6
// file's writes are kept, with no decision, and still found by their key.
TEST_F(SqliteStoreTest, Version6DatabaseKeepsItsWritesWithNoDecision) {
  ASSERT_NO_FATAL_FAILURE(CreateRunInNewFile("r_v6"));
  Raw("DROP TABLE write_operations; "
      "CREATE TABLE write_operations (run_id TEXT NOT NULL REFERENCES runs (id),"
      " step_path TEXT NOT NULL, action TEXT NOT NULL,"
      " state TEXT NOT NULL CHECK (state IN ('intent', 'done')), idempotency_key TEXT NOT NULL,"
      " request_digest TEXT NOT NULL, begins INTEGER NOT NULL DEFAULT 0, http_status INTEGER,"
      " response TEXT, source TEXT, created_at INTEGER NOT NULL, finished_at INTEGER,"
      " PRIMARY KEY (run_id, step_path, action));"
      " INSERT INTO write_operations VALUES ('r_v6', 'apply', 'restart', 'done', 'rl-k',"
      " 'sha256:d', 1, 201, '{}', 'sent', 1, 2);"
      " " RUNLOOM_DROP_FAIR_HEADS
      " DROP INDEX runs_waiting; ALTER TABLE runs DROP COLUMN wake_at; DROP TABLE signals;"
      " ALTER TABLE runs DROP COLUMN wait_signal; ALTER TABLE runs DROP COLUMN wait_key;"
      " DROP TABLE schedules; DROP INDEX runs_parent; ALTER TABLE runs DROP COLUMN parent_run_id;"
      " DROP INDEX runs_keyed; DROP INDEX runs_prioritized;"
      " ALTER TABLE runs DROP COLUMN concurrency_key; ALTER TABLE runs DROP COLUMN"
      " concurrency_limit; ALTER TABLE runs DROP COLUMN priority; PRAGMA user_version = 6");
  absl::StatusOr<Backend> b = OpenSqlite(path_, options_);
  ASSERT_OK(b);
  EXPECT_EQ(Raw("PRAGMA user_version"), "15");
  absl::StatusOr<std::vector<WriteOperation>> kept = b->store->ListWrites("r_v6");
  ASSERT_OK(kept);
  ASSERT_EQ(kept->size(), 1u);
  EXPECT_EQ((*kept)[0].key.decision, "");
  EXPECT_EQ((*kept)[0].idempotency_key, "rl-k");
  EXPECT_EQ((*kept)[0].begins, 1);
  ASSERT_TRUE((*kept)[0].result.has_value());
  EXPECT_EQ((*kept)[0].result->http_status, 201);
}

// Version 13 gives each queue row its fair group (its run's key while the
// run is queued, else '') and its run's priority; a version 12 file's rows
// get them from their runs, and the triggers keep them in step after.
TEST_F(SqliteStoreTest, Version12QueueRowsGetTheirFairGroupAndPriority) {
  {
    absl::StatusOr<Backend> b = OpenSqlite(path_, options_);
    ASSERT_OK(b);
    for (const char* id : {"r_keyed", "r_keyless", "r_running"}) {
      NewRun n;
      n.id = id;
      n.workflow_name = "wf";
      if (std::string(id) != "r_keyless") {
        n.concurrency_key = "tenant-a";
        n.concurrency_limit = 2;
      }
      n.priority = 3;
      ASSERT_OK(b->store->CreateRun(n, {}));
    }
  }
  Raw(absl::StrCat(kDropFairHeads,
                   "UPDATE runs SET status = 'running' WHERE id = 'r_running'; "
                   "PRAGMA user_version = 12"));
  absl::StatusOr<Backend> b = OpenSqlite(path_, options_);
  ASSERT_OK(b);
  EXPECT_EQ(Raw("PRAGMA user_version"), "15");
  constexpr char kRows[] =
      "SELECT group_concat(run_id || ':' || fair_key || ':' || priority, ' ') "
      "FROM (SELECT * FROM queue ORDER BY id)";
  EXPECT_EQ(Raw(kRows), "r_keyed:tenant-a:3 r_keyless::3 r_running::3");
  // A keyed run that leaves queued leaves its key's group; back, it rejoins.
  Raw("UPDATE runs SET status = 'queued' WHERE id = 'r_running'; "
      "UPDATE runs SET status = 'paused' WHERE id = 'r_keyed'");
  EXPECT_EQ(Raw(kRows), "r_keyed::3 r_keyless::3 r_running:tenant-a:3");
  // A run that is gone: keyless, priority 0.
  Raw("DELETE FROM runs WHERE id = 'r_running'");
  EXPECT_EQ(Raw(kRows), "r_keyed::3 r_keyless::3 r_running::0");
}

TEST_F(SqliteStoreTest, AckOfAMessageTheLeaseRemovedIsANoOp) {
  absl::StatusOr<Backend> b = OpenSqlite(path_, options_);
  ASSERT_OK(b);
  NewRun n;
  n.id = "r_acked";
  n.workflow_name = "wf";
  ASSERT_OK(b->store->CreateRun(n, {}));
  absl::StatusOr<std::vector<QueueMessage>> m = b->transport->Claim("c", 1, absl::Seconds(60));
  ASSERT_OK(m);
  ASSERT_EQ(m->size(), 1u);
  ASSERT_OK(b->store->AcquireLease("r_acked", "w", absl::Seconds(30), {}));
  // The lease removed the queue row in its own commit; the Ack finds it in
  // the handle's memo (twice: the second falls back to a read).
  EXPECT_EQ(Raw("SELECT count(*) FROM queue"), "0");
  EXPECT_OK(b->transport->Ack((*m)[0]));
  EXPECT_OK(b->transport->Ack((*m)[0]));
  EXPECT_EQ(Raw("SELECT count(*) FROM queue"), "0");
}

TEST_F(SqliteStoreTest, DeliveryCapMustBePositive) {
  SqliteOptions o = options_;
  o.transport.max_deliveries = 0;
  EXPECT_THAT(OpenSqlite(path_, o), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(SqliteStoreTest, ReleaseIsVisibleAtOnceAndNotADelivery) {
  absl::StatusOr<Backend> b = OpenSqlite(path_, options_);
  ASSERT_OK(b);
  NewRun n;
  n.id = "r_rel";
  n.workflow_name = "wf";
  ASSERT_OK(b->store->CreateRun(n, {}));
  absl::StatusOr<std::vector<QueueMessage>> m = b->transport->Claim("c", 1, absl::Seconds(60));
  ASSERT_OK(m);
  ASSERT_EQ(m->size(), 1u);
  ASSERT_OK(b->transport->Release((*m)[0]));
  absl::StatusOr<std::vector<QueueMessage>> again = b->transport->Claim("c2", 1, absl::Seconds(60));
  ASSERT_OK(again);
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ((*again)[0].deliveries, 1);
}

}  // namespace
}  // namespace runloom
