// FiberHost: a fiber::Host (core/fiber.h) for tests, with threads of its
// own resuming fibers from one queue, as the executor pool does.
//
// Thread-safety: Spawn from any thread; Run from one.
#pragma once

#include "core/fiber.h"
#include "runloom/mutex.h"

#include "absl/base/thread_annotations.h"

#include <deque>
#include <functional>
#include <thread>
#include <vector>

namespace runloom::testing {

// A host with `threads` threads resuming fibers from one queue until every
// fiber has returned.
class FiberHost final : public fiber::Host {
 public:
  void Ready(fiber::Fiber* f) override {
    runloom::MutexLock l(&mu_);
    ready_.push_back(f);
  }
  void Spawn(std::function<void()> fn) {
    runloom::MutexLock l(&mu_);
    ++alive_;
    ready_.push_back(fiber::Create(std::move(fn), this));
  }
  // Runs the fibers spawned so far (and what they spawn) to their end.
  void Run(int threads) {
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i) {
      pool.emplace_back([this] {
        while (true) {
          fiber::Fiber* f = nullptr;
          {
            runloom::MutexLock l(&mu_);
            auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
              return !ready_.empty() || alive_ == 0;
            };
            mu_.Await(absl::Condition(&ready));
            if (ready_.empty()) return;
            f = ready_.front();
            ready_.pop_front();
          }
          if (fiber::Resume(f)) {
            fiber::Destroy(f);
            runloom::MutexLock l(&mu_);
            --alive_;
          }
        }
      });
    }
    for (std::thread& t : pool) t.join();
  }

 private:
  runloom::Mutex mu_;
  std::deque<fiber::Fiber*> ready_ ABSL_GUARDED_BY(mu_);
  int alive_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace runloom::testing
