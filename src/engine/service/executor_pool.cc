#include "engine/service/executor_pool.h"

#include "core/log.h"

#include <algorithm>
#include <cstring>
#include <pthread.h>
#include <sched.h>

namespace runloom::engine_internal {
namespace {

// An execution the launcher could not carry out. A run that is not runnable
// (terminal, paused), leased elsewhere, or over its concurrency limit (the
// store kept it queued with a fresh message) is routine for a redelivered
// message; anything else is a failure the message's redelivery will retry.
void LogExecuteError(Logger* logger, const std::string& run_id, const absl::Status& s) {
  if (s.ok()) return;
  const bool routine = s.code() == absl::StatusCode::kFailedPrecondition ||
                       s.code() == absl::StatusCode::kAborted ||
                       s.code() == absl::StatusCode::kResourceExhausted;
  Log(logger, routine ? LogLevel::kDebug : LogLevel::kWarning, {.run_id = run_id}, "run ", run_id,
      ": not executed: ", s.ToString());
}

}  // namespace

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
  // A transport that is down fails every poll: log when claiming starts
  // failing (and each new error) and when it works again, not every poll.
  std::string claim_error;  // owned by this thread
  const int max_runs = std::max(options_.executors, options_.runs_in_flight);
  while (true) {
    int want;
    {
      runloom::MutexLock l(&mu_);
      auto room = [this, max_runs]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        const int queued = static_cast<int>(work_.size() + ready_.size());
        return std::min(idle_executors_ - queued,
                        max_runs - fibers_ - static_cast<int>(work_.size()));
      };
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_dispatch_ || room() > 0;
      };
      mu_.Await(absl::Condition(&ready));
      if (stop_dispatch_) break;
      want = room();
    }
    auto msgs = transport_->Claim(options_.owner, want, options_.visibility_timeout);
    if (!msgs.ok() && msgs.status().ToString() != claim_error) {
      claim_error = msgs.status().ToString();
      Log(logger_, LogLevel::kWarning,
          "executor pool: claiming queue messages failed: ", claim_error);
    } else if (msgs.ok() && !claim_error.empty()) {
      claim_error.clear();
      Log(logger_, LogLevel::kInfo, "executor pool: claiming queue messages works again");
    }
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
  for (const QueueMessage& m : left) {
    absl::Status s = transport_->Release(m);
    if (!s.ok()) {
      // Not lost: the message is delivered again after its visibility timeout.
      Log(logger_, LogLevel::kWarning, {.run_id = m.run_id}, "run ", m.run_id,
          ": releasing its queue message on shutdown failed: ", s.ToString());
    }
  }
}

void ExecutorPool::ExecutorLoop() {
  if (options_.batch_scheduling) {
    // Best effort: a system that refuses it only loses some throughput.
    sched_param param{};
    const int err = pthread_setschedparam(pthread_self(), SCHED_BATCH, &param);
    if (err != 0) {
      Log(logger_, LogLevel::kWarning, "executor thread: SCHED_BATCH refused (", std::strerror(err),
          "); running under the default policy");
    }
  }
  while (true) {
    fiber::Fiber* f = nullptr;
    {
      runloom::MutexLock l(&mu_);
      ++idle_executors_;
      // A woken run first; a new one only while dispatching; the end once
      // dispatching stopped and every run held has ended.
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !ready_.empty() || (!stop_dispatch_ && !work_.empty()) ||
               (stop_dispatch_ && fibers_ == 0);
      };
      mu_.Await(absl::Condition(&ready));
      --idle_executors_;
      if (!ready_.empty()) {
        f = ready_.front();
        ready_.pop_front();
      } else if (stop_dispatch_) {
        break;
      } else {
        QueueMessage m = std::move(work_.front());
        work_.pop_front();
        ++fibers_;
        // Logged inside; the message is acked or delivered again.
        f = fiber::Create(
            [this, m = std::move(m)] {
              ExecuteMessage(m, transport_, launcher_, logger_).IgnoreError();
            },
            this);
      }
    }
    if (fiber::Resume(f)) {
      fiber::Destroy(f);
      runloom::MutexLock l(&mu_);
      --fibers_;
    }
  }
}

void ExecutorPool::Ready(fiber::Fiber* f) {
  runloom::MutexLock l(&mu_);
  ready_.push_back(f);
}

absl::Status ExecuteMessage(const QueueMessage& m, Transport* transport, RunLauncher* launcher,
                            Logger* logger) {
  auto ack = [&] {
    absl::Status s = transport->Ack(m);
    if (!s.ok()) {
      // Delivered again after the visibility timeout, and acked then: the
      // run is leased or done.
      Log(logger, LogLevel::kWarning, {.run_id = m.run_id}, "run ", m.run_id,
          ": acking its queue message failed: ", s.ToString());
    }
  };
  bool acked = false;
  auto on_leased = [&](const Lease&) {
    acked = true;
    ack();  // the lease stands for the message now
  };
  auto r = launcher->ExecuteRun(m.run_id, on_leased, /*want_record=*/false);
  if (!acked && r.status().code() != absl::StatusCode::kUnavailable) {
    // Not runnable (terminal, paused, gone) or leased elsewhere: the
    // lease and the sweeper own recovery from here. Over its concurrency
    // limit: the store gave the run a fresh message in the refusal's commit,
    // so this one is acked too.
    ack();
  }
  LogExecuteError(logger, m.run_id, r.status());
  return r.status();
}

}  // namespace runloom::engine_internal
