// PinnedCatalog: the workflow definition a run pinned (name, version,
// digest), loaded from the catalog and verified, with a cache so a run of a
// hot workflow costs no catalog read. Fails closed: a version missing from
// the catalog, a different digest, or a definition changed under its digest
// is kFailedPrecondition, and the run fails.
//
// Trust rule: a cached definition (its digest is part of the key) is trusted
// for a run's first execution and for runs created after it was verified; a
// run resumed after a pause or a crash is always checked against the catalog
// as it is now.
//
// Thread-safety: thread-safe (mu_ guards the cache; the catalog read happens
// outside it).
#pragma once

#include "runloom/clock.h"
#include "runloom/mutex.h"
#include "runloom/run.h"
#include "runloom/store.h"
#include "runloom/workflow.h"

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"

#include <map>
#include <memory>
#include <string>

namespace runloom::engine_internal {

class PinnedCatalog {
 public:
  // `store` and `clock` must outlive the catalog.
  PinnedCatalog(CatalogStore* store, Clock* clock) : store_(store), clock_(clock) {}
  PinnedCatalog(const PinnedCatalog&) = delete;
  PinnedCatalog& operator=(const PinnedCatalog&) = delete;

  // Loads `run`'s pinned workflow version; fails closed on any mismatch.
  // `first_execution`: the run has never been leased before.
  absl::StatusOr<std::shared_ptr<const Workflow>> LoadPinned(const RunRecord& run,
                                                             bool first_execution = false)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct CachedWorkflow {
    nlohmann::json canonical;
    std::shared_ptr<const Workflow> workflow;
    absl::Time verified_at;  // runs created after this may trust `workflow`
  };

  // Constant after construction.
  CatalogStore* const store_;
  Clock* const clock_;

  runloom::Mutex mu_;
  // "name@version@digest" -> the verified definition.
  std::map<std::string, CachedWorkflow> workflows_ ABSL_GUARDED_BY(mu_);
};

}  // namespace runloom::engine_internal
