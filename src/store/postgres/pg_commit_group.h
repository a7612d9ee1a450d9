// Group commit of the PostgreSQL store's fenced run writes (Store::Commit),
// across runs, as the SQLite store's WriteQueue and LevelDB's DBImpl::Write.
//
// Callers enqueue a write and block. The caller at the front becomes the
// leader: it takes the queued writes (up to kMaxGroup, at most one per run)
// and applies them in ONE transaction: one statement locks every run's row
// (`WHERE id = ANY($1) ORDER BY id FOR UPDATE`, so concurrent groups lock in
// one order and cannot deadlock on runs), each write's fence is checked on
// the client, and the writes that pass send their statements in the same
// pipeline as COMMIT. A write whose fence fails gets its own error
// (kAborted, kFailedPrecondition, kNotFound as for a lone Commit) and writes
// nothing; the others commit. So many executors' step records share one
// BEGIN, one lock statement, one COMMIT and one WAL flush.
//
// If the group's transaction fails for a reason other than the connection
// (a statement of one write refused by a constraint, say), nothing of it
// committed: every write is then applied again alone (its own transaction),
// so each gets its own outcome. A lost connection or an unknown commit
// outcome fails every write of the group with that kUnavailable.
//
// Thread-safety: Commit() may be called from any thread.
#pragma once

#include "runloom/mutex.h"
#include "runloom/store.h"

#include "store/postgres/pg_handle.h"
#include "store/write_checks.h"

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"

#include <cstddef>
#include <deque>
#include <vector>

namespace runloom::store_internal {

class PgCommitGroup {
 public:
  // Most writes one transaction takes (bounds its statement count).
  static constexpr size_t kMaxGroup = 128;

  // `h` must outlive this.
  explicit PgCommitGroup(PgHandle* h) : h_(h) {}
  PgCommitGroup(const PgCommitGroup&) = delete;
  PgCommitGroup& operator=(const PgCommitGroup&) = delete;

  // Applies `write` (serialized as `encoded`) with its fence check; returns
  // its own outcome (see above).
  absl::Status Commit(const RunWrite& write, const EncodedWrite& encoded) ABSL_LOCKS_EXCLUDED(mu_);

  // Transactions run so far (groups), and writes in them.
  uint64_t TEST_groups() ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t TEST_writes() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Writer {
    Writer(const RunWrite& w, const EncodedWrite& e) : write(w), encoded(e) {}
    const RunWrite& write;
    const EncodedWrite& encoded;
    absl::Status status;
    bool done = false;  // guarded by PgCommitGroup::mu_
    runloom::CondVar cv;
  };

  // Removes the next group from writers_ (at most one write per run), in
  // run id order.
  std::vector<Writer*> TakeGroupLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `group` and sets each writer's status.
  void RunGroup(const std::vector<Writer*>& group);
  // The group's transaction. Sets *apart when the group must be applied
  // one write at a time instead (nothing committed).
  absl::Status RunGroupTxn(const std::vector<Writer*>& group, bool* apart);

  PgHandle* const h_;

  runloom::Mutex mu_;
  std::deque<Writer*> writers_ ABSL_GUARDED_BY(mu_);
  bool leader_active_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t groups_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t writes_ ABSL_GUARDED_BY(mu_) = 0;
};

// Applies `write` alone, in its own transaction (the path of a group that
// failed as a whole).
absl::Status PgCommitAlone(PgHandle& h, const RunWrite& write, const EncodedWrite& encoded);

}  // namespace runloom::store_internal
