// Group commit of the PostgreSQL store's fenced run writes (Store::Commit)
// and leases (Store::AcquireLease), across runs, as the SQLite store's
// WriteQueue and LevelDB's DBImpl::Write.
//
// Callers enqueue an op and block. The caller at the front becomes a leader
// (while fewer than kMaxLeaders groups run): it takes the queued ops (up to
// kMaxGroup, at most one per run, none on a run another group holds) and
// applies them in ONE transaction: one statement locks every run's row
// (`WHERE id = ANY($1) ORDER BY id FOR UPDATE`, so concurrent groups lock in
// one order and cannot deadlock on runs), each op checks its run's fence on
// the client, and the ops that pass add their writes to a PgWriteBatch, sent
// as a few set-based statements in the same pipeline as COMMIT. An op whose
// fence fails gets its own error (kAborted, kFailedPrecondition, kNotFound as
// alone) and writes nothing; the others commit. So many executors' step
// records and leases share one BEGIN, one lock statement, one COMMIT and one
// WAL flush.
//
// If the group's transaction fails for a reason other than the connection
// (a statement refused by a constraint, say), nothing of it committed: every
// op is then applied again alone (its own transaction, the store's
// single-run path), so each gets its own outcome. A lost connection or an
// unknown commit outcome fails every op of the group with that kUnavailable.
//
// Thread-safety: Run() may be called from any thread.
#pragma once

#include "runloom/mutex.h"
#include "runloom/store.h"

#include "store/internal/group_leader.h"

#include "store/postgres/pg_handle.h"
#include "store/postgres/pg_write_batch.h"
#include "store/write_checks.h"

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace runloom::store_internal {

// One write of a group, on one run.
class PgGroupOp {
 public:
  virtual ~PgGroupOp() = default;
  virtual const std::string& run_id() const = 0;
  // Checks the op against its run's fence `f` (locked by this transaction)
  // at server time `now`, and adds its writes to `batch`. Sets status() to
  // its own outcome (a refusal adds nothing); returns an error only when a
  // statement on `c` failed (the transaction's error).
  virtual absl::Status AddTo(PgConn& c, absl::Time now, const Fence& f, PgWriteBatch& batch) = 0;
  // Applies the op alone in its own transaction; sets status().
  virtual void RunAlone(PgHandle& h) = 0;

  absl::Status status;  // the op's outcome
  // In a group: the id of the run's queue message when its row was locked
  // (nullopt: none). Set before AddTo.
  std::optional<int64_t> message_id;
};

class PgCommitGroup {
 public:
  // Most ops one transaction takes (bounds its statement sizes).
  static constexpr size_t kMaxGroup = 128;
  // Groups running at once, each on its own pooled connection. 2 measured
  // no faster than 1 under `runloom bench` (smaller groups, more commits).
  static constexpr int kMaxLeaders = 1;

  // `h` must outlive this.
  explicit PgCommitGroup(PgHandle* h) : h_(h) {}
  PgCommitGroup(const PgCommitGroup&) = delete;
  PgCommitGroup& operator=(const PgCommitGroup&) = delete;

  // Applies `op` in a group; its outcome is op->status.
  void Run(PgGroupOp* op) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Writer {
    explicit Writer(PgGroupOp* o) : op(o) {}
    PgGroupOp* op;
    bool done = false;  // guarded by PgCommitGroup::mu_
    TurnSignal cv;
  };

  // Removes the next group from writers_ (at most one op per run, none on
  // a run in flight; their runs become in flight), in run id order.
  std::vector<Writer*> TakeGroupLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Signals the front writer when it may lead (never a suspended fiber:
  // group_leader.h, TurnSignal).
  void WakeNextLeaderLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True when `w`, at the front, may start a group now: fewer than
  // kMaxLeaders run and none holds its run.
  bool CanLeadLocked(const Writer& w) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `group` and sets each op's status.
  void RunGroup(const std::vector<Writer*>& group);
  // The group's transaction. Sets *apart when the group must be applied one
  // op at a time instead (nothing committed).
  absl::Status RunGroupTxn(const std::vector<Writer*>& group, bool* apart);

  PgHandle* const h_;

  runloom::Mutex mu_;
  std::deque<Writer*> writers_ ABSL_GUARDED_BY(mu_);
  int leaders_ ABSL_GUARDED_BY(mu_) = 0;  // groups running
  // The runs of the running groups' ops.
  absl::flat_hash_set<std::string> in_flight_ ABSL_GUARDED_BY(mu_);
};

}  // namespace runloom::store_internal
