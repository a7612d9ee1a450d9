#include "engine/executor_pool.h"

#include <pthread.h>
#include <sched.h>

namespace runloom::engine_internal {

void ExecutorPool::Start() {
  runloom::MutexLock l(&mu_);
  if (!threads_.empty()) return;
  stop_dispatch_ = false;
  for (int i = 0; i < options_.executors; ++i) {
    threads_.emplace_back([this] { ExecutorLoop(); });
  }
  threads_.emplace_back([this] { DispatcherLoop(); });
}

void ExecutorPool::StopDispatch() {
  runloom::MutexLock l(&mu_);
  stop_dispatch_ = true;
}

void ExecutorPool::Join() {
  std::vector<std::thread> threads;
  {
    runloom::MutexLock l(&mu_);
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

void ExecutorPool::DispatcherLoop() {
  while (true) {
    int want;
    {
      runloom::MutexLock l(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_dispatch_ || idle_executors_ > static_cast<int>(work_.size());
      };
      mu_.Await(absl::Condition(&ready));
      if (stop_dispatch_) break;
      want = idle_executors_ - static_cast<int>(work_.size());
    }
    auto msgs = transport_->Claim(options_.owner, want, options_.visibility_timeout);
    if (!msgs.ok() || msgs->empty()) {
      transport_->WaitForMessages(clock_->Now() + options_.idle_poll);
      continue;
    }
    runloom::MutexLock l(&mu_);
    for (QueueMessage& m : *msgs) work_.push_back(std::move(m));
  }
  // Give back what no executor started, so another worker gets it now.
  std::deque<QueueMessage> left;
  {
    runloom::MutexLock l(&mu_);
    left.swap(work_);
  }
  for (const QueueMessage& m : left) (void)transport_->Release(m);
}

void ExecutorPool::ExecutorLoop() {
  if (options_.batch_scheduling) {
    // Best effort: a system that refuses it only loses some throughput.
    sched_param param{};
    (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &param);
  }
  while (true) {
    QueueMessage m;
    {
      runloom::MutexLock l(&mu_);
      ++idle_executors_;
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_dispatch_ || !work_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      --idle_executors_;
      if (stop_dispatch_) break;
      m = std::move(work_.front());
      work_.pop_front();
    }
    bool acked = false;
    auto on_leased = [&](const Lease&) {
      acked = true;
      (void)transport_->Ack(m);  // the lease stands for the message now
    };
    auto r = launcher_->ExecuteRun(m.run_id, on_leased, /*want_record=*/false);
    if (!acked && r.status().code() != absl::StatusCode::kUnavailable) {
      // Not runnable (terminal, paused, gone) or leased elsewhere: the
      // lease and the sweeper own recovery from here.
      acked = true;
      (void)transport_->Ack(m);
    }
  }
}

}  // namespace runloom::engine_internal
