// Reconciler: the rule for runs the store says are `queued`, with no live
// lease, for longer than a grace period: it asks the transport which of them
// still have a message (pending, claimed, or dead-lettered) and enqueues the
// rest again from the store's state, so a message the transport lost is
// restored. A dead-lettered run is left alone until someone redrives it.
// It never runs a graph.
//
// The candidates come from Store::FindRecoverable (one query shared with the
// sweeper, which hands the `queued` ones here in one batch).
//
// Thread-safety: stateless apart from its constant pointers; thread-safe.
#pragma once

#include "runloom/env.h"
#include "runloom/store.h"
#include "runloom/transport.h"

#include "engine/observe/engine_metrics.h"

#include "absl/status/statusor.h"

#include <vector>

namespace runloom::engine_internal {

class Reconciler {
 public:
  // Every pointer must outlive the reconciler.
  Reconciler(Store* store, Transport* transport, Logger* logger, EngineMetrics* metrics)
      : store_(store), transport_(transport), logger_(logger), metrics_(metrics) {}
  Reconciler(const Reconciler&) = delete;
  Reconciler& operator=(const Reconciler&) = delete;

  // True for the candidates this rule owns: queued runs.
  static bool Owns(const RecoveryCandidate& c);

  // Enqueues again those of `queued` (REQUIRES: Owns() each) that the
  // transport has no message or dead letter for. Returns how many it
  // enqueued. When the transport cannot answer, enqueues none (a duplicate
  // message is harmless, but a dead-lettered run must not be revived).
  // A run that could not be enqueued is logged; the first such error is
  // returned only when none was enqueued.
  absl::StatusOr<int> Reconcile(const std::vector<RecoveryCandidate>& queued);

 private:
  // Constant after construction.
  Store* const store_;
  Transport* const transport_;
  Logger* const logger_;
  EngineMetrics* const metrics_;
};

}  // namespace runloom::engine_internal
