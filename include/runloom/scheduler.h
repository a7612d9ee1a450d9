// Scheduler: how the engine runs work side by side (today: the branches of a
// parallel step).
//
// Production runs each task on a thread of its own (ThreadScheduler()). The
// deterministic simulation (src/sim/, docs/reliability.md) passes its own,
// which runs the tasks one after another on its single thread in an order
// its seed chooses, and keeps `late` as a timer of its simulated clock: the
// same engine code, every interleaving chosen by one seed.
//
// Thread-safety: implementations must be thread-safe.
#pragma once

#include "runloom/clock.h"

#include "absl/time/time.h"

#include <cstddef>
#include <functional>
#include <span>

namespace runloom {

class Scheduler {
 public:
  virtual ~Scheduler() = default;

  // Runs every task of `tasks` side by side and returns once all of them
  // have returned. If some have not returned when `clock` reaches `deadline`
  // (absl::InfiniteFuture() = never), calls `late(i)` once for each task i
  // still running (which should make it return soon), then keeps waiting.
  virtual void RunAll(std::span<const std::function<void()>> tasks, Clock* clock,
                      absl::Time deadline, const std::function<void(size_t)>& late) = 0;
};

// One thread per task. Never null, never deleted.
Scheduler* ThreadScheduler();

}  // namespace runloom
