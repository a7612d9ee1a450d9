// The state shared by the SQLite Store and the SQLite Transport of one
// OpenSqlite() call: the connections, the group-commit writer, the clock and
// the in-process "a message was produced" signal.
//
// Thread-safety: every method is thread-safe. The writer connection is used
// only by the WriteQueue leader; a reader connection by one Read() at a time
// (a small pool, so reads run in parallel beside the writer under WAL). For
// ":memory:" reads use the writer connection under the writer's mutex.
#pragma once

#include "runloom/clock.h"
#include "runloom/mutex.h"
#include "runloom/sqlite.h"
#include "runloom/store.h"

#include "store/internal/removed_messages.h"
#include "store/sqlite/change_watcher.h"
#include "store/sqlite/db.h"
#include "store/sqlite/write_queue.h"

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
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

class SqliteHandle {
 public:
  // Opens the connections, sets the PRAGMAs and applies migrations.
  static absl::StatusOr<std::shared_ptr<SqliteHandle>> Open(const std::string& path,
                                                            const SqliteOptions& options);
  // Use Open().
  SqliteHandle(std::string path, Clock* clock) : path_(std::move(path)), clock_(clock) {}
  SqliteHandle(const SqliteHandle&) = delete;
  SqliteHandle& operator=(const SqliteHandle&) = delete;
  ~SqliteHandle();

  Clock* clock() const { return clock_; }
  // The clock's time, truncated to the stored precision (microseconds), so a
  // record returned by a write equals the same record read back.
  absl::Time Now() const;
  const std::string& path() const { return path_; }

  // Runs `op` in a group-committed write transaction (see WriteQueue).
  absl::Status Write(WriteOp op) {
    if (publisher_ == nullptr) return writes_->Write(op);
    return writes_->Write([&](WriteTxn& txn) { return publisher_->RunOp(op, txn); });
  }

  // Runs `fn(Db&)` on a reader connection and returns its result (an
  // absl::Status or absl::StatusOr, which also carries a failure to open a
  // reader connection).
  template <typename F>
  auto Read(F&& fn) -> decltype(fn(std::declval<Db&>())) {
    if (memory_) {
      runloom::MutexLock l(&writer_mu_);
      return std::forward<F>(fn)(*writer_);
    }
    absl::StatusOr<std::unique_ptr<Db>> db = AcquireReader();
    if (!db.ok()) return db.status();
    auto result = std::forward<F>(fn)(**db);
    ReleaseReader(*std::move(db));
    return result;
  }

  // A new random 128-bit lease token (hex).
  // REQUIRES: called from inside a write op (the writer serializes gen_).
  std::string NewLeaseToken();

