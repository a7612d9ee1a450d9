// Retention (issue 25): how long finished runs are kept, and how the engine
// deletes the older ones (RetentionStore::PruneRuns, in store.h) while it
// runs. docs/operations.md "Retention" is the operator's view of it.
//
// Only terminal runs ever go (completed, rejected, unresolved,
// budget_stopped, failed, cancelled), with every row of theirs; a run that
// is queued, running, paused or waiting stays whatever its age.
//
// Thread-safety: a plain value.
#pragma once

#include "absl/time/time.h"

#include <map>
#include <string>

namespace runloom {

struct RetentionPolicy {
  // A terminal run is deleted this long after it finished (its finished_at,
  // by the store's clock). InfiniteDuration() = kept forever, the library's
  // default: an embedder opts in. The `runloom` commands that execute runs
  // default to kDefaultKeepRuns (their config file's `retention:` block).
  absl::Duration keep_runs = absl::InfiniteDuration();
  // Per workflow name, in place of keep_runs (InfiniteDuration() = forever).
  std::map<std::string, absl::Duration> keep_runs_by_workflow;
  // A run with a write_operations row younger than this is kept whole (the
  // ledger row is the audit trail of an external write); InfiniteDuration()
  // = such a run is never deleted.
  absl::Duration audit_horizon = absl::Hours(24 * 90);
  // Runs per transaction: bounded so that one batch holds the store's
  // writer (SQLite) or its row locks and dead tuples (PostgreSQL: about
  // 100 runs of ~50 rows each per commit, which autovacuum absorbs) only
  // briefly. Each pass deletes batches while they come back full, for at
  // most max_pass_time (by the sweep's clock) and max_batches_per_pass
  // batches, whichever ends first: a backlog drains at up to 10 s of every
  // interval, and other writers get the store between batches.
  int batch_runs = 100;
  int max_batches_per_pass = 10'000;
  absl::Duration max_pass_time = absl::Seconds(10);
  // How often the sweeping process makes a pass.
  absl::Duration interval = absl::Minutes(1);

  // Whether any run can ever be deleted under this policy.
  bool enabled() const {
    if (keep_runs != absl::InfiniteDuration()) return true;
    for (const auto& [name, keep] : keep_runs_by_workflow) {
      if (keep != absl::InfiniteDuration()) return true;
    }
    return false;
  }
};

// The `runloom` commands' default keep_runs (30 days) and audit horizon
// (90 days).
inline constexpr absl::Duration kDefaultKeepRuns = absl::Hours(24 * 30);
inline constexpr absl::Duration kDefaultAuditHorizon = absl::Hours(24 * 90);

}  // namespace runloom
