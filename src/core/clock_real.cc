// The only file allowed to read the system clock or sleep (CI greps for it).
#include "runloom/clock.h"

#include "core/fiber.h"

#include <chrono>
#include <thread>

namespace runloom {
namespace {

class RealClockImpl final : public Clock {
 public:
  absl::Time Now() override { return absl::Now(); }
  // On a fiber (core/fiber.h) a sleep gives the thread back.
  void SleepFor(absl::Duration d) override {
    if (fiber::OnFiber()) {
      fiber::SleepUntil(absl::Now() + d);
      return;
    }
    absl::SleepFor(d);
  }
  void SleepUntil(absl::Time t) override {
    if (fiber::OnFiber()) {
      fiber::SleepUntil(t);
      return;
    }
    absl::Duration d = t - absl::Now();
    if (d > absl::ZeroDuration()) absl::SleepFor(d);
  }
  bool AwaitWithDeadline(runloom::Mutex* mu, const absl::Condition& cond,
                         absl::Time deadline) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return mu->AwaitWithDeadline(cond, deadline);
  }
};

}  // namespace

Clock* RealClock() {
  static RealClockImpl* clock = new RealClockImpl();  // never destroyed: usable during exit
  return clock;
}

}  // namespace runloom
