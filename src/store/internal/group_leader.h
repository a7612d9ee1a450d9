// The leader election of the stores' group commits (SQLite's WriteQueue,
// PostgreSQL's PgCommitGroup), as LevelDB's DBImpl::Write: a caller queues
// its writer and sleeps until a leader has run its write, or until it is at
// the front of the queue and may lead, and then leads.
//
// Thread-safety: call with `mu` held; `writers` and what `can_lead` reads
// are guarded by it.
#pragma once

#include "runloom/mutex.h"

#include <deque>

namespace runloom::store_internal {

// Queues `w` (a struct with `bool done` and `runloom::CondVar cv`) and waits
// until another leader has done it (returns false) or until it is at the
// front and `can_lead()` (returns true: the caller leads). A leader wakes
// the front writer (w.cv.Signal()) when it hands over.
//
// The body is not analysed: clang cannot see that `mu` is the mutex the
// caller's `can_lead` names (its member `mu_`); callers are still checked
// to hold `mu`, and their `can_lead` is annotated as requiring it.
template <typename Writer, typename CanLead>
bool QueueAndAwaitTurn(runloom::Mutex& mu, std::deque<Writer*>& writers, Writer& w,
                       CanLead can_lead)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  writers.push_back(&w);
  // can_lead also guards against spurious wake-ups of a front writer whose
  // group a leader is running.
  while (!w.done && (&w != writers.front() || !can_lead())) w.cv.Wait(&mu);
  return !w.done;
}

}  // namespace runloom::store_internal
