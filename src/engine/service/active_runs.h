// ActiveRuns: the executions this engine holds right now, by run id. The
// lease keeper renews each of them; Stop() drains them (each stops at its
// next step boundary and releases its run), waits up to a deadline, then
// stops the rest at once.
//
// Thread-safety: thread-safe; mu_ guards the map and the draining flag.
// Callbacks into an execution (Drain, RequestStop) are cheap and made with
// mu_ held, as they always were.
#pragma once

#include "runloom/clock.h"
#include "runloom/mutex.h"

#include "engine/run/run_execution.h"

#include "absl/base/thread_annotations.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace runloom::engine_internal {

class ActiveRuns {
 public:
  ActiveRuns() = default;
  ActiveRuns(const ActiveRuns&) = delete;
  ActiveRuns& operator=(const ActiveRuns&) = delete;

  // Registers `exec` (drained at once if the engine is draining).
  void Add(const std::shared_ptr<RunExecution>& exec) ABSL_LOCKS_EXCLUDED(mu_);
  void Remove(const std::string& run_id) ABSL_LOCKS_EXCLUDED(mu_);
  // The executions held now.
  std::vector<std::shared_ptr<RunExecution>> Snapshot() ABSL_LOCKS_EXCLUDED(mu_);
  int size() ABSL_LOCKS_EXCLUDED(mu_);

  // Drains every execution, now and from now on (a later Add drains the new
  // one at once; this is never undone), waits until none is left or
  // `timeout` has passed, then stops those left with StopReason::kShutdown.
  void DrainAll(Clock* clock, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  runloom::Mutex mu_;
  std::map<std::string, std::shared_ptr<RunExecution>> active_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace runloom::engine_internal
