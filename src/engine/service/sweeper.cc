#include "engine/service/sweeper.h"

#include "core/injected_bug.h"
#include "core/log.h"
#include "core/status_macros.h"
#include "engine/observe/run_spans.h"
#include "engine/run/event_helpers.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <vector>

namespace runloom::engine_internal {
namespace {

// Candidates looked at per sweep.
constexpr int kSweepLimit = 1000;

}  // namespace

void Sweeper::Start() {
  if (holder_is_dead_ && EndDeadHoldersLeases() > 0) Tick();
  timer_task_.Start();
  task_.Start();
}

int Sweeper::EndDeadHoldersLeases() {
  if (!holder_is_dead_) return 0;
  absl::StatusOr<std::vector<LiveLease>> live = store_->ListLiveLeases(kSweepLimit);
  if (!live.ok()) {
    Log(logger_, LogLevel::kWarning,
        "sweeper: listing live leases failed: ", live.status().ToString());
    return 0;
  }
  int ended = 0;
  for (const LiveLease& lease : *live) {
    const bool unchecked = RUNLOOM_INJECTED_BUG(InjectedBug::kLeasesEndedUnchecked);
    if (!unchecked && (lease.owner.empty() || !holder_is_dead_(lease.owner))) continue;
    const absl::Status s = store_->ExpireLease(lease.run_id, lease.token);
    const LogFields fields{.run_id = lease.run_id, .worker = lease.owner};
    if (s.ok()) {
      ++ended;
      Log(logger_, LogLevel::kInfo, fields, "run ", lease.run_id, ": the process that held its lease (",
          lease.owner, ") is gone; its lease ends now instead of at ",
          absl::FormatTime(lease.expires_at));
    } else {
      // kAborted: renewed by a holder that is not dead after all (cannot
      // be: its token would match), taken by another, or finished.
      Log(logger_, s.code() == absl::StatusCode::kAborted ? LogLevel::kDebug : LogLevel::kWarning,
          fields, "run ", lease.run_id, ": could not end the lease of ", lease.owner, ": ",
          s.ToString());
    }
  }
  return ended;
}

void Sweeper::Tick() {
  absl::StatusOr<int> swept = SweepOnce();
  if (!swept.ok()) {
    Log(logger_, LogLevel::kWarning, "sweeper: sweep failed (next one in ",
        absl::FormatDuration(interval_), "): ", swept.status().ToString());
  }
}

void Sweeper::TimerTick() {
  absl::StatusOr<int> woken = WakeDueTimers();
  if (!woken.ok()) {
    Log(logger_, LogLevel::kWarning, "sweeper: waking due timers failed (next try in ",
        absl::FormatDuration(std::min(interval_, kTimerPoll)), "): ", woken.status().ToString());
  }
}

absl::StatusOr<int> Sweeper::WakeDueTimers() {
  RUNLOOM_ASSIGN_OR_RETURN(std::vector<std::string> due, store_->FindDueTimers(kSweepLimit));
  // One commit per run, kWakers at a time: one after another, each waited
  // for alone, they woke about 1,000 runs a second on SQLite, and timers
  // due faster than that fell behind (docs/performance.md).
  constexpr size_t kWakers = 8;
  std::atomic<int> woken{0};
  std::vector<std::function<void()>> tasks;
  for (size_t w = 0; w < std::min(kWakers, due.size()); ++w) {
    tasks.push_back([this, &due, &woken, w] {
      for (size_t i = w; i < due.size(); i += kWakers) {
        if (WakeOne(due[i])) ++woken;
      }
    });
  }
  if (!tasks.empty()) scheduler_->RunAll(tasks, clock_, absl::InfiniteFuture(), [](size_t) {});
  return woken.load();
}

bool Sweeper::WakeOne(const std::string& id) {
  // What FindDueTimers read may be stale: since then the run may have been
  // woken, executed and parked again at a later time (the same status,
  // waiting). The store checks the wake time against its clock in the
  // commit itself (a Party::kTimer write of a run whose wake time has not
  // come is refused), so nothing is read again here.
  RunWrite w;
  w.run_id = id;
  w.party = Party::kTimer;
  w.expected = {RunStatus::kWaiting};
  w.new_status = RunStatus::kQueued;
  w.reset_attempts = true;  // the wait was no failed attempt
  w.entry = RunEntry::kResume;
  w.events.push_back(RunResumedEvent(id, {.reason = "its timer is due"}));
  absl::Status s = store_->Commit(w);
  if (s.ok()) return true;
  // kAborted: cancelled, rerun, woken by another sweeper, or parked again
  // at a later time since the query.
  Log(logger_, s.code() == absl::StatusCode::kAborted ? LogLevel::kDebug : LogLevel::kWarning,
      {.run_id = id}, "run ", id, ": the sweeper could not queue it at its timer: ", s.ToString());
  return false;
}

int Sweeper::CancelOrphans() {
  if (!cancel_orphan_) return 0;
  absl::StatusOr<std::vector<std::string>> orphans = store_->ListOrphanedChildren(kSweepLimit);
  if (!orphans.ok()) {
    Log(logger_, LogLevel::kWarning,
        "sweeper: looking for children of finished runs failed: ", orphans.status().ToString());
    return 0;
  }
  int cancelled = 0;
  for (const std::string& id : *orphans) {
    absl::Status s = cancel_orphan_(id);
    if (s.ok()) {
      ++cancelled;
    } else {
      // kFailedPrecondition / kAborted: it finished or moved on meanwhile.
      Log(logger_, LogLevel::kDebug, {.run_id = id}, "run ", id,
          ": cancelling it (its parent is finished): ", s.ToString());
    }
  }
  return cancelled;
}

absl::StatusOr<int> Sweeper::SweepOnce() {
  int acted = CancelOrphans();
  EndDeadHoldersLeases();  // recovered below, as expired
  absl::StatusOr<int> woken = WakeDueTimers();
  if (woken.ok()) {
    acted += *woken;
  } else {
    Log(logger_, LogLevel::kWarning,
        "sweeper: waking due timers failed: ", woken.status().ToString());
  }
  RUNLOOM_ASSIGN_OR_RETURN(std::vector<RecoveryCandidate> cands,
                           store_->FindRecoverable(queued_grace_, kSweepLimit));
  std::vector<RecoveryCandidate> queued;
  for (const RecoveryCandidate& c : cands) {
    if (Reconciler::Owns(c)) {
      queued.push_back(c);
      continue;
    }
    absl::StatusOr<bool> r = RecoverExpired(c);
    if (r.ok()) {
      if (*r) ++acted;
    } else {
      const absl::Status& s = r.status();
      // kAborted: the run moved on (renewed, paused, finished) since the
      // query; the store refuses to enqueue a paused or finished one.
      Log(logger_, s.code() == absl::StatusCode::kAborted ? LogLevel::kDebug : LogLevel::kWarning,
          {.run_id = c.run_id, .attempt = c.attempts}, "run ", c.run_id,
          ": sweeper could not recover its expired lease: ", s.ToString());
    }
  }
  absl::StatusOr<int> reconciled = reconciler_.Reconcile(queued);
  if (reconciled.ok()) {
    acted += *reconciled;
  } else {
    Log(logger_, LogLevel::kWarning, "sweeper: reconciling ", queued.size(),
        " queued runs failed: ", reconciled.status().ToString());
  }
  return acted;
}

bool Sweeper::ExpiryAnnounced(const RunRecord& run, int attempt) {
  if (run.last_event_seq < 1) return false;
  absl::StatusOr<std::vector<Event>> last = store_->ListEvents(run.id, run.last_event_seq - 1, 1);
  if (!last.ok() || last->empty()) return false;  // announce (again): at worst a repeat
  const Event& e = last->front();
  return e.type == event_types::kRunLeaseExpired && e.data.is_object() &&
         e.data.value("attempt", -1) == attempt;
}

absl::StatusOr<bool> Sweeper::RecoverExpired(const RecoveryCandidate& c) {
  std::string owner = "unknown";
  auto run = store_->GetRun(c.run_id);
  if (run.ok() && !run->lease_owner.empty()) owner = run->lease_owner;
  if (!run.ok()) {
    Log(logger_, LogLevel::kWarning, {.run_id = c.run_id, .attempt = c.attempts}, "run ", c.run_id,
        ": sweeper could not read the expired lease's owner: ", run.status().ToString());
  }
  // The dead executor's budget reservations are released, charged at their
  // amounts, before anyone else executes the run (its lease expired, so it
  // can reserve no more; a call of it that still finishes settles its real
  // cost in place of the charge).
  int64_t released = 0;
  if (!RUNLOOM_INJECTED_BUG(InjectedBug::kReservationKeptOnTakeover)) {
    RUNLOOM_ASSIGN_OR_RETURN(released, store_->ReleaseReservations(c.run_id));
  }
  // The lines about the expired lease name its attempt and its holder.
  const LogFields expired{.run_id = c.run_id, .attempt = c.attempts, .worker = owner};
  if (released > 0) {
    Log(logger_, LogLevel::kInfo, expired, "run ", c.run_id, ": released ", released,
        " budget reservation(s) of the expired lease of ", owner);
  }
  if (c.attempts >= c.max_attempts) {
    RunWrite w;
    w.run_id = c.run_id;
    w.party = Party::kSweeper;
    w.expected = {RunStatus::kRunning};
    w.lease_token = c.lease_token;
    w.new_status = RunStatus::kFailed;
    w.outcome = "failed";
    w.error = absl::StrCat("attempt cap reached: ", c.attempts, " leases expired");
    w.events = {RunLeaseExpiredEvent(c.run_id, {.attempt = c.attempts, .lease_owner = owner}),
                events::RunFinished(c.run_id, RunStatus::kFailed, "failed", *w.error)};
    RUNLOOM_RETURN_IF_ERROR(store_->Commit(w));
    Log(logger_, LogLevel::kInfo, expired, "run ", c.run_id, ": the lease of ", owner,
        " expired at the attempt cap (", c.attempts, " of ", c.max_attempts, "); run failed");
    metrics_->LeaseExpired();
    metrics_->Swept(SweepAction::kFailed);
    metrics_->RunFinished(RunStatus::kFailed);
    if (on_failed_ && run.ok()) {
      run->status = RunStatus::kFailed;
      run->error = *w.error;
      on_failed_(*run);
    }
    return true;
  }
  // Once per expiry: while the run waits for an executor, later sweeps only
  // make sure its message exists (one lost meanwhile, e.g. with a Redis
  // restart, is written anew), with no second run.lease_expired.
  if (run.ok() && ExpiryAnnounced(*run, c.attempts)) {
    RUNLOOM_RETURN_IF_ERROR(store_->Enqueue(c.run_id, {}));
    return false;
  }
  RUNLOOM_RETURN_IF_ERROR(store_->Enqueue(
      c.run_id, {RunLeaseExpiredEvent(c.run_id, {.attempt = c.attempts, .lease_owner = owner})}));
  Log(logger_, LogLevel::kInfo, expired, "run ", c.run_id, ": the lease of ", owner,
      " expired (attempt ", c.attempts, " of ", c.max_attempts,
      "); queued again for another executor");
  metrics_->LeaseExpired();
  metrics_->Swept(SweepAction::kRequeued);
  if (run.ok()) ExportTakeoverSpan(spans_, *run, owner, "sweeper", clock_->Now());
  return true;
}

}  // namespace runloom::engine_internal
