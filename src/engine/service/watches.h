// Watches: waiting on runs by wake-up, not by polling.
//
// Owns Engine::WatchEvents, AwaitRun, WatchRuns and AwaitIdle. Each wait
// subscribes to the backend's EventBus first, then reads the store, then
// waits on the engine's clock until the bus says "look again" or the
// deadline passes (see runloom/event_bus.h for why that order loses nothing).
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include "runloom/clock.h"
#include "runloom/event_bus.h"
#include "runloom/run.h"
#include "runloom/store.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace runloom::engine_internal {

class Watches {
 public:
  // `active_runs` returns how many runs this engine holds now. None owned;
  // all must outlive this object.
  Watches(Store* store, EventBus* bus, Clock* clock, std::function<int()> active_runs)
      : store_(store), bus_(bus), clock_(clock), active_runs_(std::move(active_runs)) {}

  // The run's events after `after_seq` (at most `limit`); blocks until one
  // commits or `deadline` (then an empty vector). kNotFound: unknown run.
  absl::StatusOr<std::vector<Event>> WatchEvents(const std::string& run_id, int64_t after_seq,
                                                 absl::Time deadline, int limit);

  // The run once terminal or paused. kDeadlineExceeded at `deadline`.
  absl::StatusOr<RunRecord> AwaitRun(const std::string& run_id, absl::Time deadline);

  // Calls `on_change` for every run's committed changes (on the publishing
  // thread; it must not block) until the Subscription is destroyed.
  std::unique_ptr<Subscription> WatchRuns(std::function<void(const RunChange&)> on_change);

  // OK once no run is queued or running and this engine holds none;
  // kDeadlineExceeded at `deadline`.
  absl::Status AwaitIdle(absl::Time deadline);

 private:
  Store* const store_;
  EventBus* const bus_;
  Clock* const clock_;
  const std::function<int()> active_runs_;
};

}  // namespace runloom::engine_internal
