#include "engine/service/watches.h"

#include "runloom/mutex.h"

#include "core/status_macros.h"

#include "absl/strings/str_cat.h"

#include <algorithm>

namespace runloom::engine_internal {

namespace {

// A flag the bus sets; the waiter clears it after each wake-up.
class Wakeup {
 public:
  // Subscribes to `run_id` ("" = every run).
  Wakeup(EventBus* bus, const std::string& run_id) {
    sub_ = bus->Subscribe(run_id, [this](const RunChange&) {
      MutexLock l(&mu_);
      changed_ = true;
    });
  }
  ~Wakeup() { sub_.reset(); }  // before mu_ goes: the callback uses it

  // Waits until a change was published, `deadline`, or kRecheck (the most a
  // missed notification may delay a waiter: it reads the store again).
  void Wait(Clock* clock, absl::Time deadline) {
    constexpr absl::Duration kRecheck = absl::Seconds(1);
    MutexLock l(&mu_);
    clock->AwaitWithDeadline(&mu_, absl::Condition(&changed_),
                             std::min(deadline, clock->Now() + kRecheck));
    changed_ = false;
  }

 private:
  Mutex mu_;
  bool changed_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<Subscription> sub_;
};

}  // namespace

absl::StatusOr<std::vector<Event>> Watches::WatchEvents(const std::string& run_id,
                                                        int64_t after_seq, absl::Time deadline,
                                                        int limit) {
  Wakeup wake(bus_, run_id);
  RUNLOOM_RETURN_IF_ERROR(store_->GetRun(run_id).status());
  while (true) {
    RUNLOOM_ASSIGN_OR_RETURN(std::vector<Event> events,
                             store_->ListEvents(run_id, after_seq, limit));
    if (!events.empty()) return events;
    if (clock_->Now() >= deadline) return events;
    wake.Wait(clock_, deadline);
  }
}

absl::StatusOr<RunRecord> Watches::AwaitRun(const std::string& run_id, absl::Time deadline) {
  Wakeup wake(bus_, run_id);
  while (true) {
    RUNLOOM_ASSIGN_OR_RETURN(RunRecord run, store_->GetRun(run_id));
    if (IsTerminal(run.status) || run.status == RunStatus::kPaused) return run;
    if (clock_->Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("run ", run_id, " is still ", std::string(ToString(run.status))));
    }
    wake.Wait(clock_, deadline);
  }
}

std::unique_ptr<Subscription> Watches::WatchRuns(std::function<void(const RunChange&)> on_change) {
  return bus_->Subscribe("", std::move(on_change));
}

absl::Status Watches::AwaitIdle(absl::Time deadline) {
  // An executor lets go of a run just after the commit that ends its hold,
  // so that commit's wake-up may find it still held; no later commit comes
  // to say it let go. Only in that window do we look again after kHandoff.
  constexpr absl::Duration kHandoff = absl::Milliseconds(20);
  Wakeup wake(bus_, "");
  while (true) {
    // Queued, running, or waiting with a wake time (its timer queues it by
    // itself), in one snapshot: a run the timer queues, or one that parks,
    // between two reads of one status each was missed (a worker exited with
    // a run just woken). One waiting for a signal with no timeout waits for
    // someone outside, as a paused run does: it is no work to come.
    RUNLOOM_ASSIGN_OR_RETURN(const bool stored_busy, store_->HasWorkToCome());
    bool held = active_runs_() > 0;
    if (!stored_busy && !held) return absl::OkStatus();
    absl::Time now = clock_->Now();
    if (now >= deadline) return absl::DeadlineExceededError("runs are still queued or running");
    absl::Time until = stored_busy ? deadline : std::min(deadline, now + kHandoff);
    wake.Wait(clock_, until);
  }
}

}  // namespace runloom::engine_internal
