// LeaseKeeper: a thread that renews the lease of every execution this engine
// holds (ActiveRuns), once per heartbeat. A renewal that reports a cancel
// request stops the execution with kCancel; a failed renewal stops it at
// once with kLeaseLost, except kUnavailable while the lease has not expired
// yet (tried again next beat). Every failed renewal is logged.
//
// Thread-safety: Start() and Stop() may be called from any thread (the
// thread is a PeriodicTask).
#pragma once

#include "runloom/clock.h"
#include "runloom/env.h"
#include "runloom/store.h"

#include "core/periodic_task.h"
#include "engine/run/run_execution.h"
#include "engine/service/active_runs.h"

#include "absl/time/time.h"

namespace runloom::engine_internal {

class LeaseKeeper {
 public:
  // Every pointer must outlive the keeper.
  LeaseKeeper(RunStore* store, Clock* clock, ActiveRuns* active, absl::Duration heartbeat,
              absl::Duration lease_ttl, Logger* logger)
      : store_(store),
        clock_(clock),
        active_(active),
        lease_ttl_(lease_ttl),
        logger_(logger),
        task_(clock, heartbeat, [this] { RenewAll(); }) {}
  ~LeaseKeeper() { Stop(); }
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // Starts the thread (idempotent while running).
  void Start() { task_.Start(); }
  // Stops and joins it; Start() may follow.
  void Stop() { task_.Stop(); }

  // Renews `e`'s lease once.
  void Renew(RunExecution& e);
  // One heartbeat: renews every active execution's lease, on up to
  // kMaxRenewers threads when more than kRunsPerRenewer are held (fewer:
  // on the calling thread alone, as the simulator needs).
  void RenewAll();
  static constexpr size_t kRunsPerRenewer = 256;
  static constexpr size_t kMaxRenewers = 8;

 private:
  // Constant after construction.
  RunStore* const store_;
  Clock* const clock_;
  ActiveRuns* const active_;
  const absl::Duration lease_ttl_;
  Logger* const logger_;
  PeriodicTask task_;  // last: its thread uses the members above
};

}  // namespace runloom::engine_internal
