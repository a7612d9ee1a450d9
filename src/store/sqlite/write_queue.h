// Group commit for one SQLite writer connection, as LevelDB's DBImpl::Write.
//
// Callers enqueue a write op and block. The caller at the front of the queue
// becomes the leader: it takes every queued op (up to kMaxGroup), runs them
// in one BEGIN IMMEDIATE transaction, each inside its own SAVEPOINT so a
// refused op is rolled back alone, commits once, and wakes every caller with
// its own result. Many small writes thus share one commit (and one fsync with
// synchronous=full). A leader goes on with the next group while writers are
// queued (a few rounds), since waking a sleeping thread to lead costs more
// than a group.
//
// If COMMIT fails with anything but SQLITE_BUSY, whether the group reached
// the disk is unknown: the queue is poisoned, and that write and every later
// one fail with kDataLoss until the database is reopened.
//
// Thread-safety: Write() may be called from any thread. Ops run on the
// leader's thread, one at a time, while their callers wait.
#pragma once

#include "runloom/mutex.h"

#include "store/internal/group_leader.h"

#include "store/sqlite/db.h"

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

namespace runloom::store_internal {

// What an op sees: the writer connection inside an open transaction.
struct WriteTxn {
  Db& db;
  // Set by an op that inserted a queue message; once the commit succeeds the
  // queue's `on_produced` callback runs (it wakes in-process consumers).
  bool produced_message = false;
};

// An op returns OK to keep its writes, or an error to have them rolled back.
// An op must not BEGIN/COMMIT itself.
using WriteOp = absl::FunctionRef<absl::Status(WriteTxn&)>;

class WriteQueue {
 public:
  // Most ops one transaction takes (bounds the latency of the last caller).
  static constexpr size_t kMaxGroup = 256;

  // Callbacks, run on the leader's thread; each may be empty.
  struct Hooks {
    // After a commit in which some kept op produced a queue message.
    std::function<void()> on_produced;
    // After the leader handed the queue to the next leader (so it does not
    // delay other writers): e.g. a WAL checkpoint.
    std::function<void()> after_group;
    // After each group's transaction, outside the database mutex; `committed`
    // is true when it committed with some op kept (the change publisher).
    std::function<void(bool committed)> after_transaction;
  };

  // `db` is used only while holding `*db_mu` (which readers sharing the same
  // connection also take). Pointers must outlive this.
  WriteQueue(Db* db, runloom::Mutex* db_mu, Hooks hooks);
  WriteQueue(const WriteQueue&) = delete;
  WriteQueue& operator=(const WriteQueue&) = delete;

  // Runs `op` in a transaction and returns its status, or the status of the
  // transaction if it failed as a whole (kUnavailable: busy or rolled back;
  // kDataLoss: poisoned).
  absl::Status Write(WriteOp op) ABSL_LOCKS_EXCLUDED(mu_);

  // OK, or the error that poisoned the queue.
  absl::Status poisoned() ABSL_LOCKS_EXCLUDED(mu_);

  // Writers queued now, including a running leader (tests build groups with it).
  size_t TEST_QueueLength() ABSL_LOCKS_EXCLUDED(mu_);
  // Transactions run so far (groups), and ops in them.
  uint64_t TEST_groups() ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t TEST_ops() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Writer {
    explicit Writer(WriteOp o) : op(o) {}
    WriteOp op;
    absl::Status status;
    bool ran = false;       // op executed (status is its own result)
    bool produced = false;  // op kept a produced queue message
    bool done = false;      // guarded by WriteQueue::mu_
    TurnSignal cv;
  };

  // Takes the group at the front of writers_, runs it (releasing mu_
  // meanwhile) and completes it.
  void RunNextGroupLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `group` in one transaction; sets each writer's status. Returns the
  // poison status if the commit outcome is unknown, else OK.
  absl::Status RunGroup(const std::vector<Writer*>& group);
  // One attempt at the group, with or without a savepoint per op. Without,
  // a failed op that changed rows rolls everything back and sets
  // *retry_with_savepoints (when not null) instead of failing the others.
  absl::Status RunGroupOnce(const std::vector<Writer*>& group, bool savepoints,
                            bool* retry_with_savepoints);
  // Fails every writer of `group` whose op did not fail by itself.
  static void FailGroup(const std::vector<Writer*>& group, const absl::Status& s);
  absl::Status Step(const char* sql);

  // Constant after construction.
  Db* const db_;
  runloom::Mutex* const db_mu_;
  const Hooks hooks_;

  runloom::Mutex mu_;
  std::deque<Writer*> writers_ ABSL_GUARDED_BY(mu_);
  absl::Status poisoned_ ABSL_GUARDED_BY(mu_);
  bool leader_active_ ABSL_GUARDED_BY(mu_) = false;
  size_t last_group_size_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t groups_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t ops_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace runloom::store_internal
