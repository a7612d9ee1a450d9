// EngineMetrics: the engine's prometheus-cpp counters and histogram, on the
// registry given as EngineOptions::env.metrics. It owns the metric families'
// registration and the label children known at Open (every run status,
// sweeper action and registered step kind), so recording on the hot path is a
// null check and an atomic add, never a registry or family lookup. With no
// registry every method is a null check and nothing else.
//
// Metric names and labels (docs/operations.md):
//   runloom_runs_started_total               runs created by StartRun
//   runloom_runs_finished_total{status}      terminal statuses written by an
//                                            execution or a sweep
//   runloom_leases_lost_total                executions stopped by a lost lease
//   runloom_lease_expiries_total             expired leases the sweeper recovered
//   runloom_sweeper_actions_total{action}    requeued | failed | reconciled
//   runloom_reconciler_enqueued_total        queued runs given a new message
//   runloom_step_duration_seconds{kind}      one leaf step attempt, start to result
//
// Thread-safety: every method is thread-safe (prometheus-cpp's metrics are
// atomic; a kind registered after Open is added under the family's lock).
#pragma once

#include "runloom/status.h"

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <array>
#include <memory>
#include <string>
#include <vector>

namespace prometheus {
class Counter;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace runloom::engine_internal {

// What a sweep did to one run.
enum class SweepAction {
  kRequeued,    // an expired lease: the run was enqueued again
  kFailed,      // an expired lease at the attempt cap: the run failed
  kReconciled,  // a queued run with no message was enqueued again
};

class EngineMetrics {
 public:
  // Registers the families on `registry` (null: nothing is recorded; else
  // it must outlive the result) with a series for each of `step_kinds`.
  // kInvalidArgument when the registry refuses them (a family of the same
  // name with another type, or a registry built with InsertBehavior::Throw
  // that already has them): prometheus-cpp throws, this returns.
  static absl::StatusOr<std::unique_ptr<EngineMetrics>> Create(
      prometheus::Registry* registry, const std::vector<std::string>& step_kinds);
  EngineMetrics(const EngineMetrics&) = delete;
  EngineMetrics& operator=(const EngineMetrics&) = delete;

  // An instance with no registry, for configs built without an engine.
  static EngineMetrics* Disabled();

  // Prefer Create(), which turns prometheus-cpp's exceptions into a status.
  EngineMetrics(prometheus::Registry* registry, const std::vector<std::string>& step_kinds);

  void RunStarted();
  void RunFinished(RunStatus status);
  void LeaseLost();
  void LeaseExpired();
  void Swept(SweepAction action);
  void ReconcilerEnqueued(int n);
  void StepDuration(const std::string& kind, absl::Duration d);

 private:
  static constexpr size_t kStatuses = static_cast<size_t>(RunStatus::kCancelled) + 1;
  static constexpr size_t kActions = static_cast<size_t>(SweepAction::kReconciled) + 1;

  // Constant after construction; all null when there is no registry.
  prometheus::Counter* runs_started_ = nullptr;
  std::array<prometheus::Counter*, kStatuses> runs_finished_{};
  prometheus::Counter* leases_lost_ = nullptr;
  prometheus::Counter* lease_expiries_ = nullptr;
  std::array<prometheus::Counter*, kActions> sweeper_actions_{};
  prometheus::Counter* reconciler_enqueued_ = nullptr;
  prometheus::Family<prometheus::Histogram>* step_duration_family_ = nullptr;
  absl::flat_hash_map<std::string, prometheus::Histogram*> step_duration_;
};

}  // namespace runloom::engine_internal
