// Sweeper: a thread that, every sweep_interval, finds runs to recover
// (Store::FindRecoverable) and acts on them. A `running` run whose lease
// expired is enqueued again with run.lease_expired, or failed once it has
// used its attempt cap; a `queued` run with no live lease and no queue
// message is the reconciler's (reconciler.h). First, a `waiting` run whose
// timer is due by the store's clock (Store::FindDueTimers) is queued again
// (Party::kTimer, a fresh attempt budget, run.resumed "its timer is due").
// Due timers are also looked for on a thread of their own every
// kTimerPoll (or sweep_interval, when shorter): one index range scan, so a
// due timer starts again within a fraction of a second, not a whole sweep
// interval (issue 23: within 1 s, p99). It never runs a graph and never
// touches paused or terminal runs.
// Restart recovery (issue 27): given a holder check (set_holder_check), a
// sweep first ends the live leases whose holder the check proves dead
// (Store::ListLiveLeases, Store::ExpireLease), so the same sweep recovers
// them; Start() makes such a sweep at once, so a restarted worker takes
// back its dead predecessor's runs without waiting out their leases.
//
// Thread-safety: Start(), Stop() and SweepOnce() may be called from any
// thread (the thread is a PeriodicTask).
#pragma once

#include "runloom/clock.h"
#include "runloom/env.h"
#include "runloom/scheduler.h"
#include "runloom/store.h"
#include "runloom/trace.h"

#include "core/periodic_task.h"
#include "engine/observe/engine_metrics.h"
#include "engine/service/reconciler.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <algorithm>
#include <functional>
#include <utility>

namespace runloom::engine_internal {

class Sweeper {
 public:
  // Every pointer must outlive the sweeper. `on_failed` (may be empty) is
  // called with the run, as written, after the sweeper failed it at the
  // attempt cap (the engine publishes its stage event there).
  // `cancel_orphan` (may be empty) cancels a child run whose parent is
  // finished (Store::ListOrphanedChildren): the parent's cancel did not
  // reach it.
  // `scheduler` runs the commits that wake due timers side by side (so a
  // store's group commit takes them together).
  Sweeper(Store* store, Transport* transport, Clock* clock, Scheduler* scheduler,
          absl::Duration interval, absl::Duration queued_grace, Logger* logger,
          EngineMetrics* metrics, std::function<void(const RunRecord&)> on_failed = nullptr,
          std::function<absl::Status(const std::string&)> cancel_orphan = nullptr)
      : store_(store),
        clock_(clock),
        scheduler_(scheduler),
        on_failed_(std::move(on_failed)),
        cancel_orphan_(std::move(cancel_orphan)),
        interval_(interval),
        queued_grace_(queued_grace),
        logger_(logger),
        metrics_(metrics),
        reconciler_(store, transport, logger, metrics),
        timer_task_(clock, std::min(interval, kTimerPoll), [this] { TimerTick(); }),
        task_(clock, interval, [this] { Tick(); }) {}
  ~Sweeper() { Stop(); }
  // Where a takeover's span goes (runloom/trace.h); set before Start().
  void set_spans(SpanSink* spans) { spans_ = spans; }
  // Whether the holder of a lease, by its owner name, is provably dead
  // (engine/service/lease_holder.h); empty = leases end by expiry only. Set
  // before Start().
  void set_holder_check(std::function<bool(const std::string& owner)> is_dead) {
    holder_is_dead_ = std::move(is_dead);
  }
  Sweeper(const Sweeper&) = delete;
  Sweeper& operator=(const Sweeper&) = delete;

  // How often due timers are looked for between sweeps.
  static constexpr absl::Duration kTimerPoll = absl::Milliseconds(250);

  // Starts the threads (idempotent while running); with a holder check,
  // first a sweep on the caller's thread when a dead holder's lease was
  // ended (its failure logged).
  void Start();
  // Stops and joins them; Start() may follow.
  void Stop() {
    task_.Stop();
    timer_task_.Stop();
  }

  // One sweep now. Returns how many runs it acted on; a run it could not act
  // on is logged and left for the next sweep.
  absl::StatusOr<int> SweepOnce();

 private:
  // One period: a sweep, its failure logged.
  void Tick();
  // One period of the timer thread: the due timers, a failure logged.
  void TimerTick();
  // Queues the waiting runs whose timer is due; how many it queued.
  absl::StatusOr<int> WakeDueTimers();
  // Cancels the children whose parent is finished; how many it cancelled.
  int CancelOrphans();
  // Ends the live leases whose holder is provably dead; how many.
  int EndDeadHoldersLeases();
  // Queues one; false (logged) when the run moved on or the commit failed.
  bool WakeOne(const std::string& id);
  // The rule for a `running` run whose lease expired. Returns whether it
  // acted (false: the expiry was announced by an earlier sweep, and the
  // run's message was only made sure of).
  absl::StatusOr<bool> RecoverExpired(const RecoveryCandidate& c);
  // Whether `run`'s last event is already the run.lease_expired of
  // attempt `attempt` (written by an earlier sweep of any process).
  bool ExpiryAnnounced(const RunRecord& run, int attempt);

  // Constant after construction.
  Store* const store_;
  Clock* const clock_;
  Scheduler* const scheduler_;
  const std::function<void(const RunRecord&)> on_failed_;
  const std::function<absl::Status(const std::string&)> cancel_orphan_;
  const absl::Duration interval_;
  const absl::Duration queued_grace_;
  Logger* const logger_;
  SpanSink* spans_ = nullptr;  // set before Start(); read on the task's thread
  std::function<bool(const std::string&)> holder_is_dead_;  // likewise
  EngineMetrics* const metrics_;
  Reconciler reconciler_;
  PeriodicTask timer_task_;  // its thread uses the members above
  PeriodicTask task_;        // last: its thread uses the members above
};

}  // namespace runloom::engine_internal
