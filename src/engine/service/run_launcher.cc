#include "engine/service/run_launcher.h"

#include "runloom/events.h"

#include "core/injected_bug.h"
#include "core/log.h"
#include "core/status_macros.h"
#include "engine/rules/run_context.h"

#include "absl/strings/str_cat.h"

namespace runloom::engine_internal {
namespace {

// How an execution ended, for its debug line.
std::string DescribeEnd(const RunExecution& exec, Disposition d) {
  switch (d) {
    case Disposition::kFinished:
      return absl::StrCat("finished ", std::string(ToString(exec.final_status())));
    case Disposition::kPaused:
      return "paused at an approval gate";
    case Disposition::kWaiting:
      return "waiting (parked, no lease held)";
    case Disposition::kReleased:
      return "released to the queue";
    case Disposition::kLeaseLost:
      return "stopped: its lease was lost";
    case Disposition::kStoreError:
      return "stopped by a store error";
  }
  return "stopped";
}

}  // namespace

void DispositionCounters::Count(Disposition d) {
  switch (d) {
    case Disposition::kFinished:
      ++runs_finished_;
      break;
    case Disposition::kPaused:
    case Disposition::kWaiting:  // counted with the paused: a run at rest without a worker
      ++runs_paused_;
      break;
    case Disposition::kReleased:
      ++runs_released_;
      break;
    case Disposition::kLeaseLost:
      ++leases_lost_;
      break;
    case Disposition::kStoreError:
      break;
  }
}

EngineStats DispositionCounters::stats() const {
  return EngineStats{runs_finished_.load(), runs_paused_.load(), runs_released_.load(),
                     leases_lost_.load()};
}

absl::StatusOr<RunRecord> RunLauncher::ExecuteRun(
    const std::string& run_id, const std::function<void(const Lease&)>& on_leased,
    bool want_record) {
  // A lease refused because another came between the read and it (its
  // attempt moved on: IsLeaseAttemptMoved) wrote nothing: read the run
  // again and lease it as it is now (e.g. a first execution whose run
  // another executor leased meanwhile goes on as a resume).
  for (int tries = 1;; ++tries) {
    absl::StatusOr<RunRecord> r = ExecuteRunAsRead(run_id, on_leased, want_record);
    if (r.ok() || !IsLeaseAttemptMoved(r.status()) || tries == kLeaseReadTries) return r;
  }
}

absl::StatusOr<RunRecord> RunLauncher::ExecuteRunAsRead(
    const std::string& run_id, const std::function<void(const Lease&)>& on_leased,
    bool want_record) {
  RUNLOOM_ASSIGN_OR_RETURN(RunRecord run, config_.store->GetRun(run_id));
  // No lease before this one and no event but run.created.
  const bool never_ran = run.attempts == 0 && run.last_event_seq <= 1 && run.revision == 1;
  if (IsTerminal(run.status) || run.status == RunStatus::kPaused ||
      run.status == RunStatus::kWaiting) {
    return absl::FailedPreconditionError(absl::StrCat(
        "run ", run_id, " is ", std::string(ToString(run.status)), "; nothing to execute"));
  }
  const RunEntry entry = run.attempts > 0 ? RunEntry::kResume : run.entry;
  // The lease is this attempt or none (LeaseRequest::expected_attempt).
  const int attempt = run.attempts + 1;
  std::vector<Event> started = {RunStartedEvent(run_id, {.attempt = attempt,
                                                         .lease_owner = config_.owner,
                                                         .revision = run.revision,
                                                         .entry = entry})};
  ExecutionConfig config;
  config.store = config_.store;
  config.clock = config_.clock;
  config.scheduler = config_.scheduler;
  config.registry = config_.registry;
  config.logger = config_.logger;
  config.metrics = config_.metrics;
  config.stage_events = config_.stage_events;
  config.park_sleeps_over = config_.park_sleeps_over;
  config.step_timeouts = &config_.step_timeouts;
  config.start_child = config_.start_child;
  config.live = config_.live;
  config.spans = config_.spans;
  config.working_dir = ContextOf(run).working_dir;
  config.entry = entry;
  config.secrets = secrets_->Get(run_id);
  // `run` was read before the lease. What may have changed since: a cancel
  // request (the next step start is refused, so it is seen), nothing else
  // that the executor reads (decisions and reruns need a paused or
  // terminal run).
  auto wf = catalog_->LoadPinned(run, /*first_execution=*/never_ran);
  // kFailedPrecondition: the pinned definition is poison and the run fails
  // below, with the reason. Any other error is the store's: try again later.
  if (!wf.ok() && wf.status().code() != absl::StatusCode::kFailedPrecondition) {
    return wf.status();
  }
  std::optional<Lease> lease;
  if (never_ran && wf.ok()) {
    FirstExecution first = ExecuteFirst(config, run, started, *wf, on_leased, want_record);
    if (first.result.has_value()) return *std::move(first.result);
    lease = first.leased_before;  // leased, but not first: go on as for a resumed run
  }
  if (!lease.has_value()) {
    RUNLOOM_ASSIGN_OR_RETURN(lease, config_.store->AcquireLease(
                                        LeaseRequest{.run_id = run_id,
                                                     .owner = config_.owner,
                                                     .ttl = config_.lease_ttl,
                                                     .events = std::move(started),
                                                     .expected_attempt = attempt}));
    if (on_leased) on_leased(*lease);
  }
  // Not the run's first lease: the run may have moved on between the read
  // above and the lease (rerun since, so the lease is attempt 1 of a new
  // revision). Executing the read revision would write its records anew
  // (found by the simulation, seed 726; tests/regressions/): give the run
  // back to the queue to be executed as it is now.
  RUNLOOM_ASSIGN_OR_RETURN(RunRecord leased, config_.store->GetRun(run_id));
  if (leased.revision != run.revision) {
    RunWrite back;
    back.run_id = run_id;
    back.party = Party::kExecutor;
    back.lease_token = lease->token;
    back.expected = {RunStatus::kRunning};
    back.new_status = RunStatus::kQueued;
    back.events = {RunReleasedEvent(
        run_id, {.reason = absl::StrCat("revision ", run.revision, " was read, ", leased.revision,
                                        " was leased: executed afresh")})};
    RUNLOOM_RETURN_IF_ERROR(config_.store->Commit(back));
    return absl::AbortedError(absl::StrCat("run ", run_id,
                                           " was rerun after it was read (revision ", run.revision,
                                           " -> ", leased.revision, "); given back to the queue"));
  }
  // The open budget reservations of an earlier lease belong to an executor
  // that is gone (a takeover need not pass the sweeper), or to a call whose
  // settle never reached the store: they are released before this execution
  // reserves. Any lease but a never-run run's first: a rerun's or a
  // decision's lease is attempt 1 again, and an earlier revision's leftover
  // would count against it (found by the simulation, seed 27,
  // tests/regressions/). On failure the lease is left to expire and the
  // sweeper releases them.
  if (!(never_ran && lease->attempt == 1) &&
      !RUNLOOM_INJECTED_BUG(InjectedBug::kReservationKeptOnTakeover)) {
    RUNLOOM_RETURN_IF_ERROR(config_.store->ReleaseReservations(run_id).status());
  }
  run.status = RunStatus::kRunning;
  run.attempts = lease->attempt;
  run.lease_owner = lease->owner;
  run.lease_token = lease->token;
  std::vector<StepRecord> records;
  if (wf.ok()) {
    RUNLOOM_ASSIGN_OR_RETURN(records, config_.store->ListSteps(run_id, run.revision));
  }
  auto exec = std::make_shared<RunExecution>(std::move(config), run, *lease,
                                             wf.ok() ? *wf : nullptr, std::move(records));
  Track(exec, [&] {
    if (!wf.ok()) return exec->FailBeforeStart(std::string(wf.status().message()));
    if (lease->attempt > run.max_attempts) {
      return exec->FailBeforeStart(absl::StrCat("attempt cap reached: lease ", lease->attempt,
                                                " of at most ", run.max_attempts));
    }
    if (run.cancel_requested) exec->root().RequestStop(StopReason::kCancel);
    return exec->Run();
  });
  return Finished(*exec, run, want_record);
}

RunLauncher::FirstExecution RunLauncher::ExecuteFirst(
    const ExecutionConfig& config, RunRecord& run, std::vector<Event> started,
    std::shared_ptr<const Workflow> wf, const std::function<void(const Lease&)>& on_leased,
    bool want_record) {
  // A first execution: no step can have been recorded, and the lease
  // rides on the run's first write (RunExecution takes it).
  ExecutionConfig first = config;
  first.lease_request = ExecutionConfig::LeaseRequest{config_.owner, config_.lease_ttl,
                                                      std::move(started), on_leased};
  RunRecord pending = run;
  pending.status = RunStatus::kRunning;
  pending.attempts = 1;
  pending.lease_owner = config_.owner;
  auto exec = std::make_shared<RunExecution>(std::move(first), pending, Lease{}, std::move(wf),
                                             std::vector<StepRecord>{});
  Track(exec, [&] {
    if (run.cancel_requested) exec->root().RequestStop(StopReason::kCancel);
    return exec->Run();
  });
  absl::Status not_leased = exec->lease_error();
  if (!not_leased.ok()) return {absl::StatusOr<RunRecord>(not_leased), Lease{}};
  if (!exec->lease_needs_records()) return {Finished(*exec, run, want_record), Lease{}};
  return {std::nullopt, exec->lease()};
}

void RunLauncher::Track(const std::shared_ptr<RunExecution>& exec,
                        const std::function<Disposition()>& body) {
  active_->Add(exec);
  Log(config_.logger, LogLevel::kDebug, exec->log_fields(), "run ", exec->run_id(), ": executing");
  const Disposition d = body();
  // A first lease refused over the run's concurrency limit, or because
  // another lease came first, was never held: not a lost lease.
  if (exec->lease_error().code() == absl::StatusCode::kResourceExhausted ||
      IsLeaseAttemptMoved(exec->lease_error())) {
    active_->Remove(exec->run_id());
    return;
  }
  counters_.Count(d);
  Log(config_.logger, LogLevel::kDebug, exec->log_fields(), "run ", exec->run_id(), ": ",
      DescribeEnd(*exec, d));
  if (d == Disposition::kFinished) {
    config_.metrics->RunFinished(exec->final_status());
    if (!exec->parent_run_id().empty() && config_.child_finished) {
      config_.child_finished(engine_internal::ChildEnd{.run_id = exec->run_id(),
                                                       .parent_run_id = exec->parent_run_id(),
                                                       .status = exec->final_status()});
    }
  }
  if (d == Disposition::kLeaseLost) config_.metrics->LeaseLost();
  active_->Remove(exec->run_id());
}

absl::StatusOr<RunRecord> RunLauncher::Finished(const RunExecution& exec, RunRecord& run,
                                                bool want_record) {
  if (exec.final_status() != RunStatus::kPaused && exec.final_status() != RunStatus::kWaiting) {
    secrets_->Erase(run.id);
  }
  if (!want_record) {
    run.status = exec.final_status();
    return std::move(run);  // the executor loop ignores it: skip the read
  }
  return config_.store->GetRun(run.id);
}

}  // namespace runloom::engine_internal
