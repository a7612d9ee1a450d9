#include "runloom/clock.h"

namespace runloom {
namespace {
// SimulatedClock waiters hold a foreign mutex; they re-check simulated time at
// this real-time granularity. This is the one place a simulated wait touches
// real time, and it only bounds wake-up latency, never correctness.
constexpr absl::Duration kSimulatedPoll = absl::Milliseconds(1);
}  // namespace

SimulatedClock::SimulatedClock(absl::Time start) : now_(start) {}

absl::Time SimulatedClock::Now() {
  runloom::MutexLock l(&mu_);
  return now_;
}

void SimulatedClock::SleepFor(absl::Duration d) { SleepUntil(Now() + d); }

void SimulatedClock::SleepUntil(absl::Time t) {
  runloom::MutexLock l(&mu_);
  auto reached = [this, t]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return now_ >= t; };
  mu_.Await(absl::Condition(&reached));
}

bool SimulatedClock::AwaitWithDeadline(runloom::Mutex* mu, const absl::Condition& cond,
                                       absl::Time deadline) {
  while (true) {
    if (cond.Eval()) return true;
    if (Now() >= deadline) return cond.Eval();
    // Release `mu` briefly so the party that makes `cond` true can run.
    mu->AwaitWithTimeout(cond, kSimulatedPoll);
  }
}

void SimulatedClock::Advance(absl::Duration d) {
  runloom::MutexLock l(&mu_);
  now_ += d;
  ++generation_;
}

void SimulatedClock::SetTime(absl::Time t) {
  runloom::MutexLock l(&mu_);
  now_ = t;
  ++generation_;
}

}  // namespace runloom
