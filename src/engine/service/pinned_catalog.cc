#include "engine/service/pinned_catalog.h"

#include "absl/strings/str_cat.h"

#include <algorithm>

namespace runloom::engine_internal {

absl::StatusOr<std::shared_ptr<const Workflow>> PinnedCatalog::LoadPinned(const RunRecord& run,
                                                                          bool first_execution) {
  const std::string pinned =
      absl::StrCat(run.workflow_name, "@", run.workflow_version, "@", run.workflow_digest);
  {
    // A definition this process verified against the catalog (its digest
    // is the pinned one: it is part of the key) is trusted for a run's
    // first execution and for runs created after it was verified, so a
    // run of a hot workflow costs no catalog read. A run resumed after a
    // pause or a crash is always checked against the catalog as it is now.
    runloom::MutexLock l(&mu_);
    auto it = workflows_.find(pinned);
    if (it != workflows_.end() && (first_execution || run.created_at >= it->second.verified_at)) {
      return it->second.workflow;
    }
  }
  const absl::Time verified_at = clock_->Now();
  auto v = store_->GetWorkflow(run.workflow_name, run.workflow_version);
  if (!v.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("workflow ", run.workflow_name, " version ", run.workflow_version,
                     " pinned by this run is not in the catalog (", v.status().message(),
                     "); the run fails closed"));
  }
  if (v->digest != run.workflow_digest) {
    return absl::FailedPreconditionError(absl::StrCat(
        "workflow ", run.workflow_name, " version ", run.workflow_version, " has digest ",
        v->digest, " but the run pinned ", run.workflow_digest, "; the run fails closed"));
  }
  const std::string& key = pinned;
  {
    runloom::MutexLock l(&mu_);
    auto it = workflows_.find(key);
    if (it != workflows_.end() && it->second.canonical == v->canonical) {
      it->second.verified_at = std::max(it->second.verified_at, verified_at);
      return it->second.workflow;
    }
  }
  auto wf = WorkflowFromCanonical(v->canonical);
  if (!wf.ok() || WorkflowDigest(*wf) != run.workflow_digest) {
    return absl::FailedPreconditionError(absl::StrCat(
        "workflow ", run.workflow_name, " version ", run.workflow_version,
        " changed under its pinned digest ", run.workflow_digest, "; the run fails closed"));
  }
  auto shared = std::make_shared<const Workflow>(*std::move(wf));
  runloom::MutexLock l(&mu_);
  workflows_[key] = CachedWorkflow{v->canonical, shared, verified_at};
  return shared;
}

}  // namespace runloom::engine_internal
