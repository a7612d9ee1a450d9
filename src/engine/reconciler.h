// Reconciler: the rule for a run the store says is `queued` but that has no
// live lease and no queue message after a grace period (the message was
// lost): enqueue it again from the store's state. It never runs a graph.
//
// Today the candidates come from Store::FindRecoverable (one query shared
// with the sweeper, which hands the `queued` ones here); the question "does
// the transport hold a message for this run?" is answered by that query.
//
// Thread-safety: stateless apart from its constant pointers; thread-safe.
#pragma once

#include "runloom/store.h"

#include "absl/status/status.h"

namespace runloom::engine_internal {

class Reconciler {
 public:
  // `store` must outlive the reconciler.
  explicit Reconciler(Store* store) : store_(store) {}
  Reconciler(const Reconciler&) = delete;
  Reconciler& operator=(const Reconciler&) = delete;

  // True for the candidates this rule owns: queued runs.
  static bool Owns(const RecoveryCandidate& c);

  // Enqueues the run again. REQUIRES: Owns(c).
  absl::Status Reconcile(const RecoveryCandidate& c);

 private:
  Store* const store_;  // constant after construction
};

}  // namespace runloom::engine_internal
