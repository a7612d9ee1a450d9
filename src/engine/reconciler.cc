#include "engine/reconciler.h"

namespace runloom::engine_internal {

bool Reconciler::Owns(const RecoveryCandidate& c) { return c.status != RunStatus::kRunning; }

absl::Status Reconciler::Reconcile(const RecoveryCandidate& c) {
  return store_->Enqueue(c.run_id, {});
}

}  // namespace runloom::engine_internal
