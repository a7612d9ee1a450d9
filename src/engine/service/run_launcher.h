// RunLauncher: takes one run from the store to an end in the calling thread.
// Checks the run is runnable (not paused, not terminal), loads its pinned
// workflow (PinnedCatalog), takes its lease — on the run's first write for a
// run never leased before (the first-lease protocol, see RunWriter), else
// with Store::AcquireLease — reads the steps recorded in its revision, runs
// its graph as a RunExecution registered in ActiveRuns, and counts how the
// execution ended. Used by the executor pool and by Engine::ExecuteRun.
//
// Thread-safety: thread-safe; it holds no mutable state of its own (the
// counters are atomics; ActiveRuns, RunSecrets and PinnedCatalog lock).
#pragma once

#include "runloom/engine.h"
#include "runloom/run.h"
#include "runloom/store.h"

#include "engine/observe/engine_metrics.h"
#include "engine/run/child_run.h"
#include "engine/run/run_execution.h"
#include "engine/observe/live_text.h"
#include "engine/run/secrets.h"
#include "engine/service/active_runs.h"
#include "engine/service/pinned_catalog.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace runloom::engine_internal {

// How this engine's executions ended (EngineStats).
class DispositionCounters {
 public:
  void Count(Disposition d);
  EngineStats stats() const;

 private:
  std::atomic<int64_t> runs_finished_{0}, runs_paused_{0}, runs_released_{0}, leases_lost_{0};
};

struct LauncherConfig {
  Store* store = nullptr;
  Clock* clock = nullptr;
  Scheduler* scheduler = ThreadScheduler();
  StepRegistry* registry = nullptr;
  Logger* logger = DefaultLogger();
  EngineMetrics* metrics = EngineMetrics::Disabled();
  std::string owner;  // lease owner
  absl::Duration lease_ttl;
  StageEventPublisher* stage_events = nullptr;                 // nullptr = off
  absl::Duration park_sleeps_over = absl::InfiniteDuration();  // EngineOptions'
  std::map<std::string, absl::Duration> step_timeouts;          // EngineOptions'
  // Admits a run step's child (ExecutionConfig::start_child); empty = none.
  StartChildFn start_child;
  // Called with a child run this launcher's execution finished (the engine
  // tells its parent); may be empty.
  std::function<void(const ChildEnd&)> child_finished;
  // Where streamed model replies go (ExecutionConfig::live); nullptr = nowhere.
  LiveText* live = nullptr;
  // Where spans go (ExecutionConfig::spans); nullptr = untraced.
  SpanSink* spans = nullptr;
};

class RunLauncher {
 public:
  // Every pointer must outlive the launcher.
  RunLauncher(LauncherConfig config, PinnedCatalog* catalog, RunSecrets* secrets,
              ActiveRuns* active)
      : config_(std::move(config)), catalog_(catalog), secrets_(secrets), active_(active) {}
  RunLauncher(const RunLauncher&) = delete;
  RunLauncher& operator=(const RunLauncher&) = delete;

  // Takes the lease and runs the run in this thread. `on_leased` runs once
  // the lease is held (the executor acks its queue message there).
  // `want_record`: read the run back at the end (else only its status is
  // right). kFailedPrecondition when the run is paused or terminal; the
  // store's error when the lease cannot be taken.
  absl::StatusOr<RunRecord> ExecuteRun(const std::string& run_id,
                                       const std::function<void(const Lease&)>& on_leased,
                                       bool want_record = true);

  EngineStats stats() const { return counters_.stats(); }

 private:
  // How often ExecuteRun reads the run again after a lease another came
  // before (IsLeaseAttemptMoved) before it returns that refusal.
  static constexpr int kLeaseReadTries = 3;

  // One read of the run, and its execution as read.
  absl::StatusOr<RunRecord> ExecuteRunAsRead(const std::string& run_id,
                                             const std::function<void(const Lease&)>& on_leased,
                                             bool want_record);
  struct FirstExecution {
    // What ExecuteRun returns, when the execution ran or the lease could not
    // be taken.
    std::optional<absl::StatusOr<RunRecord>> result;
    // Otherwise: the lease taken, which was not the run's first (someone
    // leased the run in between); go on as for a resumed run with it.
    Lease leased_before;
  };
  // A run never leased: the lease rides on its first write.
  FirstExecution ExecuteFirst(const ExecutionConfig& config, RunRecord& run,
                              std::vector<Event> started, std::shared_ptr<const Workflow> wf,
                              const std::function<void(const Lease&)>& on_leased, bool want_record);
  // Runs `body` with `exec` registered as active (the lease keeper renews
  // it; Stop() drains it) and counts its disposition.
  void Track(const std::shared_ptr<RunExecution>& exec, const std::function<Disposition()>& body);
  absl::StatusOr<RunRecord> Finished(const RunExecution& exec, RunRecord& run, bool want_record);

  // Constant after construction.
  const LauncherConfig config_;
  PinnedCatalog* const catalog_;
  RunSecrets* const secrets_;
  ActiveRuns* const active_;

  DispositionCounters counters_;
};

}  // namespace runloom::engine_internal
