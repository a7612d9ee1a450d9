#include "engine/service/lease_keeper.h"

#include "core/log.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>


namespace runloom::engine_internal {

void LeaseKeeper::RenewAll() {
  const std::vector<std::shared_ptr<RunExecution>> held = active_->Snapshot();
  // One store round trip (a write) per run held. With thousands held
  // (EngineOptions::runs_in_flight) one after another could outlast the
  // heartbeat, so up to kMaxRenewers threads share them: the store's group
  // commit puts their writes in fewer transactions (SQLite), and they use
  // several pooled connections at once (PostgreSQL).
  const size_t renewers =
      std::min(kMaxRenewers, (held.size() + kRunsPerRenewer - 1) / kRunsPerRenewer);
  std::atomic<size_t> next{0};
  auto renew = [&] {
    for (size_t i = next++; i < held.size(); i = next++) Renew(*held[i]);
  };
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < renewers; ++t) helpers.emplace_back(renew);
  renew();
  for (std::thread& t : helpers) t.join();
}

void LeaseKeeper::Renew(RunExecution& e) {
  const Lease lease = e.lease();
  if (lease.token.empty()) return;  // a first execution that has not leased yet
  auto r = store_->RenewLease(e.run_id(), lease.token, lease_ttl_);
  if (r.ok()) {
    if (r->cancel_requested) e.root().RequestStop(StopReason::kCancel);
    return;
  }
  // The run's last write (its end, a pause, a park) committed while this
  // renewal was on its way: the execution is ending on its own, nothing lost.
  // (With thousands of runs held, a heartbeat's snapshot often holds runs
  // ending as it renews; their refusals were logged as leases lost.) Not
  // skipped before renewing: that write may be slow, and the lease must not
  // lapse meanwhile.
  if (e.lease_releasing()) return;
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
