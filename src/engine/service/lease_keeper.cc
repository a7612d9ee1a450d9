#include "engine/service/lease_keeper.h"

#include "core/log.h"


namespace runloom::engine_internal {

void LeaseKeeper::RenewAll() {
  for (auto& e : active_->Snapshot()) Renew(*e);
}

void LeaseKeeper::Renew(RunExecution& e) {
  const Lease lease = e.lease();
  if (lease.token.empty()) return;  // a first execution that has not leased yet
  auto r = store_->RenewLease(e.run_id(), lease.token, lease_ttl_);
  if (r.ok()) {
    if (r->cancel_requested) e.root().RequestStop(StopReason::kCancel);
    return;
  }
  if (r.status().code() == absl::StatusCode::kUnavailable && clock_->Now() < lease.expires_at) {
    Log(logger_, LogLevel::kWarning, e.log_fields(), "run ", e.run_id(),
        ": lease renewal failed, retrying next heartbeat: ", r.status().ToString());
    return;
  }
  // A failed renewal stops the executor at once. kAborted is the lease lost
  // to someone else, the protocol working; anything else is a failure.
  Log(logger_,
      r.status().code() == absl::StatusCode::kAborted ? LogLevel::kInfo : LogLevel::kWarning,
      e.log_fields(), "run ", e.run_id(),
      ": lease renewal failed, stopping the execution: ", r.status().ToString());
  e.root().RequestStop(StopReason::kLeaseLost);
}

}  // namespace runloom::engine_internal
