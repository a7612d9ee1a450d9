// Clock: the only source of time in runloom.
//
// Every component that reads the time, sleeps, or waits with a deadline takes
// a Clock*. Production code uses RealClock(); tests use SimulatedClock, which
// moves only when the test calls Advance() or SetTime(), so lease expiry and
// retry backoff are tested without sleeping.
//
// AwaitWithDeadline takes a runloom::Mutex (runloom/mutex.h): in normal builds
// that is runloom::Mutex itself, so an embedder's runloom::Mutex works unchanged; in
// ThreadSanitizer builds it is the TSan-visible stand-in. The Clock seam has to
// name the same mutex type the engine locks, hence the alias and not
// runloom::Mutex here.
//
// Thread-safety: all methods of both implementations are thread-safe.
#pragma once

#include "runloom/mutex.h"

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

#include <cstdint>

namespace runloom {

class Clock {
 public:
  virtual ~Clock() = default;

  // The current time.
  virtual absl::Time Now() = 0;

  // Blocks the calling thread for `d` (of this clock's time).
  virtual void SleepFor(absl::Duration d) = 0;

  // Blocks until Now() >= t.
  virtual void SleepUntil(absl::Time t) = 0;

  // Waits on `mu` (which the caller must hold) until `cond` holds or the clock
  // reaches `deadline`. Returns the final value of `cond`. `mu` is held on
  // return. Whoever makes `cond` true must do so while holding `mu`.
  //
  // Example:
  //   runloom::MutexLock l(&mu_);
  //   clock->AwaitWithDeadline(&mu_, absl::Condition(&stop_), deadline);
  virtual bool AwaitWithDeadline(Mutex* mu, const absl::Condition& cond, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;
};

// The process-wide wall clock. Never null, never deleted.
Clock* RealClock();

// A clock that moves only when told to. Sleepers and AwaitWithDeadline callers
// wake when Advance()/SetTime() passes their deadline.
class SimulatedClock final : public Clock {
 public:
  explicit SimulatedClock(absl::Time start = absl::FromUnixSeconds(1'800'000'000));
  SimulatedClock(const SimulatedClock&) = delete;
  SimulatedClock& operator=(const SimulatedClock&) = delete;

  absl::Time Now() override;
  void SleepFor(absl::Duration d) override;
  void SleepUntil(absl::Time t) override;
  bool AwaitWithDeadline(Mutex* mu, const absl::Condition& cond, absl::Time deadline) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Moves time forward by `d` and wakes sleepers whose deadline passed.
  void Advance(absl::Duration d);
  void SetTime(absl::Time t);

 private:
  Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  // Bumped on every time change so waiters on other mutexes can poll cheaply.
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace runloom
