// StopSource: a tree of stop flags for one run's execution.
//
// The root is stopped when the run is cancelled, its lease is lost, or the
// engine shuts down; a parallel branch has a child that is also stopped when
// the branch passes its deadline. Stopping a node stops its subtree and runs
// the callbacks registered on it (e.g. "kill this subprocess group").
//
// Thread-safety: every method is thread-safe. All nodes of one tree share the
// root's mutex, so a waiter in Clock::AwaitWithDeadline on that mutex wakes
// when any ancestor is stopped.
#pragma once

#include "runloom/clock.h"
#include "runloom/mutex.h"

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

#include <functional>
#include <map>
#include <memory>
#include <vector>

namespace runloom::engine_internal {

// kBudget: a model call of the run could not reserve its worst case (the
// run ends budget_stopped).
enum class StopReason { kNone, kCancel, kLeaseLost, kShutdown, kDeadline, kBudget };

class StopSource {
 public:
  // A root.
  StopSource();
  // A child of `parent`, which must outlive it.
  explicit StopSource(StopSource* parent);
  ~StopSource();
  StopSource(const StopSource&) = delete;
  StopSource& operator=(const StopSource&) = delete;

  // Stops this node and its subtree; the first reason sticks. Runs callbacks
  // outside the lock.
  void RequestStop(StopReason reason);
  bool stopped() const;
  // This node's reason, or the nearest stopped ancestor's.
  StopReason reason() const;

  // Registers `fn` to run when this node stops (at once if it already has).
  // Returns an id for RemoveCallback.
  int AddCallback(std::function<void()> fn);
  void RemoveCallback(int id);

  // Waits until stopped or `deadline`; returns true when it was stopped.
  bool WaitUntil(Clock* clock, absl::Time deadline);

 private:
  bool StoppedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);
  void CollectLocked(std::vector<std::function<void()>>* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);

  // Constant after construction.
  StopSource* const parent_;
  std::shared_ptr<runloom::Mutex> mu_;  // the root's

  StopReason reason_ ABSL_GUARDED_BY(*mu_) = StopReason::kNone;
  std::vector<StopSource*> children_ ABSL_GUARDED_BY(*mu_);
  std::map<int, std::function<void()>> callbacks_ ABSL_GUARDED_BY(*mu_);
  int next_id_ ABSL_GUARDED_BY(*mu_) = 0;
};

}  // namespace runloom::engine_internal
