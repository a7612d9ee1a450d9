#include "engine/observe/engine_metrics.h"

#include "absl/strings/str_cat.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

#include <exception>

namespace runloom::engine_internal {
namespace {

// From a no-op step (a millisecond) to a long exec or LLM call (half an hour).
prometheus::Histogram::BucketBoundaries StepBuckets() {
  return {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800};
}

std::string_view ToString(SweepAction a) {
  switch (a) {
    case SweepAction::kRequeued:
      return "requeued";
    case SweepAction::kFailed:
      return "failed";
    case SweepAction::kReconciled:
      return "reconciled";
  }
  return "unknown";
}

prometheus::Counter* Counter(prometheus::Registry& r, const std::string& name,
                             const std::string& help) {
  return &prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
}

}  // namespace

EngineMetrics::EngineMetrics(prometheus::Registry* registry,
                             const std::vector<std::string>& step_kinds) {
  if (registry == nullptr) return;
  prometheus::Registry& r = *registry;
  runs_started_ = Counter(r, "runloom_runs_started_total", "Runs created by StartRun.");
  auto& finished = prometheus::BuildCounter()
                       .Name("runloom_runs_finished_total")
                       .Help("Terminal statuses written by this engine's executions and sweeps.")
                       .Register(r);
  for (size_t i = 0; i < kStatuses; ++i) {
    const RunStatus s = static_cast<RunStatus>(i);
    if (IsTerminal(s)) {
      runs_finished_[i] = &finished.Add({{"status", std::string(runloom::ToString(s))}});
    }
  }
  leases_lost_ =
      Counter(r, "runloom_leases_lost_total", "Executions stopped because their lease was lost.");
  lease_expiries_ = Counter(r, "runloom_lease_expiries_total",
                            "Expired leases the sweeper recovered (requeued or failed).");
  auto& actions = prometheus::BuildCounter()
                      .Name("runloom_sweeper_actions_total")
                      .Help("Runs the sweeper acted on, by action.")
                      .Register(r);
  for (size_t i = 0; i < kActions; ++i) {
    sweeper_actions_[i] =
        &actions.Add({{"action", std::string(ToString(static_cast<SweepAction>(i)))}});
  }
  reconciler_enqueued_ = Counter(r, "runloom_reconciler_enqueued_total",
                                 "Queued runs with no queue message that were enqueued again.");
  step_duration_family_ = &prometheus::BuildHistogram()
                               .Name("runloom_step_duration_seconds")
                               .Help("Duration of one leaf step attempt, by step kind.")
                               .Register(r);
  for (const std::string& kind : step_kinds) {
    step_duration_[kind] = &step_duration_family_->Add({{"kind", kind}}, StepBuckets());
  }
}

absl::StatusOr<std::unique_ptr<EngineMetrics>> EngineMetrics::Create(
    prometheus::Registry* registry, const std::vector<std::string>& step_kinds) {
  try {
    return std::make_unique<EngineMetrics>(registry, step_kinds);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("env.metrics: registering the runloom_* metrics failed: ", e.what()));
  }
}

EngineMetrics* EngineMetrics::Disabled() {
  static EngineMetrics disabled(nullptr, {});
  return &disabled;
}

void EngineMetrics::RunStarted() {
  if (runs_started_ != nullptr) runs_started_->Increment();
}

void EngineMetrics::RunFinished(RunStatus status) {
  const size_t i = static_cast<size_t>(status);
  if (i < kStatuses && runs_finished_[i] != nullptr) runs_finished_[i]->Increment();
}

void EngineMetrics::LeaseLost() {
  if (leases_lost_ != nullptr) leases_lost_->Increment();
}

void EngineMetrics::LeaseExpired() {
  if (lease_expiries_ != nullptr) lease_expiries_->Increment();
}

void EngineMetrics::Swept(SweepAction action) {
  const size_t i = static_cast<size_t>(action);
  if (i < kActions && sweeper_actions_[i] != nullptr) sweeper_actions_[i]->Increment();
}

void EngineMetrics::ReconcilerEnqueued(int n) {
  if (reconciler_enqueued_ != nullptr && n > 0) reconciler_enqueued_->Increment(n);
}

void EngineMetrics::StepDuration(const std::string& kind, absl::Duration d) {
  if (step_duration_family_ == nullptr) return;
  const double seconds = absl::ToDoubleSeconds(d);
  auto it = step_duration_.find(kind);  // read-only after construction: no lock
  if (it != step_duration_.end()) {
    it->second->Observe(seconds);
    return;
  }
  // A kind registered after Open: the family finds or adds its series under
  // its own lock.
  step_duration_family_->Add({{"kind", kind}}, StepBuckets()).Observe(seconds);
}

}  // namespace runloom::engine_internal
