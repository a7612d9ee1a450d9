// RetentionSweep: applies a RetentionPolicy (runloom/retention.h) in the
// process that runs the sweeper: every policy.interval, by its Clock, one
// pass of bounded batches (RetentionStore::PruneRuns) for each workflow
// with its own keep_runs, then for every other workflow. The cutoffs are
// computed from the store's time authority (Store::Now()), never from this
// machine's clock, like the lease deadlines.
//
// Thread-safety: Start(), Stop() and PassOnce() may be called from any
// thread; a pass runs on one thread at a time (the PeriodicTask's, or the
// caller's of PassOnce while the task is stopped).
#pragma once

#include "runloom/clock.h"
#include "runloom/env.h"
#include "runloom/retention.h"
#include "runloom/store.h"

#include "core/periodic_task.h"

#include "absl/status/statusor.h"

#include <utility>

namespace runloom::engine_internal {

class RetentionSweep {
 public:
  // `store`, `clock` and `logger` must outlive the sweep.
  RetentionSweep(Store* store, Clock* clock, RetentionPolicy policy, Logger* logger)
      : store_(store),
        clock_(clock),
        logger_(logger),
        policy_(std::move(policy)),
        task_(clock, policy_.interval, [this] { Tick(); }) {}
  ~RetentionSweep() { Stop(); }
  RetentionSweep(const RetentionSweep&) = delete;
  RetentionSweep& operator=(const RetentionSweep&) = delete;

  // Starts the thread, unless the policy keeps everything (idempotent).
  void Start() {
    if (policy_.enabled()) task_.Start();
  }
  void Stop() { task_.Stop(); }

  // One pass now: what it deleted, in every batch. A failed batch ends the
  // pass with its error (the next pass starts over: nothing is half done,
  // each batch is one transaction).
  absl::StatusOr<PruneResult> PassOnce();

 private:
  // One period: a pass, its failure logged.
  void Tick();
  // Batches of `request` while they come back full: one at least, more
  // until the pass's `deadline` or the policy's max_batches_per_pass
  // (counted in `batches` across the pass); adds what they deleted to
  // `total`.
  absl::Status Batches(PruneRequest request, absl::Time deadline, int& batches, PruneResult& total);

  // Constant after construction.
  Store* const store_;
  Clock* const clock_;
  Logger* const logger_;
  const RetentionPolicy policy_;
  PeriodicTask task_;  // last: its thread uses the members above
};

}  // namespace runloom::engine_internal