  // ---- in-process message signal ----
  // Count of Interrupt() calls so far.
  uint64_t interrupts() ABSL_LOCKS_EXCLUDED(signal_mu_);
  // Waits until the count of commits that produced queue messages in this
  // process differs from `seen`, interrupts() differs from
  // `interrupts_seen`, or the clock reaches `deadline`. Returns that count.
  uint64_t AwaitProduced(uint64_t seen, uint64_t interrupts_seen, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(signal_mu_);
  // Wakes every current AwaitProduced caller.
  void Interrupt() ABSL_LOCKS_EXCLUDED(signal_mu_);

  // ---- messages a lease removed ----
  // The SQLite lease deletes its run's queue row in its own transaction (the
  // lease stands for the message from then on), so the consumer's Ack that
  // follows has nothing to do. NoteRemovedByLease records the id after the
  // commit; TakeRemovedByLease answers the Ack without touching the
  // database. Bounded: the oldest ids are forgotten (their Ack then reads).
  void NoteRemovedByLease(int64_t message_id) { removed_.Note(message_id); }
  bool TakeRemovedByLease(int64_t message_id) { return removed_.Take(message_id); }

 private:
  void NotifyProduced() ABSL_LOCKS_EXCLUDED(signal_mu_);
  // An idle reader connection, opened on demand up to kMaxReaders.
  absl::StatusOr<std::unique_ptr<Db>> AcquireReader() ABSL_LOCKS_EXCLUDED(readers_mu_);
  void ReleaseReader(std::unique_ptr<Db> db) ABSL_LOCKS_EXCLUDED(readers_mu_);
  // Wakes the checkpoint thread when Checkpoint() has something to do (the
  // WAL has grown by an interval, or restarted). Called by a write leader
  // after each group, once it released the queue (SQLite's own
  // auto-checkpoint would run inside the writer's COMMIT): two atomic loads,
  // and a lock only when a checkpoint is due.
  void MaybeCheckpoint() ABSL_LOCKS_EXCLUDED(checkpoint_wake_mu_);
  // The checkpoint thread: waits to be woken, then runs Checkpoint(), until
  // the destructor stops it. A checkpoint copies megabytes (about 30 ms at
  // the default interval) and no executor waits for it.
  void CheckpointLoop() ABSL_LOCKS_EXCLUDED(checkpoint_wake_mu_);
  // Runs a PASSIVE checkpoint on checkpointer_ every wal_checkpoint_pages
  // frames, and a RESTART one once the WAL is twice that.
  void Checkpoint() ABSL_LOCKS_EXCLUDED(checkpoint_mu_);
  // SqliteOptions::preallocate_wal, at the end of Open().
  absl::Status PreallocateWal();
  static int OnWalCommit(void* self, sqlite3* db, const char* name, int frames);

  // Constant after Open().
  const std::string path_;
  Clock* const clock_;
  bool memory_ = false;
  absl::Duration busy_timeout_;
  std::unique_ptr<Db> writer_;
  runloom::Mutex writer_mu_;  // taken by the WriteQueue leader (and ":memory:" reads)

  runloom::Mutex readers_mu_;
  std::vector<std::unique_ptr<Db>> idle_readers_ ABSL_GUARDED_BY(readers_mu_);
  int open_readers_ ABSL_GUARDED_BY(readers_mu_) = 0;
  std::unique_ptr<Db> checkpointer_;  // null for ":memory:"
  std::unique_ptr<WriteQueue> writes_;
  // With SqliteOptions::event_bus: publishes this handle's commits (null
  // otherwise), and other connections' (null also for ":memory:" or when
  // watch_other_processes is off).
  std::shared_ptr<EventBus> bus_;  // kept alive while the publisher and watcher use it
  std::unique_ptr<CommitPublisher> publisher_;
  std::unique_ptr<ChangeWatcher> watcher_;

  // Frames in the WAL after the last commit (set by the writer's WAL hook).
  std::atomic<int> wal_frames_{0};
  runloom::Mutex checkpoint_mu_;  // held by Checkpoint(), the checkpoint thread's
  // wal_frames_ when the last checkpoint ran (0 after the WAL restarted).
  int checkpointed_frames_ ABSL_GUARDED_BY(checkpoint_mu_) = 0;
  // wal_frames_ when the last RESTART checkpoint was tried (0 after the WAL
  // restarted).
  int restart_tried_frames_ ABSL_GUARDED_BY(checkpoint_mu_) = 0;
  // Copies of what Checkpoint() decides by, for MaybeCheckpoint: the frame
  // count at which it next has work (an interval past the last PASSIVE, or
  // past the last RESTART tried once the WAL is over two), and
  // checkpointed_frames_ (a count below it means the WAL restarted).
  std::atomic<int> checkpoint_due_at_{0};
  std::atomic<int> checkpointed_at_{0};
  int checkpoint_pages_ = 4000;  // SqliteOptions::wal_checkpoint_pages; constant after Open()
  runloom::Mutex checkpoint_wake_mu_;
  bool checkpoint_wanted_ ABSL_GUARDED_BY(checkpoint_wake_mu_) = false;
  bool checkpoint_stop_ ABSL_GUARDED_BY(checkpoint_wake_mu_) = false;
  std::thread checkpoint_thread_;  // not joinable for ":memory:"

  // Used only inside write ops, which the WriteQueue runs one at a time.
  absl::BitGen gen_;

  runloom::Mutex signal_mu_;
  uint64_t produced_ ABSL_GUARDED_BY(signal_mu_) = 0;
  uint64_t interrupts_ ABSL_GUARDED_BY(signal_mu_) = 0;

  RemovedMessages removed_{4096};
};

// ---- helpers shared by the store and the transport ----

// Makes sure the run has a pending (never claimed) queue message: keeps one,
// or replaces an in-flight one by a fresh row, visible at `now`. Returns true
// when a row was inserted.
// Inserts a queue message for a run that has none (a new run).
absl::Status InsertQueueMessage(Db& db, const std::string& run_id, absl::Time now);
absl::StatusOr<bool> EnsureQueueMessage(Db& db, const std::string& run_id, absl::Time now);

std::unique_ptr<Store> NewSqliteStore(std::shared_ptr<SqliteHandle> handle);
std::unique_ptr<Transport> NewSqliteTransport(std::shared_ptr<SqliteHandle> handle,
                                              const TransportOptions& options);

}  // namespace runloom::store_internal
