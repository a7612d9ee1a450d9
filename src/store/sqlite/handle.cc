#include "store/sqlite/handle.h"

#include "core/ids.h"
#include "core/log.h"
#include "core/status_macros.h"
#include "store/sqlite/migrations.h"

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace runloom::store_internal {
namespace {
constexpr char kMemoryPath[] = ":memory:";
// Frames appended to the WAL since the last checkpoint that trigger the next
// one (4,000 frames = 16 MiB of 4 KiB pages). SQLite's own auto-checkpoint
// compares the WAL's total length with 1,000 instead; while readers keep the
// WAL from restarting, that runs a checkpoint after every commit, and each
// one re-scans the whole WAL: most of a busy writer's time.
// How long a RESTART checkpoint waits for readers and other writers (see
// Checkpoint).
constexpr absl::Duration kRestartWait = absl::Milliseconds(100);
// Before a RESTART checkpoint pauses the writers: PASSIVE ones, until at
// most this many frames are left for the RESTART to copy (or this many
// PASSIVEs ran: readers' snapshots may pin the last frames).
constexpr int kRestartRemainderFrames = 128;
constexpr int kMaxPassivesBeforeRestart = 4;
// PRAGMA journal_size_limit: the WAL file's size past which the first
// commit after a restart truncates it.
constexpr int64_t kWalSizeLimit = 64 << 20;
// SqliteOptions::preallocate_wal: the WAL frames the file is sized for, per
// wal_checkpoint_pages (a RESTART is due at 2; it grows a little past that
// while the RESTART waits).
constexpr int64_t kPreallocatedFramesPer4 = 10;

// Reader connections per handle: enough to keep both cores of a small
// machine reading while the writer commits.
constexpr int kMaxReaders = 4;

absl::StatusOr<std::unique_ptr<Db>> OpenReader(const std::string& path, absl::Duration busy,
                                               Clock* clock) {
  RUNLOOM_ASSIGN_OR_RETURN(std::unique_ptr<Db> db, Db::Open(path, busy));
  RUNLOOM_RETURN_IF_ERROR(db->Exec("PRAGMA query_only = 1"));
  RUNLOOM_RETURN_IF_ERROR(db->DefineNow(clock));
  return db;
}

absl::StatusOr<std::string> SynchronousPragma(const std::string& value) {
  std::string v = absl::AsciiStrToLower(value);
  if (v == "normal") return std::string("PRAGMA synchronous = NORMAL");
  if (v == "full") return std::string("PRAGMA synchronous = FULL");
  return absl::InvalidArgumentError(
      absl::StrCat("SqliteOptions::synchronous is '", value, "'; use \"normal\" or \"full\""));
}
// Switching a new file to WAL needs an exclusive lock, and SQLite reports
// SQLITE_BUSY at once (without its busy handler) when another connection is
// opening the same file, so retry until busy_timeout. This waits on real
// time, as SQLite's own busy handler does: the contention is with other
// processes, not with the store's (possibly simulated) clock.
absl::Status EnableWal(Db& db, absl::Duration busy_timeout) {
  Clock* real = RealClock();
  const absl::Time give_up = real->Now() + busy_timeout;
  absl::Duration backoff = absl::Milliseconds(1);
  while (true) {
    absl::StatusOr<std::string> mode = db.QueryText("PRAGMA journal_mode = WAL");
    if (mode.ok()) {
      if (absl::AsciiStrToLower(*mode) == "wal") return absl::OkStatus();
      return absl::FailedPreconditionError(absl::StrCat(
          "database ", db.path(), " could not be switched to WAL mode (journal_mode is '", *mode,
          "'); put it on a local file system"));
    }
    if (mode.status().code() != absl::StatusCode::kUnavailable || real->Now() >= give_up) {
      return mode.status();
    }
    real->SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Milliseconds(50));
  }
}

// kFailedPrecondition when `path` cannot be a database file whatever we
// retry: a directory or other non-file, a file we may not read and write, a
// missing parent directory. SQLite's own errors for these are CANTOPEN or
// IOERR, which read as transient.
absl::Status CheckDatabasePath(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "database ", path, " is ", S_ISDIR(st.st_mode) ? "a directory" : "not a file",
          ", not an SQLite database file; pass the path of a database file"));
    }
    if (::access(path.c_str(), R_OK | W_OK) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("database ", path, " cannot be read and written (", std::strerror(errno),
                       "); fix its permissions or pass another file"));
    }
    return absl::OkStatus();
  }
  if (errno != ENOENT) {
    return absl::FailedPreconditionError(
        absl::StrCat("database ", path, ": ", std::strerror(errno)));
  }
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) parent = ".";
  if (::stat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "database ", path, ": directory ", parent.string(), " does not exist; create it first"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<SqliteHandle>> SqliteHandle::Open(const std::string& path,
                                                                 const SqliteOptions& options) {
  if (path.empty()) {
    return absl::InvalidArgumentError(
        "SQLite database path is empty; pass a file path or \":memory:\"");
  }
  if (options.busy_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("SqliteOptions::busy_timeout is negative (",
                                                   absl::FormatDuration(options.busy_timeout),
                                                   ")"));
  }
  if (options.wal_checkpoint_pages < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("SqliteOptions::wal_checkpoint_pages must be at least 1 (got ",
                     options.wal_checkpoint_pages, ")"));
  }
  RUNLOOM_ASSIGN_OR_RETURN(std::string sync_pragma, SynchronousPragma(options.synchronous));
  Clock* clock = options.clock != nullptr ? options.clock : RealClock();
  auto h = std::make_shared<SqliteHandle>(path, clock);
  const bool memory = path == kMemoryPath;

  if (!memory) {
    RUNLOOM_RETURN_IF_ERROR(CheckDatabasePath(path));
  }
  RUNLOOM_ASSIGN_OR_RETURN(h->writer_, Db::Open(path, options.busy_timeout));
  RUNLOOM_RETURN_IF_ERROR(h->writer_->DefineNow(clock));
  // Before the first write (WAL mode rewrites the header): a file that is
  // not ours is left exactly as it was.
  RUNLOOM_RETURN_IF_ERROR(CheckDatabaseIsOurs(*h->writer_));
  if (!memory) {
    RUNLOOM_RETURN_IF_ERROR(EnableWal(*h->writer_, options.busy_timeout));
  }
  RUNLOOM_RETURN_IF_ERROR(h->writer_->Exec(sync_pragma));
  RUNLOOM_RETURN_IF_ERROR(h->writer_->Exec("PRAGMA foreign_keys = ON"));
  // The WAL file grows to the largest burst of writes between checkpoints
  // and, without a limit, keeps that size forever (a retention backlog
  // deleted in one afternoon would leave a WAL of gigabytes). With one, each
  // checkpoint that resets the WAL truncates the file back to 64 MiB.
  RUNLOOM_RETURN_IF_ERROR(
      h->writer_->Exec(absl::StrCat("PRAGMA journal_size_limit = ", kWalSizeLimit)));
  RUNLOOM_RETURN_IF_ERROR(ApplyMigrations(*h->writer_));

  h->memory_ = memory;
  h->busy_timeout_ = options.busy_timeout;
  h->checkpoint_pages_ = options.wal_checkpoint_pages;
  if (!memory) {
    // One reader now, so that a file we cannot read fails the open.
    RUNLOOM_ASSIGN_OR_RETURN(std::unique_ptr<Db> reader,
                             OpenReader(path, options.busy_timeout, clock));
    {
      runloom::MutexLock l(&h->readers_mu_);
      h->idle_readers_.push_back(std::move(reader));
      h->open_readers_ = 1;
    }
    // Used by the checkpoint thread alone. Its busy timeout bounds only a
    // RESTART checkpoint's wait (PASSIVE ones never wait).
    RUNLOOM_ASSIGN_OR_RETURN(h->checkpointer_, Db::Open(path, kRestartWait));
    RUNLOOM_RETURN_IF_ERROR(h->checkpointer_->Exec(sync_pragma));
    // Replaces SQLite's auto-checkpoint on the writer (see MaybeCheckpoint).
    sqlite3_wal_hook(h->writer_->raw(), &SqliteHandle::OnWalCommit, h.get());
    SqliteHandle* self = h.get();
    h->checkpoint_thread_ = std::thread([self] { self->CheckpointLoop(); });
  }
  SqliteHandle* raw = h.get();
  WriteQueue::Hooks hooks;
  hooks.on_produced = [raw] { raw->NotifyProduced(); };
  if (!memory) hooks.after_group = [raw] { raw->MaybeCheckpoint(); };
  h->bus_ = options.event_bus;
  if (h->bus_ != nullptr) {
    h->publisher_ = std::make_unique<CommitPublisher>(h->bus_.get());
    h->publisher_->Attach(*h->writer_);
    hooks.after_transaction = [raw](bool committed) {
      raw->publisher_->AfterTransaction(committed, *raw->writer_, raw->writer_mu_,
                                        raw->watcher_.get());
    };
    if (!memory && options.watch_other_processes) {
      ChangeWatcher::Options wo;
      wo.busy_timeout = options.busy_timeout;
      RUNLOOM_ASSIGN_OR_RETURN(h->watcher_, ChangeWatcher::Start(path, h->bus_.get(), wo));
    }
  }
  h->writes_ = std::make_unique<WriteQueue>(h->writer_.get(), &h->writer_mu_, std::move(hooks));
  if (!memory && options.preallocate_wal) {
    absl::Status s = h->PreallocateWal();
    if (!s.ok()) {
      // Only slower: commits grow the file as they would without it.
      Log(DefaultLogger(), LogLevel::kWarning, "database ", path,
          ": sizing the WAL file up front failed (commits grow it instead): ", s.ToString());
    }
  }
  return h;
}

