// Mutex, MutexLock, CondVar and Notification: the synchronisation types every
// runloom module uses, and the Mutex that Clock::AwaitWithDeadline takes.
// Conditions stay absl::Condition in both flavours below (it holds a predicate
// and no synchronisation, so TSan needs no stand-in for it; and
// runloom::Condition is the workflow's `when:` condition).
//
// In normal builds they are exactly Abseil's types (type aliases: no cost, the
// same API and ABI; an embedder's absl::Mutex can be passed wherever a
// runloom::Mutex is asked for).
//
// In ThreadSanitizer builds (RUNLOOM_TSAN, set by the `Tsan` CMake build type)
// they are small classes with the API subset runloom uses, built on std::mutex and
// std::condition_variable. Why: Debian's Abseil is not built with TSan, so TSan
// cannot see absl::Mutex's happens-before edges (they are futexes and atomics in
// uninstrumented code) and would report races on every field a Mutex guards;
// pthread locks and condition variables are intercepted by TSan wherever they
// are called. The RUNLOOM_TSAN classes are slower (every Unlock wakes all
// Await()ers, as a plain condition variable must) and are for tests only.
//
// Both flavours carry Abseil's thread-safety annotations (ABSL_LOCKABLE,
// ABSL_SCOPED_LOCKABLE, ...), so clang's -Wthread-safety checks code the same
// way against either.
//
// A library built with RUNLOOM_TSAN and code built without it do not link
// together (runloom::Mutex names a different type): define RUNLOOM_TSAN for
// both or for neither.
//
// Thread-safety: these are the synchronisation primitives; every method may be
// called from any thread, with the lock preconditions Abseil documents.
//
// Example:
//   runloom::Mutex mu_;
//   bool ready_ ABSL_GUARDED_BY(mu_) = false;
//   ...
//   runloom::MutexLock l(&mu_);
//   mu_.Await(absl::Condition(&ready_));
#pragma once

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

#ifdef RUNLOOM_TSAN
#include <chrono>
#include <condition_variable>
#include <mutex>
#endif

namespace runloom {

#ifndef RUNLOOM_TSAN

using Mutex = absl::Mutex;
using MutexLock = absl::MutexLock;
using ReaderMutexLock = absl::ReaderMutexLock;
using CondVar = absl::CondVar;
using Notification = absl::Notification;

#else  // RUNLOOM_TSAN

namespace mutex_internal {
// Waits longer than this are treated as "forever": std::chrono arithmetic on
// huge durations overflows.
inline constexpr absl::Duration kLongestWait = absl::Hours(24 * 365);
}  // namespace mutex_internal

class CondVar;

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  // Wakes Await()ers while still holding the lock, so that nothing touches
  // *this after the unlock (the Mutex may be destroyed by the thread woken).
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    WakeAwaitersLocked();
    mu_.unlock();
  }
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

  // REQUIRES: held. Releases the lock until `cond` holds; holds it on return.
  void Await(const absl::Condition& cond) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    WakeAwaitersLocked();
    ++awaiters_;
    changed_.wait(lock, [&cond] { return cond.Eval(); });
    --awaiters_;
    lock.release();
  }
  // As Await, but gives up after `timeout`. Returns the final value of `cond`.
  bool AwaitWithTimeout(const absl::Condition& cond, absl::Duration timeout) {
    if (timeout >= mutex_internal::kLongestWait) {
      Await(cond);
      return true;
    }
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    WakeAwaitersLocked();
    ++awaiters_;
    const bool ok = changed_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                                      [&cond] { return cond.Eval(); });
    --awaiters_;
    lock.release();
    return ok;
  }
  // As Await, but gives up at `deadline` (of the real clock).
  bool AwaitWithDeadline(const absl::Condition& cond, absl::Time deadline) {
    if (deadline == absl::InfiniteFuture()) {
      Await(cond);
      return true;
    }
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    WakeAwaitersLocked();
    ++awaiters_;
    const bool ok =
        changed_.wait_until(lock, absl::ToChronoTime(deadline), [&cond] { return cond.Eval(); });
    --awaiters_;
    lock.release();
    return ok;
  }

 private:
  friend class CondVar;

  // Any release of the lock may follow a change that makes an Await()er's
  // condition true, so every release wakes them all to re-check.
  void WakeAwaitersLocked() {
    if (awaiters_ > 0) changed_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable changed_;  // Await()ers wait here
  int awaiters_ = 0;                 // guarded by mu_
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }

 private:
  Mutex* const mu_;
};

// A shared lock in name: the stand-in Mutex has no shared mode, so readers
// take it exclusively (slower under contention, the same correctness).
class ABSL_SCOPED_LOCKABLE ReaderMutexLock {
 public:
  explicit ReaderMutexLock(Mutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;
  ~ReaderMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }

 private:
  Mutex* const mu_;
};

class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // REQUIRES: `mu` held. Releases it while waiting; holds it on return.
  void Wait(Mutex* mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    mu->WakeAwaitersLocked();
    cv_.wait(lock);
    lock.release();
  }
  // Returns true if the timeout passed (Abseil's convention).
  bool WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
    if (timeout >= mutex_internal::kLongestWait) {
      Wait(mu);
      return false;
    }
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    mu->WakeAwaitersLocked();
    const bool timed_out =
        cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout)) == std::cv_status::timeout;
    lock.release();
    return timed_out;
  }
  bool WaitWithDeadline(Mutex* mu, absl::Time deadline) {
    if (deadline == absl::InfiniteFuture()) {
      Wait(mu);
      return false;
    }
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    mu->WakeAwaitersLocked();
    const bool timed_out =
        cv_.wait_until(lock, absl::ToChronoTime(deadline)) == std::cv_status::timeout;
    lock.release();
    return timed_out;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

class Notification {
 public:
  Notification() = default;
  Notification(const Notification&) = delete;
  Notification& operator=(const Notification&) = delete;

  void Notify() {
    MutexLock l(&mu_);
    notified_ = true;
  }
  bool HasBeenNotified() const {
    MutexLock l(&mu_);
    return notified_;
  }
  void WaitForNotification() const {
    MutexLock l(&mu_);
    mu_.Await(absl::Condition(&notified_));
  }
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const {
    MutexLock l(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&notified_), timeout);
  }
  bool WaitForNotificationWithDeadline(absl::Time deadline) const {
    MutexLock l(&mu_);
    return mu_.AwaitWithDeadline(absl::Condition(&notified_), deadline);
  }

 private:
  mutable Mutex mu_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

#endif  // RUNLOOM_TSAN

}  // namespace runloom
