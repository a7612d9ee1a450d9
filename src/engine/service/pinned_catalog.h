// PinnedCatalog: the engine's one cache of parsed workflow definitions.
// Admission resolves the version a new run pins through it (Resolve), and
// executors load the definition a run pinned (name, version, digest) from
// it, verified against the catalog (LoadPinned), so a run of a hot workflow
// costs no catalog read and no parse. LoadPinned fails closed: a version
// missing from the catalog, stored text that no longer decodes or parses, a
// different digest, or a definition changed under its digest is
// kFailedPrecondition, and the run fails with that reason; any other store
// error is returned unchanged (transient: the run is tried again).
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
#include <utility>

namespace runloom::engine_internal {

class PinnedCatalog {
 public:
  // `store` and `clock` must outlive the catalog.
  PinnedCatalog(CatalogStore* store, Clock* clock) : store_(store), clock_(clock) {}
  PinnedCatalog(const PinnedCatalog&) = delete;
  PinnedCatalog& operator=(const PinnedCatalog&) = delete;

  // The version a new run of `name` pins, and its definition: `version` 0
  // is the latest, read from the catalog every time (another process may
  // have registered a newer one); an explicit version is read once, as a
  // catalog version never changes. Either way a definition is parsed once.
  // kNotFound (or the store's error) when the catalog has no such version.
  absl::StatusOr<std::pair<WorkflowVersion, std::shared_ptr<const Workflow>>> Resolve(
      const std::string& name, int64_t version) ABSL_LOCKS_EXCLUDED(mu_);

  // Loads `run`'s pinned workflow version; fails closed on any mismatch.
  // `first_execution`: the run has never been leased before.
  absl::StatusOr<std::shared_ptr<const Workflow>> LoadPinned(const RunRecord& run,
                                                             bool first_execution = false)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct CachedWorkflow {
    WorkflowVersion version;  // canonical left out: it is below
    nlohmann::json canonical;
    std::shared_ptr<const Workflow> workflow;
    absl::Time verified_at;  // runs created after this may trust `workflow`
  };

  // Caches `v` (read from the catalog at `read_at`) parsed, unless it is
  // cached already (same key and, with `compare`, the same canonical form);
  // returns the cached one. kFailedPrecondition when `v` does not parse
  // to its digest.
  absl::StatusOr<std::pair<WorkflowVersion, std::shared_ptr<const Workflow>>> Cache(
      WorkflowVersion v, absl::Time read_at, bool compare) ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  CatalogStore* const store_;
  Clock* const clock_;

  runloom::Mutex mu_;
  // "name@version@digest" -> the verified definition.
  std::map<std::string, CachedWorkflow> workflows_ ABSL_GUARDED_BY(mu_);
  // "name@version" -> its key in workflows_ (a version's digest never changes).
  std::map<std::string, std::string> by_version_ ABSL_GUARDED_BY(mu_);
};

}  // namespace runloom::engine_internal
