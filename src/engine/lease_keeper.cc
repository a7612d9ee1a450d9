#include "engine/lease_keeper.h"

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
    return;  // try again next beat
  }
  // A failed renewal stops the executor at once.
  e.root().RequestStop(StopReason::kLeaseLost);
}

}  // namespace runloom::engine_internal
