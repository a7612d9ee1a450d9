// The deterministic simulation of the whole engine (issue 21 §1,
// docs/reliability.md "The simulation").
//
// One seed chooses everything: the workflows and inputs, how many
// processes run how many executors with which lease TTL and clock skew,
// every interleaving, and every fault. The engine code is the production
// code (admission, the executor's claim-lease-run-ack, the graph walk,
// parallel branches, the lease keeper, the cancel watch, the sweeper and
// reconciler, decisions, cancel, rerun, admin reset, the http kind's write
// ledger protocol), driven through engine_internal::EngineDriver on one
// thread, on a simulated clock, over the real SQLite store in memory behind
// fault-injecting wrappers. Time moves only when the simulator moves it, so
// the same seed gives the same history, byte for byte.
//
// Thread-safety: RunSimulation uses process-wide state (the injected bugs):
// run one simulation at a time per process.
#pragma once

#include "core/injected_bug.h"

#include <cstdint>
#include <string>
#include <vector>

namespace runloom::sim {

struct SimOptions {
  uint64_t seed = 1;
  // Scheduling decisions (timer firings) while faults are on; then faults
  // stop and the liveness bound is checked.
  int steps = 400;
  // Bugs switched on for this run (RUNLOOM_TESTING builds only; elsewhere
  // RunSimulation refuses them).
  std::vector<InjectedBug> bugs;
};

struct SimResult {
  // Empty when every invariant held; else the first one broken.
  std::string violation;
  // One line per decision and outcome, in order (what replays byte for
  // byte); on a violation, ends with it.
  std::vector<std::string> history;
  int runs = 0;            // runs started
  int runs_ended = 0;      // terminal at the end (deleted by retention included)
  int runs_pruned = 0;     // of them, deleted by retention (issue 25)
  int64_t spans = 0;       // spans the engines exported, each checked (issue 25)
  int runs_at_gate = 0;    // paused at a gate at the end
  int runs_at_wait = 0;    // waiting for a signal with no timeout at the end
  int signals_kept = 0;      // signals the store kept (issue 23)
  int signals_resolved = 0;  // of them, those that resolved a wait resting for them
  int schedule_runs = 0;     // runs the seed's schedule started (issue 23; a third of the seeds)
  int child_runs = 0;        // child runs of `run` steps (issue 23; a third of the seeds)
  int keyed_leases = 0;      // leases taken on runs with a concurrency key (issue 23)
  int leases_ended = 0;      // leases of dead holders ended early (issue 27)
  int over_limit = 0;        // leases refused over a concurrency limit (issue 23)
  int64_t operations = 0;  // store calls made through the fault wrappers
  int crashes = 0;
  // Issue 27 (runs in flight): the most runs one process life executed at
  // once, and the crashes of a life holding more runs than executors.
  int most_held = 0;
  int crashes_holding_many = 0;
  int faults = 0;  // store, queue and service faults injected
  bool ok() const { return violation.empty(); }
};

SimResult RunSimulation(const SimOptions& options);

}  // namespace runloom::sim
