#include "engine/service/reconciler.h"

#include "core/log.h"

#include "absl/container/flat_hash_set.h"

#include <string>

namespace runloom::engine_internal {

bool Reconciler::Owns(const RecoveryCandidate& c) { return c.status != RunStatus::kRunning; }

absl::StatusOr<int> Reconciler::Reconcile(const std::vector<RecoveryCandidate>& queued) {
  if (queued.empty()) return 0;
  std::vector<std::string> ids;
  ids.reserve(queued.size());
  for (const RecoveryCandidate& c : queued) ids.push_back(c.run_id);
  absl::StatusOr<MessagePresence> presence = transport_->FindMessages(ids);
  if (!presence.ok()) return presence.status();
  absl::flat_hash_set<std::string> held(presence->pending.begin(), presence->pending.end());
  held.insert(presence->dead_lettered.begin(), presence->dead_lettered.end());
  int enqueued = 0;
  absl::Status first_error;
  for (const std::string& id : ids) {
    if (held.contains(id)) continue;  // the transport still has it
    absl::Status s = store_->Enqueue(id, {});
    if (s.ok()) {
      ++enqueued;
      metrics_->Swept(SweepAction::kReconciled);
      continue;
    }
    if (s.code() == absl::StatusCode::kAborted) {  // it moved on (paused, finished)
      Log(logger_, LogLevel::kDebug, {.run_id = id}, "run ", id,
          ": not enqueued again: ", s.ToString());
      continue;
    }
    Log(logger_, LogLevel::kWarning, {.run_id = id}, "run ", id,
        ": reconciler could not enqueue it again: ", s.ToString());
    if (first_error.ok()) first_error = s;
  }
  metrics_->ReconcilerEnqueued(enqueued);
  if (enqueued == 0 && !first_error.ok()) return first_error;
  return enqueued;
}

}  // namespace runloom::engine_internal
