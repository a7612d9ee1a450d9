// Fibers (core/fiber.h): many waits on few threads, the hand-over of a wake
// that races the switch, stale wakers, and Suspend off a fiber. No test
// times anything: each counts what waited at once.
#include "core/fiber.h"

#include "runloom/clock.h"
#include "runloom/mutex.h"

#include "testing/fiber_host.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <atomic>
#include <cfenv>
#include <deque>
#include <thread>
#include <vector>

namespace runloom::fiber {
namespace {

using ::runloom::testing::FiberHost;

TEST(Fiber, AThousandWaitsShareTwoThreads) {
  constexpr int kFibers = 1000;
  FiberHost host;
  runloom::Mutex mu;
  std::vector<Waker> wakers;  // guarded by mu
  std::atomic<int> resumed{0};
  std::atomic<int> off_fiber{0};
  for (int i = 0; i < kFibers; ++i) {
    host.Spawn([&] {
      if (!OnFiber()) ++off_fiber;
      Suspend([&](const Waker& w) {
        runloom::MutexLock l(&mu);
        wakers.push_back(w);
        // The last one to wait wakes them all: all kFibers waited at once,
        // on two threads.
        if (static_cast<int>(wakers.size()) == kFibers) {
          for (const Waker& x : wakers) x.Wake();
        }
      });
      ++resumed;
    });
  }
  host.Run(2);
  EXPECT_EQ(resumed.load(), kFibers);
  EXPECT_EQ(off_fiber.load(), 0);
  EXPECT_FALSE(OnFiber());
}

TEST(Fiber, EachFiberKeepsItsOwnFloatingPointControlWords) {
  // The switch keeps the SSE and x87 control words with the registers: three
  // fibers on one thread each set a rounding mode, all wait at once, and each
  // finds its own mode when it resumes (without that, all would find the
  // last one set).
  const int modes[] = {FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};
  FiberHost host;
  runloom::Mutex mu;
  std::vector<Waker> wakers;  // guarded by mu
  std::atomic<int> kept{0};
  for (int mode : modes) {
    host.Spawn([&, mode] {
      ASSERT_EQ(std::fesetround(mode), 0);
      Suspend([&](const Waker& w) {
        runloom::MutexLock l(&mu);
        wakers.push_back(w);
        if (wakers.size() == std::size(modes)) {
          for (const Waker& x : wakers) x.Wake();
        }
      });
      if (std::fegetround() == mode) ++kept;
      std::fesetround(FE_TONEAREST);
    });
  }
  host.Run(1);
  EXPECT_EQ(kept.load(), 3);
  EXPECT_EQ(std::fegetround(), FE_TONEAREST);
}

TEST(Fiber, AWakeRacingTheSwitchResumesTheFiberOnce) {
  // A thread wakes each wait as soon as it is armed, often while its fiber
  // is still switching out; each wait must end exactly once.
  constexpr int kFibers = 200;
  constexpr int kWaits = 20;
  FiberHost host;
  std::atomic<int> waits{0};
  runloom::Mutex mu;
  std::deque<Waker> armed;  // guarded by mu
  bool stop = false;        // guarded by mu
  std::thread waker([&] {
    while (true) {
      Waker w;
      {
        runloom::MutexLock l(&mu);
        auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return stop || !armed.empty(); };
        mu.Await(absl::Condition(&ready));
        if (armed.empty()) return;
        w = armed.front();
        armed.pop_front();
      }
      EXPECT_TRUE(w.Wake());
    }
  });
  for (int i = 0; i < kFibers; ++i) {
    host.Spawn([&] {
      for (int k = 0; k < kWaits; ++k) {
        Suspend([&](const Waker& w) {
          runloom::MutexLock l(&mu);
          armed.push_back(w);
        });
        ++waits;
      }
    });
  }
  host.Run(2);
  {
    runloom::MutexLock l(&mu);
    stop = true;
  }
  waker.join();
  EXPECT_EQ(waits.load(), kFibers * kWaits);
}

TEST(Fiber, AWokenWaitIgnoresLaterWakes) {
  FiberHost host;
  Waker first;
  bool second_woke_by_timer = false;
  host.Spawn([&] {
    Suspend([&](const Waker& w) {
      first = w;
      EXPECT_FALSE(w.ended());
      EXPECT_TRUE(w.Wake());  // woken at once, before switching out
    });
    EXPECT_TRUE(first.ended());
    EXPECT_FALSE(first.Wake());  // the wait is over: nothing happens
    // A timer wakes the next wait; the stale waker above must not.
    Suspend([&](const Waker& w) {
      EXPECT_FALSE(first.Wake());
      WakeAt(RealClock()->Now() + absl::Milliseconds(5), w);
    });
    second_woke_by_timer = true;
  });
  host.Run(1);
  EXPECT_TRUE(second_woke_by_timer);
}

TEST(Fiber, OffAFiberSuspendBlocksTheThreadUntilWoken) {
  std::atomic<bool> woken{false};
  std::thread other;
  Suspend([&](const Waker& w) {
    other = std::thread([&woken, w] {
      woken = true;
      w.Wake();
    });
  });
  EXPECT_TRUE(woken.load());
  other.join();
}

TEST(Fiber, RealClockSleepsSuspendAFiber) {
  // Fifty fibers sleeping on one thread: each sleep suspends, so all fifty
  // are asleep at once (counted at the peak), not one after another.
  constexpr int kFibers = 50;
  FiberHost host;
  std::atomic<int> asleep{0};
  std::atomic<int> peak{0};
  for (int i = 0; i < kFibers; ++i) {
    host.Spawn([&] {
      peak = std::max(peak.load(), ++asleep);
      RealClock()->SleepFor(absl::Seconds(1));
      --asleep;
    });
  }
  host.Run(1);
  EXPECT_EQ(peak.load(), kFibers);
}

}  // namespace
}  // namespace runloom::fiber
