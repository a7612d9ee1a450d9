#include "store/sqlite/write_queue.h"

#include "core/crash_point.h"
#include "core/log.h"
#include "core/status_macros.h"
#include "store/internal/group_leader.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <utility>

namespace runloom::store_internal {
namespace {
constexpr char kBegin[] = "BEGIN IMMEDIATE";
constexpr char kCommit[] = "COMMIT";
constexpr char kRollback[] = "ROLLBACK";
constexpr char kSavepoint[] = "SAVEPOINT runloom_write";
constexpr char kReleaseSavepoint[] = "RELEASE runloom_write";
constexpr char kRollbackTo[] = "ROLLBACK TO runloom_write";
// Groups one leader runs before handing over.
constexpr int kMaxRounds = 8;
}  // namespace

WriteQueue::WriteQueue(Db* db, runloom::Mutex* db_mu, Hooks hooks)
    : db_(db), db_mu_(db_mu), hooks_(std::move(hooks)) {}

absl::Status WriteQueue::poisoned() {
  runloom::MutexLock l(&mu_);
  return poisoned_;
}

size_t WriteQueue::TEST_QueueLength() {
  runloom::MutexLock l(&mu_);
  return writers_.size();
}

uint64_t WriteQueue::TEST_groups() {
  runloom::MutexLock l(&mu_);
  return groups_;
}

uint64_t WriteQueue::TEST_ops() {
  runloom::MutexLock l(&mu_);
  return ops_;
}

absl::Status WriteQueue::Write(WriteOp op) {
  Writer w(op);
  mu_.Lock();
  // The front writer leads once the current leader has handed over.
  auto no_leader = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !leader_active_; };
  if (!QueueAndAwaitTurn(mu_, writers_, w, no_leader)) {
    mu_.Unlock();
    return w.status;
  }
  leader_active_ = true;
  // This thread leads. It keeps leading while writers are queued (up to
  // kMaxRounds groups): it is running already, whereas handing over means
  // waking a sleeping thread first.
  for (int round = 0;; ++round) {
    // The previous group's writers rejoin this one (group_leader.h).
    YieldForRejoiningWriters(mu_, writers_, last_group_size_);
    RunNextGroupLocked();
    if (writers_.empty()) break;
    // Past kMaxRounds this thread hands over, but not to a suspended fiber
    // (group_leader.h, TurnSignal): it leads that one's group itself.
    if (round + 1 >= kMaxRounds && !writers_.front()->cv.suspends()) break;
  }
  leader_active_ = false;
  if (!writers_.empty()) writers_.front()->cv.Signal();  // the next leader
  mu_.Unlock();
  if (hooks_.after_group) hooks_.after_group();
  return w.status;
}

void WriteQueue::RunNextGroupLocked() {
  // Run the group without holding mu_, so the next group can queue up.
  const size_t n = std::min(writers_.size(), kMaxGroup);
  last_group_size_ = n;
  ++groups_;
  ops_ += n;
  std::vector<Writer*> group(writers_.begin(), writers_.begin() + static_cast<ptrdiff_t>(n));
  absl::Status poison = poisoned_;
  mu_.Unlock();

  bool produced = false;
  bool committed = false;  // every failure of the group as a whole fails all its ops
  if (!poison.ok()) {
    FailGroup(group, poison);
  } else {
    poison = RunGroup(group);
    for (Writer* g : group) produced = produced || (g->produced && g->status.ok());
    for (Writer* g : group) committed = committed || g->status.ok();
  }
  if (produced && hooks_.on_produced) hooks_.on_produced();
  if (hooks_.after_transaction) hooks_.after_transaction(committed);

  mu_.Lock();
  if (!poison.ok() && poisoned_.ok()) poisoned_ = poison;
  // The group is still at the front: nobody else pops.
  for (size_t i = 0; i < n; ++i) {
    Writer* g = writers_.front();
    writers_.pop_front();
    g->done = true;
    g->cv.Signal();  // the leader's own writer is not waiting: a no-op
  }
}

void WriteQueue::FailGroup(const std::vector<Writer*>& group, const absl::Status& s) {
  for (Writer* g : group) {
    if (!g->ran || g->status.ok()) g->status = s;
  }
}

absl::Status WriteQueue::Step(const char* sql) {
  absl::StatusOr<Statement> st = db_->Prepare(sql);
  if (!st.ok()) return st.status();
  return st->Run();
}

