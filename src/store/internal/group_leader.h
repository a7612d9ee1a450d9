// The leader election of the stores' group commits (SQLite's WriteQueue,
// PostgreSQL's PgCommitGroup), as LevelDB's DBImpl::Write: a caller queues
// its writer and sleeps until a leader has run its write, or until it is at
// the front of the queue with no leader active, and then leads.
//
// Thread-safety: call with `mu` held; `writers` and `leader_active` are
// guarded by it.
#pragma once

#include "runloom/mutex.h"

#include <deque>

namespace runloom::store_internal {

// Queues `w` (a struct with `bool done` and `runloom::CondVar cv`) and waits.
// Returns true when the caller now leads (leader_active is set), false when
// its write was done by another leader.
template <typename Writer>
bool QueueAndAwaitTurn(runloom::Mutex& mu, std::deque<Writer*>& writers, bool& leader_active,
                       Writer& w) {
  writers.push_back(&w);
  // The flag also guards against spurious wake-ups of a front writer whose
  // group the leader is running.
  while (!w.done && (leader_active || &w != writers.front())) w.cv.Wait(&mu);
  if (w.done) return false;
  leader_active = true;
  return true;
}

}  // namespace runloom::store_internal
