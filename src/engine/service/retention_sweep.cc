#include "engine/service/retention_sweep.h"

#include "core/log.h"
#include "core/status_macros.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <string>
#include <vector>

namespace runloom::engine_internal {

absl::Status RetentionSweep::Batches(PruneRequest request, absl::Time deadline, int& batches,
                                     PruneResult& total) {
  request.limit = std::max(1, policy_.batch_runs);
  // At least one batch for each request of a pass, so that a slow store
  // still makes progress and one workflow's backlog starves no other.
  for (int mine = 0;
       mine == 0 || (batches < policy_.max_batches_per_pass && clock_->Now() < deadline); ++mine) {
    RUNLOOM_ASSIGN_OR_RETURN(PruneResult got, store_->PruneRuns(request));
    ++batches;
    total.runs += got.runs;
    total.rows += got.rows;
    if (got.runs < request.limit) break;  // nothing more is old enough now
  }
  return absl::OkStatus();
}

absl::StatusOr<PruneResult> RetentionSweep::PassOnce() {
  PruneResult total;
  if (!policy_.enabled()) return total;
  RUNLOOM_ASSIGN_OR_RETURN(absl::Time now, store_->Now());
  const absl::Time audit_before = policy_.audit_horizon == absl::InfiniteDuration()
                                      ? absl::InfinitePast()
                                      : now - policy_.audit_horizon;
  // A run with a write row created at or after InfinitePast() (every run
  // with one) is kept: an infinite audit horizon keeps them all.
  const absl::Time deadline = clock_->Now() + policy_.max_pass_time;
  int batches = 0;
  std::vector<std::string> own;
  for (const auto& [name, keep] : policy_.keep_runs_by_workflow) {
    own.push_back(name);
    if (keep == absl::InfiniteDuration()) continue;
    RUNLOOM_RETURN_IF_ERROR(Batches(
        PruneRequest{
            .finished_before = now - keep, .audit_before = audit_before, .workflow_name = name},
        deadline, batches, total));
  }
  if (policy_.keep_runs != absl::InfiniteDuration()) {
    RUNLOOM_RETURN_IF_ERROR(Batches(PruneRequest{.finished_before = now - policy_.keep_runs,
                                                 .audit_before = audit_before,
                                                 .except_workflows = own},
                                    deadline, batches, total));
  }
  return total;
}

void RetentionSweep::Tick() {
  absl::StatusOr<PruneResult> got = PassOnce();
  if (!got.ok()) {
    Log(logger_, LogLevel::kWarning,
        "retention: a pass failed, the next one retries: ", got.status().ToString());
    return;
  }
  if (got->runs > 0) {
    Log(logger_, LogLevel::kInfo, "retention: deleted ", got->runs, " finished runs (", got->rows,
        " rows)");
  }
}

}  // namespace runloom::engine_internal
