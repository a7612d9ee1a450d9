#include "engine/run/stop.h"

#include "core/fiber.h"

#include <algorithm>

namespace runloom::engine_internal {

StopSource::StopSource() : parent_(nullptr), mu_(std::make_shared<runloom::Mutex>()) {}

StopSource::StopSource(StopSource* parent) : parent_(parent), mu_(parent->mu_) {
  runloom::MutexLock l(mu_.get());
  parent_->children_.push_back(this);
}

StopSource::~StopSource() {
  if (parent_ == nullptr) return;
  runloom::MutexLock l(mu_.get());
  auto& siblings = parent_->children_;
  siblings.erase(std::remove(siblings.begin(), siblings.end(), this), siblings.end());
}

// Every node of a tree shares the root's mutex (mu_ is copied from the
// parent), which the thread-safety analysis cannot know: AssertHeld tells it
// that holding *mu_ is holding the other nodes' *mu_.
bool StopSource::StoppedLocked() const {
  for (const StopSource* s = this; s != nullptr; s = s->parent_) {
    s->mu_->AssertHeld();
    if (s->reason_ != StopReason::kNone) return true;
  }
  return false;
}

void StopSource::CollectLocked(std::vector<std::function<void()>>* out) {
  for (auto& [id, fn] : callbacks_) out->push_back(fn);
  callbacks_.clear();
  for (StopSource* c : children_) {
    c->mu_->AssertHeld();  // the same mutex (see StoppedLocked)
    c->CollectLocked(out);
  }
}

void StopSource::RequestStop(StopReason reason) {
  std::vector<std::function<void()>> fns;
  {
    runloom::MutexLock l(mu_.get());
    if (reason_ == StopReason::kNone) reason_ = reason;
    CollectLocked(&fns);
  }
  for (auto& fn : fns) fn();
}

bool StopSource::stopped() const {
  runloom::MutexLock l(mu_.get());
  return StoppedLocked();
}

StopReason StopSource::reason() const {
  runloom::MutexLock l(mu_.get());
  for (const StopSource* s = this; s != nullptr; s = s->parent_) {
    s->mu_->AssertHeld();  // the same mutex (see StoppedLocked)
    if (s->reason_ != StopReason::kNone) return s->reason_;
  }
  return StopReason::kNone;
}

int StopSource::AddCallback(std::function<void()> fn) {
  {
    runloom::MutexLock l(mu_.get());
    if (!StoppedLocked()) {
      int id = next_id_++;
      callbacks_.emplace(id, std::move(fn));
      return id;
    }
  }
  fn();
  return -1;
}

void StopSource::RemoveCallback(int id) {
  runloom::MutexLock l(mu_.get());
  callbacks_.erase(id);
}

bool StopSource::WaitUntil(Clock* clock, absl::Time deadline) {
  if (clock == RealClock() && fiber::OnFiber()) {
    // A fiber gives its thread back: woken by the stop or at the deadline,
    // whichever comes first (the other's wake does nothing).
    int id = -1;
    fiber::Suspend([&](const fiber::Waker& w) {
      id = AddCallback([w] { w.Wake(); });
      if (deadline != absl::InfiniteFuture()) fiber::WakeAt(deadline, w);
    });
    if (id >= 0) RemoveCallback(id);
    return stopped();
  }
  runloom::MutexLock l(mu_.get());
  auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_) { return StoppedLocked(); };
  return clock->AwaitWithDeadline(mu_.get(), absl::Condition(&stopped), deadline);
}

}  // namespace runloom::engine_internal
