// Admission: the creation seam. Validates and registers a workflow, resolves
// the version a new run pins (through the engine's one parsed-workflow
// cache, PinnedCatalog), freezes the inputs, and creates the run with its
// run.created event and its queue message in one store transaction. Secret
// inputs are never stored: admission keeps them in RunSecrets, in this
// process's memory, for this process's executions of the run.
//
// Thread-safety: Admission is thread-safe (its state is the catalog's and
// RunSecrets', each with its own mutex; store calls happen outside them).
#pragma once

#include "runloom/clock.h"
#include "runloom/engine.h"
#include "runloom/store.h"
#include "runloom/workflow.h"

#include "engine/observe/engine_metrics.h"
#include "engine/run/child_run.h"
#include "engine/run/secrets.h"
#include "engine/schedules.h"
#include "engine/service/pinned_catalog.h"
#include "engine/service/random_source.h"

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

#include <memory>
#include <string>
#include <utility>

namespace runloom::engine_internal {

class Admission {
 public:
  // Every pointer must outlive the admission.
  Admission(Store* store, Clock* clock, const StepRegistry* registry, PinnedCatalog* catalog,
            DeclaredSchedules* declared, RunSecrets* secrets, RandomSource* random,
            EngineMetrics* metrics)
      : store_(store),
        clock_(clock),
        registry_(registry),
        catalog_(catalog),
        declared_(declared),
        secrets_(secrets),
        random_(random),
        metrics_(metrics) {}
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;

  // See Engine::RegisterWorkflow and Engine::StartRun. A registration then
  // brings the workflow's declared schedules in step with its latest
  // version (DeclaredSchedules::Sync); its error is returned, the version
  // registered all the same (registering again is idempotent).
  absl::StatusOr<WorkflowVersion> RegisterWorkflow(const Workflow& wf);
  // With `child`: the run is `child`'s parent's child (NewRun::parent_run_id,
  // RunContext::parent), and its budget is at most the cap.
  absl::StatusOr<CreateRunResult> StartRun(const StartRunRequest& req,
                                           const ChildLink* child = nullptr);

 private:
  // The version a new run pins, and its definition.
  absl::StatusOr<std::pair<WorkflowVersion, std::shared_ptr<const Workflow>>> ResolveWorkflow(
      const StartRunRequest& req);

  // Constant after construction.
  Store* const store_;
  Clock* const clock_;
  const StepRegistry* const registry_;
  PinnedCatalog* const catalog_;
  DeclaredSchedules* const declared_;
  RunSecrets* const secrets_;
  RandomSource* const random_;  // run ids
  EngineMetrics* const metrics_;
};

}  // namespace runloom::engine_internal
