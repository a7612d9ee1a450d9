#include "engine/lease_keeper.h"

#include "core/log.h"

#include <utility>

namespace runloom::engine_internal {

void LeaseKeeper::Start() {
  runloom::MutexLock l(&mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void LeaseKeeper::Stop() {
  std::thread t;
  {
    runloom::MutexLock l(&mu_);
    stop_ = true;
    t = std::move(thread_);
  }
  if (t.joinable()) t.join();
}

void LeaseKeeper::Loop() {
  runloom::MutexLock l(&mu_);
  while (!stop_) {
    auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
    clock_->AwaitWithDeadline(&mu_, absl::Condition(&stop), clock_->Now() + heartbeat_);
    if (stop_) break;
    mu_.Unlock();
    for (auto& e : active_->Snapshot()) Renew(*e);
    mu_.Lock();
  }
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
    Log(logger_, LogLevel::kWarning, "run ", e.run_id(),
        ": lease renewal failed, retrying next heartbeat: ", r.status().ToString());
    return;
  }
  // A failed renewal stops the executor at once. kAborted is the lease lost
  // to someone else, the protocol working; anything else is a failure.
  Log(logger_,
      r.status().code() == absl::StatusCode::kAborted ? LogLevel::kInfo : LogLevel::kWarning,
      "run ", e.run_id(),
      ": lease renewal failed, stopping the execution: ", r.status().ToString());
  e.root().RequestStop(StopReason::kLeaseLost);
}

}  // namespace runloom::engine_internal
