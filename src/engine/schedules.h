// Schedules (issue 23): the checks of a new schedule, and the firer that
// starts the run of each due tick.
//
// A tick fires once however many processes fire schedules (every `serve`
// and `worker`): the run it starts has the idempotency key
// "schedule:<id>:<tick in unix seconds>", so two processes starting it get
// one run, and the store's compare-and-set on the schedule's next tick
// (ScheduleStore::AdvanceSchedule) moves it on once. A process that dies
// between the two leaves the tick due; the next firing starts the same run
// (its key) and moves it on.
//
// A pass, for each due schedule (ScheduleStore::FindDueSchedules):
//   1. The ticks due now: its next tick and those after it up to the
//      store's now. The catch-up policy picks which fire: `latest` the last
//      of them, `all` each (at most kMaxCatchUpTicks a pass; older ones are
//      skipped), `none` only a tick whose successor is not due yet (a tick
//      missed while nothing fired is skipped).
//   2. For each tick that fires, the overlap policy looks at the schedule's
//      last run: unfinished, `skip` starts nothing, `allow` starts the run,
//      `cancel` cancels the last run (party cancel, by "schedule:<id>") and
//      starts the run.
//   3. AdvanceSchedule from the stored tick to the first tick after the
//      last one handled; false means another process fired it first.
//
// Thread-safety: thread-safe (the store calls are, and Abseil caches the
// zones it loads).
#pragma once

#include "runloom/clock.h"
#include "runloom/engine.h"
#include "runloom/env.h"
#include "runloom/store.h"

#include "core/periodic_task.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <functional>
#include <string>
#include <utility>

namespace runloom::engine_internal {

// Most ticks one schedule fires in a pass with catch_up `all`.
inline constexpr int kMaxCatchUpTicks = 100;

// The schedule `request` describes, checked: its id, cron expression, time
// zone, policies and inputs against the latest version of its workflow
// (`workflow`, nullptr = not in the catalog). kInvalidArgument naming the
// field; kNotFound when the workflow is not in the catalog. Its next tick is
// the first after `now`.
absl::StatusOr<ScheduleRecord> CheckedSchedule(const ScheduleRequest& request,
                                               const Workflow* workflow, absl::Time now);

// The first tick of `s` after `after` (its cron expression in its zone).
absl::StatusOr<absl::Time> NextTick(const ScheduleRecord& s, absl::Time after);

class ScheduleFirer {
 public:
  // What firing a tick needs of the engine.
  struct Hooks {
    std::function<absl::StatusOr<CreateRunResult>(const StartRunRequest&)> start_run;
    std::function<absl::Status(const std::string& run_id, const std::string& by)> cancel_run;
  };
  // Every pointer must outlive the firer.
  ScheduleFirer(Store* store, Clock* clock, Logger* logger, absl::Duration poll, Hooks hooks)
      : store_(store),
        logger_(logger),
        hooks_(std::move(hooks)),
        task_(clock, poll, [this] { Tick(); }) {}
  ScheduleFirer(const ScheduleFirer&) = delete;
  ScheduleFirer& operator=(const ScheduleFirer&) = delete;

  void Start() { task_.Start(); }
  void Stop() { task_.Stop(); }

  // One pass now. Returns how many runs it started.
  absl::StatusOr<int> FireOnce();

 private:
  void Tick();
  // Fires the due ticks of `s` at the store's time `now`: the runs started.
  absl::StatusOr<int> Fire(const ScheduleRecord& s, absl::Time now);

  Store* const store_;
  Logger* const logger_;
  const Hooks hooks_;
  PeriodicTask task_;
};

}  // namespace runloom::engine_internal
