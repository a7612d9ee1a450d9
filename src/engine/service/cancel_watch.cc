#include "engine/service/cancel_watch.h"

#include "core/log.h"

#include "absl/container/flat_hash_map.h"

#include <memory>
#include <vector>

namespace runloom::engine_internal {

int CancelWatch::CheckOnce() {
  std::vector<std::shared_ptr<RunExecution>> held = active_->Snapshot();
  if (held.empty()) return 0;
  absl::flat_hash_map<std::string, RunExecution*> by_id;
  std::vector<std::string> ids;
  ids.reserve(held.size());
  for (const std::shared_ptr<RunExecution>& e : held) {
    by_id[e->run_id()] = e.get();
    ids.push_back(e->run_id());
  }
  absl::StatusOr<std::vector<std::string>> cancelled = store_->FindCancelRequested(ids);
  {
    runloom::MutexLock l(&mu_);
    if (!cancelled.ok()) {
      const std::string error = cancelled.status().ToString();
      if (error != last_error_) {
        Log(logger_, LogLevel::kWarning,
            "cancel check failed (cancels still arrive with the next lease renewal): ", error);
        last_error_ = error;
      }
      return 0;
    }
    if (!last_error_.empty()) {
      Log(logger_, LogLevel::kInfo, "cancel check works again");
      last_error_.clear();
    }
  }
  for (const std::string& id : *cancelled) {
    Log(logger_, LogLevel::kDebug, by_id[id]->log_fields(), "run ", id,
        ": cancel requested; stopping its execution");
    by_id[id]->root().RequestStop(StopReason::kCancel);
  }
  return static_cast<int>(cancelled->size());
}

void CancelWatch::StopIfHeld(const std::string& run_id) {
  for (const std::shared_ptr<RunExecution>& e : active_->Snapshot()) {
    if (e->run_id() == run_id) e->root().RequestStop(StopReason::kCancel);
  }
}

}  // namespace runloom::engine_internal
