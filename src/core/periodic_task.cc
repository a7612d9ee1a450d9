#include "core/periodic_task.h"

#include <utility>

namespace runloom {

void PeriodicTask::Start() {
  runloom::MutexLock l(&mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void PeriodicTask::Stop() {
  std::thread t;
  {
    runloom::MutexLock l(&mu_);
    stop_ = true;
    t = std::move(thread_);
  }
  if (t.joinable()) t.join();
}

void PeriodicTask::Loop() {
  runloom::MutexLock l(&mu_);
  while (!stop_) {
    auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
    clock_->AwaitWithDeadline(&mu_, absl::Condition(&stop), clock_->Now() + period_);
    if (stop_) break;
    mu_.Unlock();
    tick_();
    mu_.Lock();
  }
}

}  // namespace runloom
