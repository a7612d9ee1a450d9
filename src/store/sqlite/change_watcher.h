// Live changes of a SQLite database, published on an EventBus.
//
// CommitPublisher: this handle's own commits. An SQLite update hook on the
// writer connection notes the rowid of every `runs` row a write inserts or
// updates; the notes of an op that fails, or of a transaction rolled back,
// are dropped; after the group commits, the write leader reads those rows'
// status and last_event_seq and publishes them, outside the database mutex.
//
// ChangeWatcher: other processes' (and other handles') commits to the same
// file. A thread waits on inotify for writes to the database's -wal file
// and the file itself (or at most kFallbackInterval when inotify is
// unavailable), confirms a commit by another connection with
// `PRAGMA data_version`, then reads the runs subscribers wait on (and, when
// someone watches every run, the runs updated lately) and publishes what
// differs from its last read. With nobody subscribed it reads nothing.
//
// Thread-safety: see each class.
#pragma once

#include "runloom/event_bus.h"
#include "runloom/mutex.h"

#include "store/sqlite/db.h"
#include "store/sqlite/write_queue.h"

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace runloom::store_internal {

class ChangeWatcher;

// Thread-safety: Attach/Detach by the handle's owner; RunOp and
// AfterTransaction only by the write leader (the WriteQueue runs one group
// at a time, so the notes need no lock).
class CommitPublisher {
 public:
  // `bus` must outlive this.
  explicit CommitPublisher(EventBus* bus) : bus_(bus) {}
  CommitPublisher(const CommitPublisher&) = delete;
  CommitPublisher& operator=(const CommitPublisher&) = delete;

  // Installs (removes) the update and rollback hooks on `writer`.
  void Attach(Db& writer);
  void Detach(Db& writer);

  // Runs `op`, dropping the notes it made if it fails (its savepoint, or the
  // whole transaction, is rolled back).
  absl::Status RunOp(WriteOp op, WriteTxn& txn);

  // The WriteQueue's after_transaction hook: when `committed`, reads the
  // noted runs on `writer` (under `writer_mu`) and publishes them; then
  // forgets the notes. `also` (may be null) is told what was published.
  void AfterTransaction(bool committed, Db& writer, runloom::Mutex& writer_mu, ChangeWatcher* also);

 private:
  static void OnUpdate(void* self, int op, const char* db, const char* table, sqlite3_int64 rowid);
  static void OnRollback(void* self);

  EventBus* const bus_;
  // Rowids of `runs` rows written by the current transaction's kept ops.
  std::vector<int64_t> touched_;
};

class ChangeWatcher {
 public:
  // Longest wait between two checks when inotify reports nothing.
  static constexpr absl::Duration kFallbackInterval = absl::Seconds(1);
  // When nobody subscribes: how often the thread looks whether someone does
  // (the first foreign change after a first subscription waits this long at
  // most; later ones are immediate).
  static constexpr absl::Duration kIdleInterval = absl::Milliseconds(100);
  // inotify reports the write of a commit's WAL frames, which comes just
  // before the commit is visible (the wal-index header in shared memory,
  // which inotify does not see). So after a wake-up the watcher checks again
  // after kFirstFollowUp, doubling kFollowUps times (1 + 2 + ... + 32 ms).
  static constexpr absl::Duration kFirstFollowUp = absl::Milliseconds(1);
  static constexpr int kFollowUps = 6;
  // How far behind the newest updated_at the all-runs scan reaches back
  // (other processes' clocks, and commits that took their time).
  static constexpr absl::Duration kAllRunsSlack = absl::Seconds(2);

  struct Options {
    absl::Duration busy_timeout = absl::Seconds(10);
    absl::Duration fallback_interval = kFallbackInterval;
    bool use_inotify = true;  // false: the fallback interval only (tests)
  };

  // Opens a connection of its own to `path` and starts the thread.
  // kUnavailable when the connection or the thread cannot be set up.
  static absl::StatusOr<std::unique_ptr<ChangeWatcher>> Start(const std::string& path,
                                                              EventBus* bus,
                                                              const Options& options);
  // Use Start().
  ChangeWatcher(std::unique_ptr<Db> db, EventBus* bus) : db_(std::move(db)), bus_(bus) {}
  ChangeWatcher(const ChangeWatcher&) = delete;
  ChangeWatcher& operator=(const ChangeWatcher&) = delete;
  // Stops and joins the thread.
  ~ChangeWatcher();

  // Records changes this process published itself, so the watcher does not
  // publish them again when it sees the commit. Thread-safe.
  void NoteLocal(const std::vector<RunChange>& changes) ABSL_LOCKS_EXCLUDED(known_mu_);

  // Checks run so far (reads of data_version), and whether inotify is used.
  uint64_t TEST_checks() const { return checks_.load(); }
  bool TEST_inotify() const { return inotify_fd_ >= 0; }
  // The last error a check met (OK if none); checks go on after errors.
  absl::Status TEST_last_error() ABSL_LOCKS_EXCLUDED(known_mu_);

 private:
  struct Known {
    RunStatus status = RunStatus::kQueued;
    int64_t last_event_seq = 0;
    int64_t updated_at = 0;  // micros; 0 = not read by the all-runs scan
  };
  void Loop();
  enum class Woken { kStop, kNotified, kTimeout };
  // Waits for inotify, the stop signal or `timeout`.
  Woken Wait(absl::Duration timeout);
  absl::Status Check() ABSL_LOCKS_EXCLUDED(known_mu_);
  absl::StatusOr<std::vector<RunChange>> ReadChanges(const EventBus::Interest& interest)
      ABSL_LOCKS_EXCLUDED(known_mu_);

  // Used only by the thread (and Start before it runs).
  const std::unique_ptr<Db> db_;
  EventBus* const bus_;
  int64_t data_version_ = -1;
  int64_t all_runs_watermark_ = 0;  // newest updated_at the all-runs scan saw

  // Constant after Start.
  absl::Duration fallback_interval_ = kFallbackInterval;
  int inotify_fd_ = -1;  // -1: not available, fallback interval only
  int stop_fd_ = -1;     // an eventfd written by the destructor
  std::thread thread_;

  std::atomic<uint64_t> checks_{0};
  runloom::Mutex known_mu_;
  // What the watcher (or NoteLocal) last saw of each run it reads.
  absl::flat_hash_map<std::string, Known> known_ ABSL_GUARDED_BY(known_mu_);
  absl::Status last_error_ ABSL_GUARDED_BY(known_mu_);
};

}  // namespace runloom::store_internal
