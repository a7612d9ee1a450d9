// Fibers: waiting without holding a thread (issue 27, "cheap waiting").
//
// A fiber is a function with a stack of its own, run by whichever thread
// resumes it: a Host's threads (the executor pool's). A fiber waits with
// Suspend(): it gives its thread back until a Waker made for that wait is
// woken, from any thread; the Host then queues it and one of its threads
// resumes it, perhaps another than before. A wait on a timer (WakeAt), on a
// stop or on a concurrency slot costs the fiber's stack and no thread, so one
// worker keeps thousands of model calls in flight on a few executor threads.
//
// Rules for code that may run on a fiber:
//  - never Suspend while holding a lock another fiber may need (a
//    SuspendableRegion names the one exception the engine makes);
//  - a blocking wait (a mutex, a condition variable, a subprocess) blocks the
//    fiber's thread, not only the fiber: fine when whatever ends the wait does
//    not need a suspended fiber to run (a store commit does not; a free
//    concurrency slot does, so LlmSlots suspends instead of blocking);
//  - no thread-local state held across a Suspend (the fiber may come back on
//    another thread); read errno right after the call that set it.
// Off a fiber, Suspend blocks the calling thread until woken, so code calls
// it the same way on either, and RealClock()'s sleeps suspend a fiber.
//
// Why hand-written: the engine library links no Boost (an embedder's link
// line stays small), so not Boost.Context; what a pool of fibers needs is a
// stack switch (on x86-64 a few lines of assembly, since glibc's swapcontext
// makes a system call each time; swapcontext elsewhere), a stack with a guard
// page, the hand-over rule below and the sanitizers' fiber annotations, all in
// fiber.cc.
//
// Thread-safety: Waker::Wake and WakeAt from any thread; Resume of one fiber
// by one thread at a time (a Host's ready queue hands each woken fiber to one
// thread).
#pragma once

#include "absl/functional/function_ref.h"
#include "absl/time/time.h"

#include <cstddef>
#include <functional>
#include <memory>

namespace runloom::fiber {

class Fiber;
struct WaitState;

// Where a woken fiber goes: the host queues it and one of its threads calls
// Resume on it.
class Host {
 public:
  virtual ~Host() = default;
  // Called from any thread, once per wake.
  virtual void Ready(Fiber* f) = 0;
};

// A fiber that runs `fn` when first resumed; woken fibers go to `host`. Its
// stack is kStackBytes of address space (pages are committed as they are
// touched) with a guard page below, taken from a pool of freed stacks.
Fiber* Create(std::function<void()> fn, Host* host);
// Runs `f` on the calling thread until it suspends or returns. True when it
// returned: the caller then calls Destroy(f).
bool Resume(Fiber* f);
void Destroy(Fiber* f);

// The address space of one fiber's stack.
inline constexpr size_t kStackBytes = size_t{1} << 20;

// True when the caller runs on a fiber.
bool OnFiber();

// Ends one wait of one fiber (or of one blocked thread). Copies share the
// wait: the first Wake ends it, later ones (and wakes of a wait already
// ended) do nothing, so a timer and a stop may race to wake the same wait.
class Waker {
 public:
  Waker() = default;
  // True when this call ended the wait (false: it had ended already).
  bool Wake() const;
  // True once the wait has ended (by any of its wakers).
  bool ended() const;

 private:
  friend void Suspend(absl::FunctionRef<void(const Waker&)> arm);
  explicit Waker(std::shared_ptr<WaitState> state) : state_(std::move(state)) {}
  std::shared_ptr<WaitState> state_;
};

// Waits until a Waker of this wait is woken. `arm` runs first, on the caller,
// and hands the waker to whatever will wake it (it may wake it at once). On a
// fiber the thread is given back meanwhile; off one, the thread blocks.
void Suspend(absl::FunctionRef<void(const Waker&)> arm);

// Wakes `w` at `when` on RealClock() (one timer thread for the process).
void WakeAt(absl::Time when, Waker w);

// Sleeps until `until` on RealClock(): suspends a fiber, blocks a thread.
void SleepUntil(absl::Time until);

// A region of a fiber in which waits that otherwise block the thread may
// suspend the fiber instead: a store's group commit (store/internal/
// group_leader.h), so an executor thread runs other runs while a run's write
// waits for its group. Whoever opens one vouches that it holds no lock there
// (an absl::Mutex must also be released on the thread that took it, and the
// fiber may resume on another): RunWriter::Write releases its own before the
// commit. A blocked thread needs no other fiber to run; a suspended fiber
// holding a lock that every executor thread then blocks on would never be
// resumed, so waits outside a region keep blocking.
// Nests; off a fiber it does nothing.
class SuspendableRegion {
 public:
  SuspendableRegion();
  ~SuspendableRegion();
  SuspendableRegion(const SuspendableRegion&) = delete;
  SuspendableRegion& operator=(const SuspendableRegion&) = delete;

 private:
  Fiber* const fiber_;
};

// True on a fiber inside a SuspendableRegion.
bool InSuspendableRegion();

}  // namespace runloom::fiber
