#include "engine/service/pinned_catalog.h"

#include "core/injected_bug.h"
#include "core/status_macros.h"

#include "absl/strings/str_cat.h"

#include <algorithm>

namespace runloom::engine_internal {
namespace {

std::string Key(const std::string& name, int64_t version, const std::string& digest) {
  return absl::StrCat(name, "@", version, "@", digest);
}

}  // namespace

absl::StatusOr<std::pair<WorkflowVersion, std::shared_ptr<const Workflow>>> PinnedCatalog::Cache(
    WorkflowVersion v, absl::Time read_at, bool compare) {
  const std::string key = Key(v.name, v.version, v.digest);
  {
    runloom::MutexLock l(&mu_);
    auto it = workflows_.find(key);
    if (it != workflows_.end() && (!compare || it->second.canonical == v.canonical)) {
      // Only a comparison verifies: a read that trusted the digest leaves
      // LoadPinned's trust window where it was.
      if (compare) it->second.verified_at = std::max(it->second.verified_at, read_at);
      return std::make_pair(it->second.version, it->second.workflow);
    }
  }
  // Parsed outside the lock: another thread may parse the same definition
  // at the same time, and the last one's copy is kept; both are equal.
  auto wf = WorkflowFromCanonical(v.canonical);
  if (!wf.ok() || WorkflowDigest(*wf) != v.digest) {
    return absl::FailedPreconditionError(
        absl::StrCat("workflow ", v.name, " version ", v.version, " changed under its digest ",
                     v.digest, wf.ok() ? "" : absl::StrCat(" (", wf.status().message(), ")")));
  }
  nlohmann::json canonical = std::move(v.canonical);
  v.canonical = nullptr;
  CachedWorkflow cached{std::move(v), std::move(canonical),
                        std::make_shared<const Workflow>(*std::move(wf)), read_at};
  auto out = std::make_pair(cached.version, cached.workflow);
  runloom::MutexLock l(&mu_);
  by_version_[absl::StrCat(cached.version.name, "@", cached.version.version)] = key;
  workflows_[key] = std::move(cached);
  return out;
}

absl::StatusOr<std::pair<WorkflowVersion, std::shared_ptr<const Workflow>>> PinnedCatalog::Resolve(
    const std::string& name, int64_t version) {
  if (version > 0) {
    runloom::MutexLock l(&mu_);
    auto key = by_version_.find(absl::StrCat(name, "@", version));
    if (key != by_version_.end()) {
      const CachedWorkflow& c = workflows_.at(key->second);
      return std::make_pair(c.version, c.workflow);
    }
  }
  const absl::Time read_at = clock_->Now();
  RUNLOOM_ASSIGN_OR_RETURN(WorkflowVersion v, store_->GetWorkflow(name, version));
  // Admission trusts the digest (executors verify the definition).
  return Cache(std::move(v), read_at, /*compare=*/false);
}

absl::StatusOr<std::shared_ptr<const Workflow>> PinnedCatalog::LoadPinned(const RunRecord& run,
                                                                          bool first_execution) {
  const std::string pinned = Key(run.workflow_name, run.workflow_version, run.workflow_digest);
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
    // Poison (reference 002): a version that is gone, or whose stored text
    // no longer decodes, fails the run with the reason. Any other error (the
    // database unreachable for a moment) is returned as it is, so the run
    // is tried again, not failed.
    const absl::StatusCode code = v.status().code();
    if (code != absl::StatusCode::kNotFound && code != absl::StatusCode::kDataLoss &&
        !RUNLOOM_INJECTED_BUG(InjectedBug::kCatalogErrorFailsRun)) {
      return v.status();
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "workflow ", run.workflow_name, " version ", run.workflow_version, " pinned by this run ",
        code == absl::StatusCode::kNotFound ? "is not in the catalog" : "no longer decodes", " (",
        v.status().message(), "); the run fails closed"));
  }
  if (v->digest != run.workflow_digest) {
    return absl::FailedPreconditionError(absl::StrCat(
        "workflow ", run.workflow_name, " version ", run.workflow_version, " has digest ",
        v->digest, " but the run pinned ", run.workflow_digest, "; the run fails closed"));
  }
  auto c = Cache(*std::move(v), verified_at, /*compare=*/true);
  if (!c.ok()) {
    // It no longer parses (a release that reads the stored form otherwise),
    // or parses to another digest: poison too.
    return absl::FailedPreconditionError(
        absl::StrCat("workflow ", run.workflow_name, " version ", run.workflow_version,
                     " changed under its pinned digest ", run.workflow_digest, " (",
                     c.status().message(), "); the run fails closed"));
  }
  return c->second;
}

}  // namespace runloom::engine_internal
