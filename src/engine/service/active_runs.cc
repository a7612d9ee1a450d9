#include "engine/service/active_runs.h"

namespace runloom::engine_internal {

void ActiveRuns::Add(const std::shared_ptr<RunExecution>& exec) {
  runloom::MutexLock l(&mu_);
  active_[exec->run_id()] = exec;
  if (draining_) exec->Drain();
}

void ActiveRuns::Remove(const std::string& run_id) {
  runloom::MutexLock l(&mu_);
  active_.erase(run_id);
}

std::vector<std::shared_ptr<RunExecution>> ActiveRuns::Snapshot() {
  runloom::MutexLock l(&mu_);
  std::vector<std::shared_ptr<RunExecution>> snapshot;
  for (auto& [id, e] : active_) snapshot.push_back(e);
  return snapshot;
}

int ActiveRuns::size() {
  runloom::MutexLock l(&mu_);
  return static_cast<int>(active_.size());
}

void ActiveRuns::DrainAll(Clock* clock, absl::Duration timeout) {
  runloom::MutexLock l(&mu_);
  draining_ = true;
  for (auto& [id, e] : active_) e->Drain();
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return active_.empty(); };
  clock->AwaitWithDeadline(&mu_, absl::Condition(&idle), clock->Now() + timeout);
  for (auto& [id, e] : active_) e->root().RequestStop(StopReason::kShutdown);
}

}  // namespace runloom::engine_internal
