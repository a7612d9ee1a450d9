// Human and operator actions on runs, apart from execution: a decision at an
// approval gate, a rerun from a phase, cancel, admin reset. Engine's public
// methods of the same names call these.
//
// Thread-safety: stateless; every function may run concurrently with
// executors and with itself (each write is a compare-and-set).
#pragma once

#include "runloom/engine.h"
#include "runloom/store.h"
#include "runloom/workflow.h"

#include "absl/status/statusor.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace runloom::engine_internal {

struct DecisionContext {
  Store* store = nullptr;
  Clock* clock = nullptr;
  // The run's pinned workflow, failing closed on a mismatch (Engine's cache).
  std::function<absl::StatusOr<std::shared_ptr<const Workflow>>(const RunRecord&)> load_pinned;
  // Called with a run that a cancel or reset made terminal, after the
  // commit (may be empty; the engine publishes its stage event there).
  std::function<void(const RunRecord&)> on_finished;
};

// Step records of `run`'s current revision that a new revision starting at
// top-level step `phase_index` keeps, relabelled `new_revision`.
absl::StatusOr<std::vector<StepRecord>> CarriedRecords(const DecisionContext& ctx,
                                                       const RunRecord& run, const Workflow& wf,
                                                       int phase_index, int64_t new_revision);

// See Engine::Signal.
absl::StatusOr<SendSignalResult> SendRunSignal(const DecisionContext& ctx, const std::string& run_id,
                                               const SignalRequest& request, const std::string& by);

// See Engine::Decide, Engine::Rerun, Engine::Cancel, Engine::ResetAll.
absl::StatusOr<RunRecord> DecideRun(const DecisionContext& ctx, const std::string& run_id,
                                    const DecisionRequest& req, const std::string& reviewer);
absl::StatusOr<RunRecord> RerunRun(const DecisionContext& ctx, const std::string& run_id,
                                   const std::string& phase, const std::string& feedback,
                                   const std::string& by);
absl::StatusOr<RunRecord> CancelRun(const DecisionContext& ctx, const std::string& run_id,
                                    const std::string& by);
absl::StatusOr<int> ResetAllRuns(const DecisionContext& ctx, const std::string& by);

}  // namespace runloom::engine_internal
