// PeriodicTask: a thread that calls `tick` once every `period` on a Clock
// (so a simulated clock drives it in tests) until Stop(). The engine's lease
// keeper, sweeper and cancel watch, and the PostgreSQL backend's
// long-transaction sweep, are each one PeriodicTask and the work they do per
// tick.
//
// Thread-safety: Start() and Stop() may be called from any thread; `tick`
// runs on the task's thread, never under mu_.
#pragma once

#include "runloom/clock.h"
#include "runloom/mutex.h"

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

#include <functional>
#include <thread>

namespace runloom {

class PeriodicTask {
 public:
  // `clock` must outlive the task.
  PeriodicTask(Clock* clock, absl::Duration period, std::function<void()> tick)
      : clock_(clock), period_(period), tick_(std::move(tick)) {}
  ~PeriodicTask() { Stop(); }
  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;

  // Starts the thread; the first tick comes one period later. Idempotent
  // while running.
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Wakes the thread, waits for a tick in progress to return, and joins it;
  // Start() may follow.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  Clock* const clock_;
  const absl::Duration period_;
  const std::function<void()> tick_;

  runloom::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_ ABSL_GUARDED_BY(mu_);
};

}  // namespace runloom