absl::Status WriteQueue::RunGroup(const std::vector<Writer*>& group) {
  runloom::MutexLock db_lock(db_mu_);
  // Fast path: no savepoints. A failing op almost always fails on its checks
  // (a stale token, a moved status) before it writes anything, and then
  // there is nothing to undo. Only when a failed op did change rows is the
  // transaction rolled back and the group run again with a savepoint per op.
  bool retry_with_savepoints = false;
  absl::Status s = RunGroupOnce(group, /*savepoints=*/false, &retry_with_savepoints);
  if (!retry_with_savepoints) return s;
  for (Writer* g : group) {
    g->status = absl::OkStatus();
    g->ran = false;
    g->produced = false;
  }
  return RunGroupOnce(group, /*savepoints=*/group.size() > 1, nullptr);
}

absl::Status WriteQueue::RunGroupOnce(const std::vector<Writer*>& group, bool savepoints,
                                      bool* retry_with_savepoints) {
  absl::Status begin = Step(kBegin);
  if (!begin.ok()) {
    FailGroup(group, Annotate(begin, absl::StrCat("database ", db_->path(),
                                                  ": starting a write transaction")));
    return absl::OkStatus();
  }
  // A ROLLBACK after a failure: the failure `after` is what the group
  // reports; a failed rollback is logged, since the connection may still
  // hold the transaction (the next BEGIN would then fail).
  auto rollback_logged = [&](const absl::Status& after) {
    absl::Status rb = Step(kRollback);
    if (!rb.ok()) {
      Log(DefaultLogger(), LogLevel::kWarning, "database ", db_->path(), ": ROLLBACK failed after ",
          after.ToString(), ": ", rb.ToString());
    }
  };
  // Rolls the whole transaction back (nothing of it is committed, so the
  // outcome is known) and fails the group.
  auto abort_all = [&](const absl::Status& why) {
    if (!db_->autocommit()) rollback_logged(why);  // best effort; `why` is reported
    FailGroup(group, absl::UnavailableError(absl::StrCat(
                         "database ", db_->path(),
                         ": write transaction rolled back: ", why.ToString(), "; retry")));
    return absl::OkStatus();
  };
  for (Writer* g : group) {
    if (savepoints) {
      absl::Status sp = Step(kSavepoint);
      if (!sp.ok()) return abort_all(sp);
    }
    const sqlite3_int64 changes_before = sqlite3_total_changes64(db_->raw());
    WriteTxn txn{*db_};
    g->status = g->op(txn);
    g->ran = true;
    if (db_->autocommit()) {
      // SQLite rolled the transaction back by itself (I/O error, disk full).
      absl::Status why =
          g->status.ok() ? absl::InternalError("op left no transaction open") : g->status;
      g->status = absl::OkStatus();  // so FailGroup replaces it too
      return abort_all(why);
    }
    if (g->status.ok()) {
      g->produced = txn.produced_message;
      if (savepoints) {
        absl::Status rel = Step(kReleaseSavepoint);
        if (!rel.ok()) return abort_all(rel);
      }
    } else if (savepoints) {
      absl::Status rb = Step(kRollbackTo);
      if (rb.ok()) rb = Step(kReleaseSavepoint);
      if (!rb.ok()) return abort_all(rb);
    } else if (sqlite3_total_changes64(db_->raw()) == changes_before) {
      // Failed before writing: nothing to undo; its error is its result.
    } else if (retry_with_savepoints != nullptr && group.size() > 1) {
      absl::Status rb = Step(kRollback);
      if (!rb.ok()) return abort_all(rb);
      *retry_with_savepoints = true;
      return absl::OkStatus();
    } else {
      absl::Status rb = Step(kRollback);
      if (!rb.ok()) return abort_all(rb);
      return absl::OkStatus();  // a lone op: its own error is its result
    }
  }
  RUNLOOM_CRASH_POINT(CrashPoint::kBeforeStoreCommit);
  absl::Status commit = Step(kCommit);
  if (commit.ok()) {
    RUNLOOM_CRASH_POINT(CrashPoint::kAfterStoreCommit);
    return absl::OkStatus();
  }
  const int rc = sqlite3_extended_errcode(db_->raw());
  if ((rc & 0xff) == SQLITE_BUSY && !db_->autocommit()) {
    // SQLITE_BUSY on COMMIT leaves the transaction open: nothing was written.
    return abort_all(commit);
  }
  if (!db_->autocommit()) rollback_logged(commit);
  absl::Status poison = absl::DataLossError(absl::StrCat(
      "database ", db_->path(), ": commit failed and its outcome is unknown (", commit.ToString(),
      "); this store handle refuses further writes; reopen the database"));
  FailGroup(group, poison);
  return poison;
}

}  // namespace runloom::store_internal
