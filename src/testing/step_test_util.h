// Test helpers for step kinds: a StepContext driven by the test.
// TESTONLY: included by *_test.cc files only.
#pragma once

#include "runloom/clock.h"
#include "runloom/mutex.h"
#include "runloom/run.h"
#include "runloom/step.h"
#include "runloom/workflow.h"

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace runloom::steps_testing {

// A StepContext whose stop flag, attempt and deadline the test controls.
// Stop() runs the OnStop callback on the calling thread; tests call it from a
// thread other than the one running the step.
class TestStepContext final : public StepContext {
 public:
  explicit TestStepContext(Clock* clock, std::string working_dir = "")
      : clock_(clock), working_dir_(std::move(working_dir)) {}

  const std::string& run_id() const override { return run_id_; }
  const std::string& step_path() const override { return step_path_; }
  int attempt() const override { return attempt_; }
  const std::string& working_dir() const override { return working_dir_; }
  Clock* clock() override { return clock_; }
  absl::Time deadline() const override { return deadline_; }

  bool Stopping() override {
    runloom::MutexLock l(&mu_);
    return stopping_;
  }

  bool SleepUntil(absl::Time until) override {
    runloom::MutexLock l(&mu_);
    sleeping_until_ = until;
    const bool stopped = clock_->AwaitWithDeadline(&mu_, absl::Condition(&stopping_), until);
    sleeping_until_.reset();
    return !stopped;
  }

  void OnStop(std::function<void()> fn) override {
    runloom::MutexLock l(&mu_);
    on_stop_ = std::move(fn);
    if (on_stop_) {
      ++on_stop_registrations_;
    }
  }

  void RecordEvent(Event event) override {
    runloom::MutexLock l(&mu_);
    events_.push_back(std::move(event));
  }
  // The events recorded so far, in order.
  std::vector<Event> events() {
    runloom::MutexLock l(&mu_);
    return events_;
  }

  void set_attempt(int attempt) { attempt_ = attempt; }
  void set_deadline(absl::Time deadline) { deadline_ = deadline; }

  void Stop() {
    std::function<void()> fn;
    {
      runloom::MutexLock l(&mu_);
      stopping_ = true;
      fn = on_stop_;
    }
    if (fn) {
      fn();
    }
  }

  // Blocks until the step is inside SleepUntil; returns the time it sleeps to.
  absl::Time AwaitSleeping() {
    runloom::MutexLock l(&mu_);
    auto sleeping = [this]()
                        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return sleeping_until_.has_value(); };
    mu_.Await(absl::Condition(&sleeping));
    return *sleeping_until_;
  }

  // Blocks until a stop callback has been registered (exec: the child runs).
  void AwaitOnStopRegistered() {
    runloom::MutexLock l(&mu_);
    auto registered = [this]()
                          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return on_stop_registrations_ > 0; };
    mu_.Await(absl::Condition(&registered));
  }

  bool has_on_stop() {
    runloom::MutexLock l(&mu_);
    return static_cast<bool>(on_stop_);
  }

 private:
  Clock* const clock_;
  const std::string working_dir_;
  const std::string run_id_ = "r_test";
  const std::string step_path_ = "step";
  // Set by the test before Execute.
  int attempt_ = 1;
  absl::Time deadline_ = absl::InfiniteFuture();

  runloom::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> on_stop_ ABSL_GUARDED_BY(mu_);
  int on_stop_registrations_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<absl::Time> sleeping_until_ ABSL_GUARDED_BY(mu_);
  std::vector<Event> events_ ABSL_GUARDED_BY(mu_);
};

inline StepDef MakeDef(const std::string& kind, nlohmann::json config) {
  StepDef def;
  // A std::string, moved in: assigning the literal trips GCC 12's false
  // -Wrestrict on std::string::_M_replace at -O3 (GCC PR 105651).
  def.id = std::string("s");
  def.kind = kind;
  def.config = std::move(config);
  return def;
}

}  // namespace runloom::steps_testing
