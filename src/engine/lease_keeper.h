// LeaseKeeper: a thread that renews the lease of every execution this engine
// holds (ActiveRuns), once per heartbeat. A renewal that reports a cancel
// request stops the execution with kCancel; a failed renewal stops it at
// once with kLeaseLost, except kUnavailable while the lease has not expired
// yet (tried again next beat). Every failed renewal is logged.
//
// Thread-safety: Start() and Stop() may be called from any thread; mu_
// guards the stop flag and the thread.
#pragma once

#include "runloom/clock.h"
#include "runloom/env.h"
#include "runloom/store.h"

#include "engine/active_runs.h"
#include "engine/run_execution.h"

#include "absl/base/thread_annotations.h"
#include "runloom/mutex.h"
#include "absl/time/time.h"

#include <thread>

namespace runloom::engine_internal {

class LeaseKeeper {
 public:
  // Every pointer must outlive the keeper.
  LeaseKeeper(Store* store, Clock* clock, ActiveRuns* active, absl::Duration heartbeat,
              absl::Duration lease_ttl, Logger* logger)
      : store_(store),
        clock_(clock),
        active_(active),
        heartbeat_(heartbeat),
        lease_ttl_(lease_ttl),
        logger_(logger) {}
  ~LeaseKeeper() { Stop(); }
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // Starts the thread (idempotent while running).
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Stops and joins it; Start() may follow.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // Renews `e`'s lease once.
  void Renew(RunExecution& e);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  Store* const store_;
  Clock* const clock_;
  ActiveRuns* const active_;
  const absl::Duration heartbeat_;
  const absl::Duration lease_ttl_;
  Logger* const logger_;

  runloom::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_ ABSL_GUARDED_BY(mu_);
};

}  // namespace runloom::engine_internal
