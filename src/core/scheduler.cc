#include "runloom/scheduler.h"

#include "runloom/mutex.h"

#include <thread>
#include <vector>

namespace runloom {
namespace {

class ThreadSchedulerImpl final : public Scheduler {
 public:
  void RunAll(std::span<const std::function<void()>> tasks, Clock* clock, absl::Time deadline,
              const std::function<void(size_t)>& late) override {
    const size_t n = tasks.size();
    runloom::Mutex mu;  // guards done and remaining
    std::vector<bool> done(n, false);
    size_t remaining = n;
    std::vector<std::thread> threads;
    threads.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        tasks[i]();
        runloom::MutexLock l(&mu);
        done[i] = true;
        --remaining;
      });
    }
    {
      runloom::MutexLock l(&mu);
      auto all_done = [&remaining]() { return remaining == 0; };
      clock->AwaitWithDeadline(&mu, absl::Condition(&all_done), deadline);
      for (size_t i = 0; i < n; ++i) {
        if (!done[i]) late(i);
      }
    }
    for (std::thread& t : threads) t.join();
  }
};

}  // namespace

Scheduler* ThreadScheduler() {
  static Scheduler* const s = new ThreadSchedulerImpl();
  return s;
}

}  // namespace runloom
