#include "store/postgres/pg_commit_group.h"

#include "core/status_macros.h"
#include "store/internal/group_leader.h"
#include "store/postgres/pg_store.h"
#include "store/postgres/pg_write_batch.h"

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

namespace runloom::store_internal {
namespace {

// The fence columns of PgLockFence, then the id, then the id of the run's
// queue message (NULL: none; a message of a locked run only changes under
// its lock). ORDER BY under FOR UPDATE: the rows are locked in id order
// (LockRows sits above the sort). `(SELECT runloom_now())` is evaluated once
// per statement (an init plan); a bare runloom_now() ran once per row, each
// call a query of the clock table (~6 calls per run of `runloom bench`).
constexpr char kLockFences[] = "SELECT " RUNLOOM_FENCE_COLUMNS
                               ", (SELECT runloom_now()), id, "
                               "(SELECT q.id FROM queue q WHERE q.run_id = runs.id) AS "
                               "message_id "
                               "FROM runs WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE";
constexpr int kNowColumn = kFenceColumnCount;
constexpr int kIdColumn = kFenceColumnCount + 1;
constexpr int kMessageColumn = kFenceColumnCount + 2;
}  // namespace

void PgCommitGroup::Run(PgGroupOp* op) {
  Writer w(op);
  mu_.Lock();
  // The front op leads while fewer than kMaxLeaders groups run, unless its
  // run is in one of them (it then waits for that group to end).
  auto can_lead = [this, &w]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return CanLeadLocked(w); };
  if (!QueueAndAwaitTurn(mu_, writers_, w, can_lead)) {
    mu_.Unlock();
    return;
  }
  ++leaders_;
  std::vector<Writer*> group = TakeGroupLocked();
  WakeNextLeaderLocked();
  mu_.Unlock();

  while (true) {
    RunGroup(group);

    mu_.Lock();
    for (Writer* g : group) {
      in_flight_.erase(g->op->run_id());
      g->done = true;
      g->cv.Signal();  // the leader's own writer is not waiting: a no-op
    }
    --leaders_;
    // A suspended fiber at the front is not handed the lead (group_leader.h,
    // TurnSignal): this thread leads its group.
    if (writers_.empty() || !writers_.front()->cv.suspends() ||
        !CanLeadLocked(*writers_.front())) {
      break;
    }
    // The group's fibers rejoin the next one, as a hand-over's wake-up let
    // them (group_leader.h).
    YieldForRejoiningWriters(mu_, writers_, group.size());
    if (writers_.empty() || !CanLeadLocked(*writers_.front())) break;
    ++leaders_;
    group = TakeGroupLocked();
    mu_.Unlock();
  }
  WakeNextLeaderLocked();
  mu_.Unlock();
}

bool PgCommitGroup::CanLeadLocked(const Writer& w) const {
  return leaders_ < kMaxLeaders && !in_flight_.contains(w.op->run_id());
}

void PgCommitGroup::WakeNextLeaderLocked() {
  if (!writers_.empty() && leaders_ < kMaxLeaders && !writers_.front()->cv.suspends()) {
    writers_.front()->cv.Signal();
  }
}

std::vector<PgCommitGroup::Writer*> PgCommitGroup::TakeGroupLocked() {
  std::vector<Writer*> group;
  std::deque<Writer*> rest;
  for (Writer* w : writers_) {
    // One op per run in a group, and none on a run another group holds.
    if (group.size() < kMaxGroup && in_flight_.insert(w->op->run_id()).second) {
      group.push_back(w);
    } else {
      rest.push_back(w);
    }
  }
  writers_ = std::move(rest);
  std::sort(group.begin(), group.end(),
            [](const Writer* a, const Writer* b) { return a->op->run_id() < b->op->run_id(); });
  return group;
}

void PgCommitGroup::RunGroup(const std::vector<Writer*>& group) {
  bool apart = false;
  absl::Status s = RunGroupTxn(group, &apart);
  if (s.ok()) return;  // each op has its own status
  if (group.size() > 1 && (apart || s.code() != absl::StatusCode::kUnavailable)) {
    // Nothing committed, and the connection is fine: one op failed the
    // transaction. Each op alone finds its own outcome.
    for (Writer* g : group) g->op->RunAlone(*h_);
    return;
  }
  for (Writer* g : group) {
    if (g->op->status.ok()) g->op->status = s;  // a refused op keeps its refusal
  }
}

absl::Status PgCommitGroup::RunGroupTxn(const std::vector<Writer*>& group, bool* apart) {
  std::vector<std::string> ids;
  ids.reserve(group.size());
  for (const Writer* g : group) ids.push_back(g->op->run_id());
  return h_->Txn([&](PgConn& c) -> absl::Status {
    *apart = false;  // the body runs again after a serialization failure
    for (Writer* g : group) g->op->status = absl::OkStatus();
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kLockFences, PgParams().TextArray(ids)));
    PgWriteBatch batch;
    absl::Time now;
    absl::flat_hash_map<std::string, int> row_of;
    for (int i = 0; i < r.rows(); ++i) row_of[r.row(i).ColumnText(kIdColumn)] = i;
    for (Writer* g : group) {
      PgGroupOp& op = *g->op;
      auto it = row_of.find(op.run_id());
      if (it == row_of.end()) {
        op.status = absl::NotFoundError(absl::StrCat("run ", op.run_id(), " not found"));
        continue;
      }
      const PgRow row = r.row(it->second);
      now = row.ColumnTime(kNowColumn);
      absl::StatusOr<Fence> f = FenceFromRow(row, op.run_id());
      if (!f.ok()) {
        op.status = f.status();
        continue;
      }
      op.message_id = row.ColumnIsNull(kMessageColumn)
                          ? std::nullopt
                          : std::optional<int64_t>(row.ColumnInt(kMessageColumn));
      absl::Status s = op.AddTo(c, now, *f, batch);
      if (!s.ok()) {
        // A statement failed (the transaction is aborted): the group is
        // applied again op by op, unless the connection is gone.
        *apart = c.ok();
        return s;
      }
    }
    batch.Defer(c, now);
    return absl::OkStatus();
  });
}

}  // namespace runloom::store_internal
