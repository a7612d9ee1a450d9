// The leader election of the stores' group commits (SQLite's WriteQueue,
// PostgreSQL's PgCommitGroup), as LevelDB's DBImpl::Write: a caller queues
// its writer and sleeps until a leader has run its write, or until it is at
// the front of the queue and may lead, and then leads.
//
// Thread-safety: call with `mu` held; `writers` and what `can_lead` reads
// are guarded by it.
#pragma once

#include "runloom/mutex.h"

#include "core/fiber.h"

#include <cstddef>
#include <deque>
#include <optional>
#include <thread>

namespace runloom::store_internal {

// How a queued writer waits for its turn: a thread blocks on a condition
// variable; a fiber inside a fiber::SuspendableRegion (a run's own commits,
// engine/run/run_writer.cc) suspends instead, so its executor thread runs
// other runs while the group commits, and more of them share a group. Both
// wait and signal with the group's mutex held; a signal to a writer that is
// not waiting is lost, as a condition variable's is (the waiter's loop
// re-checks its condition).
//
// A suspended fiber is never handed the lead (the leaders check suspends()):
// to lead it would need an executor thread, and every one may be blocked on
// something that waits for this very queue (a parallel step's branches are
// threads that commit through it). The running leader leads its group
// instead. So a suspended fiber is woken only when its write is done.
class TurnSignal {
 public:
  TurnSignal() : suspends_(fiber::InSuspendableRegion()) {}

  // True when the writer is a fiber that suspends while it waits.
  bool suspends() const { return suspends_; }

  // Releases `mu` while waiting; holds it again on return.
  void Wait(runloom::Mutex* mu) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (!suspends_) {
      cv_.Wait(mu);
      return;
    }
    // Not analysed: clang cannot see that `mu` is held where arm runs.
    fiber::Suspend([&](const fiber::Waker& w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      waker_ = w;
      mu->Unlock();
    });
    mu->Lock();
  }
  void Signal() {
    if (waker_.has_value()) {
      waker_->Wake();
      waker_.reset();
    } else {
      cv_.Signal();
    }
  }

 private:
  const bool suspends_;  // decided where the writer is made: on its caller
  runloom::CondVar cv_;
  std::optional<fiber::Waker> waker_;  // guarded by the group's mutex
};

// Queues `w` (a struct with `bool done` and `TurnSignal cv`) and waits
// until another leader has done it (returns false) or until it is at the
// front and `can_lead()` (returns true: the caller leads). A leader wakes
// the front writer (w.cv.Signal()) when it hands over, never one that
// suspends (TurnSignal).
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

// Before a leader that goes on leading takes its next group: the last
// group's `last` writers usually come straight back with their next write but
// wake one by one, so while fewer are queued the leader yields (releasing
// `mu`) up to kMaxJoinYields times, stopping at a yield that brought nobody.
// Not analysed, as QueueAndAwaitTurn.
inline constexpr int kMaxJoinYields = 4;
template <typename Writer>
void YieldForRejoiningWriters(runloom::Mutex& mu, const std::deque<Writer*>& writers,
                              size_t last) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  for (int i = 0; i < kMaxJoinYields && writers.size() < last; ++i) {
    const size_t before = writers.size();
    mu.Unlock();
    std::this_thread::yield();
    mu.Lock();
    if (writers.size() == before) break;
  }
}

}  // namespace runloom::store_internal
