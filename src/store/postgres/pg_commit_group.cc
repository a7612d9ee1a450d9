#include "store/postgres/pg_commit_group.h"

#include "core/status_macros.h"
#include "store/internal/group_leader.h"
#include "store/postgres/pg_store.h"
#include "store/postgres/pg_write_batch.h"

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

#include <algorithm>
#include <string>
#include <utility>

namespace runloom::store_internal {
namespace {

// The fence columns of PgLockFence, then the id. ORDER BY under FOR UPDATE:
// the rows are locked in id order (LockRows sits above the sort).
constexpr char kLockFences[] =
    "SELECT status, lease_token, last_event_seq, lease_expires_at, lease_owner, attempts, "
    "cancel_requested, runloom_now(), id FROM runs WHERE id = ANY($1::text[]) "
    "ORDER BY id FOR UPDATE";
constexpr int kIdColumn = 8;
constexpr int kNowColumn = 7;

}  // namespace

absl::Status PgCommitAlone(PgHandle& h, const RunWrite& write, const EncodedWrite& encoded) {
  return h.Txn([&](PgConn& c) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(auto locked, PgLockFence(c, write.run_id));
    return PgCommitFenced(c, locked.second, write, encoded, locked.first);
  });
}

absl::Status PgCommitGroup::Commit(const RunWrite& write, const EncodedWrite& encoded) {
  Writer w(write, encoded);
  mu_.Lock();
  // A writer whose run has a write in the running group stays queued for
  // the next group.
  if (!QueueAndAwaitTurn(mu_, writers_, leader_active_, w)) {
    mu_.Unlock();
    return w.status;
  }
  std::vector<Writer*> group = TakeGroupLocked();
  ++groups_;
  writes_ += group.size();
  mu_.Unlock();

  RunGroup(group);

  mu_.Lock();
  for (Writer* g : group) {
    g->done = true;
    g->cv.Signal();  // the leader's own writer is not waiting: a no-op
  }
  leader_active_ = false;
  if (!writers_.empty()) writers_.front()->cv.Signal();  // the next leader
  mu_.Unlock();
  return w.status;
}

std::vector<PgCommitGroup::Writer*> PgCommitGroup::TakeGroupLocked() {
  std::vector<Writer*> group;
  absl::flat_hash_set<std::string> runs;
  std::deque<Writer*> rest;
  for (Writer* w : writers_) {
    if (group.size() < kMaxGroup && runs.insert(w->write.run_id).second) {
      group.push_back(w);
    } else {
      rest.push_back(w);
    }
  }
  writers_ = std::move(rest);
  std::sort(group.begin(), group.end(),
            [](const Writer* a, const Writer* b) { return a->write.run_id < b->write.run_id; });
  return group;
}

void PgCommitGroup::RunGroup(const std::vector<Writer*>& group) {
  bool apart = false;
  absl::Status s = RunGroupTxn(group, &apart);
  if (s.ok()) return;  // each writer has its own status
  if (group.size() > 1 && (apart || s.code() != absl::StatusCode::kUnavailable)) {
    // Nothing committed, and the connection is fine: one write failed the
    // transaction. Each write alone finds its own outcome.
    for (Writer* g : group) g->status = PgCommitAlone(*h_, g->write, g->encoded);
    return;
  }
  for (Writer* g : group) {
    if (g->status.ok()) g->status = s;  // a refused write keeps its refusal
  }
}

absl::Status PgCommitGroup::RunGroupTxn(const std::vector<Writer*>& group, bool* apart) {
  std::vector<std::string> ids;
  ids.reserve(group.size());
  for (const Writer* g : group) ids.push_back(g->write.run_id);
  return h_->Txn([&](PgConn& c) -> absl::Status {
    *apart = false;  // the body runs again after a serialization failure
    for (Writer* g : group) g->status = absl::OkStatus();
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kLockFences, PgParams().TextArray(ids)));
    PgWriteBatch batch;
    absl::Time now;
    absl::flat_hash_map<std::string, int> row_of;
    for (int i = 0; i < r.rows(); ++i) row_of[r.row(i).ColumnText(kIdColumn)] = i;
    for (Writer* g : group) {
      const RunWrite& w = g->write;
      auto it = row_of.find(w.run_id);
      if (it == row_of.end()) {
        g->status = absl::NotFoundError(absl::StrCat("run ", w.run_id, " not found"));
        continue;
      }
      const PgRow row = r.row(it->second);
      now = row.ColumnTime(kNowColumn);
      absl::StatusOr<Fence> f = PgFenceFromRow(row, w.run_id);
      g->status = f.ok() ? PgWriteBatch::Check(w, g->encoded, *f) : f.status();
      if (!g->status.ok()) continue;  // refused: nothing of it is written
      absl::Status s = batch.Add(c, now, w, g->encoded, *f);
      if (!s.ok()) {
        // A statement failed (the transaction is aborted): the group is
        // applied again write by write, unless the connection is gone.
        *apart = c.ok();
        return s;
      }
    }
    batch.Defer(c, now);
    return absl::OkStatus();
  });
}

uint64_t PgCommitGroup::TEST_groups() {
  runloom::MutexLock l(&mu_);
  return groups_;
}

uint64_t PgCommitGroup::TEST_writes() {
  runloom::MutexLock l(&mu_);
  return writes_;
}

}  // namespace runloom::store_internal
