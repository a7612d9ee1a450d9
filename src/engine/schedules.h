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
// Declared schedules (a workflow file's `schedules:`, DeclaredSchedules):
// the stored schedules with ids "workflow:<name>:<entry>" follow the
// catalog's latest version of workflow <name>. Why the latest version, and
// why deleted rather than paused when an entry goes, is argued at
// DeclaredSchedules below.
//
// Thread-safety: thread-safe (the store calls are, Abseil caches the zones
// it loads, and DeclaredSchedules' memo has its own mutex).
#pragma once

#include "runloom/clock.h"
#include "runloom/engine.h"
#include "runloom/env.h"
#include "runloom/mutex.h"
#include "runloom/store.h"

#include "core/periodic_task.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <functional>
#include <map>
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

// Keeps the stored schedules of a workflow's `schedules:` in step with the
// catalog. Admission calls Sync after each registration of a workflow
// version (`runloom run FILE`, POST /api/v1/workflows, Engine::
// RegisterWorkflow), in whichever process registers it.
//
// The rule: the declared schedules stored for workflow W are those of W's
// latest catalog version, one per entry, with the id DeclaredScheduleId(W,
// entry name). Why the latest version, not the file just registered: runs
// a schedule starts use W's latest version anyway, and a process that runs
// an older file (registering an old digest returns the old version; it does
// not become the latest) must not turn the schedules back. Since
// `schedules:` is in the canonical form, the catalog's latest version says
// exactly which schedules W declares, so any process can apply it, and
// applying it twice writes nothing the second time.
//
// Applying a version, against the stored schedules read at that moment:
//   - an entry with no stored schedule is created (PutSchedule without
//     replace: when several processes register the file at once, one
//     creates it and the others get kAlreadyExists, read it back, find the
//     same definition and write nothing; so one schedule, and the firer's
//     compare-and-set fires each tick once);
//   - an entry whose stored definition (cron, timezone, inputs, overlap,
//     catch_up) differs is replaced, keeping its paused flag (an operator's
//     pause outlives a file change) and, when cron and zone are unchanged,
//     its next tick;
//   - a stored declared schedule of W that the version no longer lists is
//     deleted (the runs it started are left as they are). Deleted, not
//     paused: the file is the definition, and a paused leftover would sit
//     in every list with nothing to resume it for; to stop a declared
//     schedule for a while, pause it (kept across registrations).
// A process that applied version v then reads the latest version again and
// applies that if it changed meanwhile (at most kMaxDeclaredSyncRounds
// times), so a slow process applying an older version after a newer one
// was registered and applied is corrected by itself.
//
// Memo: each process remembers the latest version it applied per workflow
// and skips the work while that is still the latest (a run of `runloom run
// FILE` costs one catalog read, not a scan of the schedules). So a declared
// schedule deleted through the CLI or API comes back when a process
// registers the workflow without having applied this version before (a
// restarted `runloom run`, another server), or at the next version.
class DeclaredSchedules {
 public:
  // Rounds of re-reading the latest version before Sync gives up (kAborted).
  static constexpr int kMaxDeclaredSyncRounds = 4;

  // `store` must outlive this object. The latest version is read from the
  // catalog itself, not through the engine's PinnedCatalog: a definition
  // cached there is trusted by the runs created after it was read, and this
  // read must not open that window (it does not verify what runs pin).
  explicit DeclaredSchedules(Store* store) : store_(store) {}
  DeclaredSchedules(const DeclaredSchedules&) = delete;
  DeclaredSchedules& operator=(const DeclaredSchedules&) = delete;

  // Makes the declared schedules of workflow `name` those of its latest
  // catalog version (see above). The store's errors; kInvalidArgument
  // naming the schedule when an entry is refused here (a time zone this
  // machine does not know); kAborted when the latest version kept changing.
  absl::Status Sync(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // One application of `wf`'s schedules (the latest version, as read).
  absl::Status Apply(const Workflow& wf);
  // Writes `want` over `stored` (nullopt: none read): see the rule above.
  absl::Status Upsert(ScheduleRecord want, std::optional<ScheduleRecord> stored);

  // Constant after construction.
  Store* const store_;

  runloom::Mutex mu_;
  // Workflow name -> digest of the latest version this process applied.
  std::map<std::string, std::string> applied_ ABSL_GUARDED_BY(mu_);
};

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