SqliteHandle::~SqliteHandle() {
  if (checkpoint_thread_.joinable()) {
    {
      runloom::MutexLock l(&checkpoint_wake_mu_);
      checkpoint_stop_ = true;
    }
    checkpoint_thread_.join();
  }
  if (writer_ != nullptr) sqlite3_wal_hook(writer_->raw(), nullptr, nullptr);
  if (writer_ != nullptr && publisher_ != nullptr) publisher_->Detach(*writer_);
}

absl::Status SqliteHandle::PreallocateWal() {
  // Inside a write transaction: BEGIN IMMEDIATE holds the WAL's write lock,
  // so no connection of any process appends frames while the file grows.
  // Only bytes past the file's end are written, never a frame a reader may
  // read; zeros never pass a frame's checksum, so recovery stops before
  // them. Writes past a file's end cost more than overwrites (block
  // allocation): measured, the p99 from enqueue to first step at 1,900
  // runs/s fell by about a fifth (docs/performance.md).
  return Write([this](WriteTxn& txn) -> absl::Status {
    sqlite3_file* wal = nullptr;
    if (sqlite3_file_control(txn.db.raw(), "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal) !=
            SQLITE_OK ||
        wal == nullptr || wal->pMethods == nullptr) {
      return absl::OkStatus();  // no WAL file open: nothing to size
    }
    RUNLOOM_ASSIGN_OR_RETURN(const std::string page, txn.db.QueryText("PRAGMA page_size"));
    int64_t page_size = 0;
    if (!absl::SimpleAtoi(page, &page_size) || page_size < 512) {
      return absl::InternalError(absl::StrCat("PRAGMA page_size gave '", page, "'"));
    }
    // A WAL header of 32 bytes, then frames of a 24-byte header and a page.
    const int64_t want = std::min<int64_t>(
        kWalSizeLimit,
        32 + kPreallocatedFramesPer4 * checkpoint_pages_ / 4 * (page_size + 24));
    sqlite3_int64 size = 0;
    if (wal->pMethods->xFileSize(wal, &size) != SQLITE_OK) {
      return absl::UnavailableError("reading the WAL file's size failed");
    }
    static constexpr int kChunk = 1 << 16;
    static const std::vector<char> zeros(kChunk, 0);
    for (int64_t at = size; at < want; at += kChunk) {
      const int n = static_cast<int>(std::min<int64_t>(kChunk, want - at));
      const int rc = wal->pMethods->xWrite(wal, zeros.data(), n, at);
      if (rc != SQLITE_OK) {
        return absl::UnavailableError(
            absl::StrCat("writing the WAL file at ", at, ": ", sqlite3_errstr(rc)));
      }
    }
    if (size < want) {
      // Written back now, not by the kernel while the first commits append.
      const int rc = wal->pMethods->xSync(wal, SQLITE_SYNC_NORMAL);
      if (rc != SQLITE_OK) {
        return absl::UnavailableError(absl::StrCat("syncing the WAL file: ", sqlite3_errstr(rc)));
      }
    }
    return absl::OkStatus();
  });
}

int SqliteHandle::OnWalCommit(void* self, sqlite3*, const char*, int frames) {
  static_cast<SqliteHandle*>(self)->wal_frames_.store(frames, std::memory_order_relaxed);
  return SQLITE_OK;
}

void SqliteHandle::MaybeCheckpoint() {
  const int frames = wal_frames_.load(std::memory_order_relaxed);
  if (frames < checkpoint_pages_) return;  // cheap tests before the lock
  if (frames >= checkpointed_at_.load(std::memory_order_relaxed) &&
      frames < checkpoint_due_at_.load(std::memory_order_relaxed)) {
    return;  // Checkpoint() would find nothing to do
  }
  runloom::MutexLock l(&checkpoint_wake_mu_);
  checkpoint_wanted_ = true;
}

void SqliteHandle::CheckpointLoop() {
  for (;;) {
    {
      runloom::MutexLock l(&checkpoint_wake_mu_);
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(checkpoint_wake_mu_) {
        return checkpoint_wanted_ || checkpoint_stop_;
      };
      checkpoint_wake_mu_.Await(absl::Condition(&woken));
      if (checkpoint_stop_) return;
      checkpoint_wanted_ = false;
    }
    Checkpoint();
  }
}

void SqliteHandle::Checkpoint() {
  const int frames = wal_frames_.load(std::memory_order_relaxed);
  if (frames < checkpoint_pages_) return;
  runloom::MutexLock l(&checkpoint_mu_);
  // What MaybeCheckpoint tests, as this pass leaves it.
  absl::Cleanup publish = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(checkpoint_mu_) {
    checkpointed_at_.store(checkpointed_frames_, std::memory_order_relaxed);
    checkpoint_due_at_.store(
        std::min(checkpointed_frames_ + checkpoint_pages_,
                 std::max(2 * checkpoint_pages_, restart_tried_frames_ + checkpoint_pages_)),
        std::memory_order_relaxed);
  };
  // A WAL shorter than at the last checkpoint has restarted from its start.
  if (frames < checkpointed_frames_) checkpointed_frames_ = restart_tried_frames_ = 0;
  // PASSIVE checkpoints alone let the WAL grow without end under continuous
  // writes (measured: 9 MB per 1,000 runs, 92 MB after 10,000): readers'
  // snapshots keep its last pages from being copied, and the WAL starts over
  // only once every page is. Past twice the interval, a RESTART checkpoint
  // waits briefly for readers to move on; if they do not, it is tried again
  // an interval later, not after every group.
  if (frames >= 2 * checkpoint_pages_ && frames - restart_tried_frames_ >= checkpoint_pages_) {
    restart_tried_frames_ = frames;
    checkpointed_frames_ = frames;
    // A RESTART blocks new writers (their BEGIN IMMEDIATE) from its start to
    // its end, copying included; PASSIVE ones first copy, without blocking
    // anyone, every frame no reader pins, so the RESTART that follows copies
    // only what was appended meanwhile. One PASSIVE of ~8,000 frames leaves
    // the ~1,000 appended while it copied, which the RESTART then copied with
    // the writers paused (5-25 ms each, every ~190 ms at 1,900 runs/s: the
    // p99 from enqueue to first step); each further PASSIVE copies what was
    // appended during the one before, a few hundred frames, then tens, and
    // the RESTART's pause fell to 3.5-5.5 ms. Measured (runloom bench, 3,000
    // runs): with no PASSIVE, each RESTART held the writers' BEGIN 34-54 ms.
    // Each PASSIVE reports the frames it found and copied; what is appended
    // while it copies is left for the next, so stop once a pass had little
    // to copy (what it leaves is less still), or once readers' snapshots
    // kept it from copying what it found: only the RESTART's wait for those
    // readers helps then, and more passes would only let the WAL grow.
    int copied_before = 0;
    for (int pass = 0; pass < kMaxPassivesBeforeRestart; ++pass) {
      int log = 0;
      int copied = 0;
      const int rc = sqlite3_wal_checkpoint_v2(checkpointer_->raw(), nullptr,
                                               SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
      if (rc != SQLITE_OK || log - copied > kRestartRemainderFrames ||
          copied - copied_before <= kRestartRemainderFrames) {
        break;
      }
      copied_before = copied;
    }
    // This process's writers pause for the RESTART (they would wait at their
    // BEGIN anyway): competing with back-to-back write transactions for the
    // WAL's write lock, its busy handler starves and it gives up, and the WAL
    // grows on (measured: 6,000-9,000 pages of 12,000 in
    // TheWalStartsOverUnderContinuousWritesAndReads, against its 3,000).
    runloom::MutexLock writes_paused(&writer_mu_);
    // Waits through the checkpointer's busy timeout, kRestartWait.
    sqlite3_wal_checkpoint_v2(checkpointer_->raw(), nullptr, SQLITE_CHECKPOINT_RESTART, nullptr,
                              nullptr);
    return;
  }
  if (frames - checkpointed_frames_ < checkpoint_pages_) return;
  checkpointed_frames_ = frames;
  // PASSIVE never waits for readers or the writer; whatever it cannot copy
  // now is copied by a later one. Errors (SQLITE_BUSY) only postpone it.
  sqlite3_wal_checkpoint_v2(checkpointer_->raw(), nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr,
                            nullptr);
}

absl::Time SqliteHandle::Now() const { return FromMicros(ToMicros(clock_->Now())); }

std::string SqliteHandle::NewLeaseToken() { return NewToken(gen_); }

absl::StatusOr<std::unique_ptr<Db>> SqliteHandle::AcquireReader() {
  {
    runloom::MutexLock l(&readers_mu_);
    auto available = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(readers_mu_) {
      return !idle_readers_.empty() || open_readers_ < kMaxReaders;
    };
    readers_mu_.Await(absl::Condition(&available));
    if (!idle_readers_.empty()) {
      std::unique_ptr<Db> db = std::move(idle_readers_.back());
      idle_readers_.pop_back();
      return db;
    }
    ++open_readers_;
  }
  absl::StatusOr<std::unique_ptr<Db>> db = OpenReader(path_, busy_timeout_, clock_);
  if (!db.ok()) {
    runloom::MutexLock l(&readers_mu_);
    --open_readers_;
  }
  return db;
}

void SqliteHandle::ReleaseReader(std::unique_ptr<Db> db) {
  runloom::MutexLock l(&readers_mu_);
  idle_readers_.push_back(std::move(db));
}

void SqliteHandle::NotifyProduced() {
  runloom::MutexLock l(&signal_mu_);
  ++produced_;
}

uint64_t SqliteHandle::AwaitProduced(uint64_t seen, uint64_t interrupts_seen, absl::Time deadline) {
  runloom::MutexLock l(&signal_mu_);
  auto ready = [this, seen, interrupts_seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(signal_mu_) {
    return produced_ != seen || interrupts_ != interrupts_seen;
  };
  clock_->AwaitWithDeadline(&signal_mu_, absl::Condition(&ready), deadline);
  return produced_;
}

void SqliteHandle::Interrupt() {
  runloom::MutexLock l(&signal_mu_);
  ++interrupts_;
}

uint64_t SqliteHandle::interrupts() {
  runloom::MutexLock l(&signal_mu_);
  return interrupts_;
}

}  // namespace runloom::store_internal
