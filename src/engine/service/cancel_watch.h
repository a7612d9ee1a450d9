// CancelWatch: how an engine learns that a run it is executing was
// cancelled, in well under a second, without a shorter lease.
//
// A cancel of a running run only marks it (cancel_requested); the executor
// holding it must stop the step and write `cancelled`. The lease renewal
// reports the mark too, but only once per heartbeat (10 s with the default
// 30 s lease). So:
//   - a cancel made through this engine stops the execution at once
//     (StopIfHeld, from Engine::Cancel);
//   - a cancel from any other process is found by CheckOnce, which asks the
//     store about the runs this engine holds (Store::FindCancelRequested,
//     one primary-key read each), every EngineOptions::cancel_check
//     (default 250 ms), and only while it holds some.
//
// Thread-safety: thread-safe. The periodic check runs on its own thread.
#pragma once

#include "runloom/clock.h"
#include "runloom/env.h"
#include "runloom/mutex.h"
#include "runloom/store.h"

#include "core/periodic_task.h"
#include "engine/service/active_runs.h"

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

#include <string>

namespace runloom::engine_internal {

class CancelWatch {
 public:
  // Every pointer must outlive the watch.
  CancelWatch(RunStore* store, Clock* clock, ActiveRuns* active, absl::Duration interval,
              Logger* logger)
      : store_(store),
        active_(active),
        logger_(logger),
        task_(clock, interval, [this] { CheckOnce(); }) {}
  CancelWatch(const CancelWatch&) = delete;
  CancelWatch& operator=(const CancelWatch&) = delete;

  void Start() { task_.Start(); }
  void Stop() { task_.Stop(); }

  // Stops every held execution whose run has a cancel requested. Returns how
  // many it stopped.
  int CheckOnce() ABSL_LOCKS_EXCLUDED(mu_);
  // Stops `run_id`'s execution if this engine holds it.
  void StopIfHeld(const std::string& run_id);

 private:
  RunStore* const store_;
  ActiveRuns* const active_;
  Logger* const logger_;

  runloom::Mutex mu_;
  // The last failure logged: a store that stays down is one line, not four a
  // second.
  std::string last_error_ ABSL_GUARDED_BY(mu_);

  PeriodicTask task_;  // last: its thread uses the members above
};

}  // namespace runloom::engine_internal
