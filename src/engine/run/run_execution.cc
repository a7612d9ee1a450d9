// RunExecution's life: construction, Run() (walk the graph, then apply the
// outcome rule), step records, the terminal write, stop and drain. The walk
// itself is in graph_walk.cc, leaf steps in leaf_step.cc, gates in
// approval_gate.cc.
#include "engine/run/run_execution.h"

#include "core/injected_bug.h"
#include "core/log.h"
#include "core/status_macros.h"
#include "engine/observe/run_spans.h"
#include "engine/rules/outcome.h"
#include "engine/run/event_helpers.h"
#include "engine/run/run_budget.h"
#include "workflow/inputs.h"
#include "workflow/template.h"

#include "absl/strings/str_cat.h"

namespace runloom::engine_internal {
namespace {

// The stderr kept in a step record.
constexpr size_t kStderrTail = 4096;

}  // namespace

RunExecution::RunExecution(ExecutionConfig config, RunRecord run, Lease lease,
                           std::shared_ptr<const Workflow> workflow,
                           std::vector<StepRecord> records)
    : config_(std::move(config)),
      run_(std::move(run)),
      workflow_(std::move(workflow)),
      writer_(config_.store, run_.id, std::move(lease), config_.lease_request, root_, &scrubber_) {
  for (auto it = config_.secrets.begin(); it != config_.secrets.end(); ++it) {
    if (it->is_string())
      scrubber_.Add(it->get<std::string>());
    else
      scrubber_.Add(it->dump());
  }
  for (StepRecord& r : records) {
    std::string path = r.path;
    records_.emplace(std::move(path), std::move(r));
  }
  runloom::MutexLock l(&phase_mu_);
  phase_ = run_.phase;
}

absl::StatusOr<nlohmann::json> RunExecution::Resolve(const std::string& ref,
                                                     const Scope& scope) const {
  RUNLOOM_ASSIGN_OR_RETURN(nlohmann::json v, ResolveRef(ref, scope, run_, config_.secrets));
  // A declared secret input stored as secret://NAME: resolved here, by
  // whichever process executes the step, and scrubbed from what it writes.
  const std::optional<std::string> name = SecretRefName(v);
  if (!name.has_value()) return v;
  bool declared_secret = false;
  for (const InputDef& in : workflow_->inputs) {
    declared_secret = declared_secret || (in.secret && ref == "inputs." + in.name);
  }
  if (!declared_secret) return v;
  RUNLOOM_ASSIGN_OR_RETURN(std::string value, ResolveSecret(*name));
  scrubber_.Add(value);
  return nlohmann::json(std::move(value));
}

absl::Status RunExecution::Record(const StepDef& step, const std::string& path,
                                  const StepResult& result, int attempt, absl::Time started,
                                  std::string stderr_tail, std::vector<Event> extra_events,
                                  std::optional<SignalConsumption> consume) {
  StepRecord rec;
  rec.run_id = run_.id;
  rec.revision = run_.revision;
  rec.path = path;
  rec.step_id = step.id;
  rec.kind = step.kind;
  rec.phase = step.phase;
  rec.attempt = attempt;
  rec.state = result.state;
  rec.output = result.state == StepState::kSucceeded ? result.output : nlohmann::json(nullptr);
  rec.error = result.error;
  rec.error_class = result.error_class;
  if (stderr_tail.size() > kStderrTail)
    stderr_tail = stderr_tail.substr(stderr_tail.size() - kStderrTail);
  rec.stderr_tail = std::move(stderr_tail);
  rec.started_at = started;
  rec.finished_at = config_.clock->Now();
  RunWrite w;
  w.steps.push_back(std::move(rec));
  w.events = std::move(extra_events);
  const bool defer = !consume.has_value();
  w.consume_signal = std::move(consume);
  return Write(std::move(w), defer);
}

absl::Status RunExecution::RecordContainer(const StepDef& step, const std::string& path,
                                           const StepResult& result, absl::Time started) {
  Event e = result.state == StepState::kSucceeded
                ? events::StepSucceeded(run_.id, path, step.id, 1,
                                        absl::ToInt64Milliseconds(config_.clock->Now() - started))
                : events::StepFailed(run_.id, path, step.id, 1, result.error,
                                     result.error_class.value_or(ErrorClass::kError), false,
                                     std::nullopt);
  return Record(step, path, result, 1, started, "", {std::move(e)});
}

void RunExecution::ReleaseLeftoverReservations() {
  if (!reserved_any_.load()) return;
  absl::StatusOr<int64_t> n = config_.store->ReleaseReservations(run_.id);
  if (!n.ok()) {
    Log(config_.logger, LogLevel::kWarning, log_fields(), "run ", run_.id,
        ": releasing its leftover budget reservations failed (its next lease or a rerun "
        "releases them): ",
        n.status().ToString());
  } else if (*n > 0) {
    Log(config_.logger, LogLevel::kWarning, log_fields(), "run ", run_.id, ": released ", *n,
        " budget reservation(s) left open by calls whose reserve reply or settle was lost, "
        "charged at their worst case");
  }
}

Disposition RunExecution::Finish(RunStatus status, const std::string& outcome,
                                 const std::string& error, std::optional<BudgetStopData> budget) {
  RunWrite w;
  w.new_status = status;
  if (!outcome.empty()) w.outcome = outcome;
  if (!error.empty()) w.error = error;
  w.events.push_back(RunFinishedEvent(
      run_.id,
      {.status = status, .outcome = outcome, .error = error, .budget = std::move(budget)}));
  const bool early = RUNLOOM_INJECTED_BUG(InjectedBug::kStageEventBeforeCommit) &&
                     config_.stage_events != nullptr && workflow_ != nullptr;
  if (early) config_.stage_events->Publish(run_, *workflow_, TerminalStageUpdate(status, error));
  auto export_span = [&] {
    if (config_.spans == nullptr) return;
    RunRecord ended = run_;
    ended.status = status;
    ended.error = error;
    ExportRunSpan(config_.spans, ended, run_.workflow_name, config_.clock->Now());
  };
  const bool span_early = RUNLOOM_INJECTED_BUG(InjectedBug::kRunSpanBeforeCommit);
  if (span_early) export_span();
  absl::Status s = Write(std::move(w));
  if (!s.ok()) return WriteFailed("writing its terminal status", s);
  // Right after the commit, before any other store call, so a rerun that
  // follows the end is heard after it (the simulation found the release
  // below letting a rerun in first). No workflow: its pinned version could
  // not be loaded, so there is no stage_events block to route by.
  if (config_.stage_events != nullptr && workflow_ != nullptr && !early) {
    config_.stage_events->Publish(run_, *workflow_, TerminalStageUpdate(status, error));
  }
  if (!span_early) export_span();
  ReleaseLeftoverReservations();
  final_status_ = status;
  final_error_ = error;
  return Disposition::kFinished;
}

Disposition RunExecution::FailBeforeStart(const std::string& error) {
  return Finish(RunStatus::kFailed, "failed", error);
}

void RunExecution::Drain() { draining_ = true; }

void RunExecution::StopForBudget(const BudgetStopData& refused) {
  {
    runloom::MutexLock l(&budget_mu_);
    if (!budget_stop_.has_value()) budget_stop_ = refused;
  }
  root_.RequestStop(StopReason::kBudget);
}

Disposition RunExecution::BudgetStopped() {
  std::optional<BudgetStopData> d;
  {
    runloom::MutexLock l(&budget_mu_);
    d = budget_stop_;
  }
  if (!d.has_value()) return Finish(RunStatus::kBudgetStopped, "", "budget exhausted");
  const int64_t left = d->limit_micros.value_or(0) - d->spent_micros - d->reserved_micros;
  const std::string error = absl::StrCat(
      "budget exhausted: the ", d->refused_by, " budget has ", FormatAmountMicros(left),
      " left of ", FormatAmountMicros(d->limit_micros.value_or(0)), " (spent ",
      FormatAmountMicros(d->spent_micros), ", reserved ", FormatAmountMicros(d->reserved_micros),
      "); a model call needing up to ", FormatAmountMicros(d->amount_micros), " was not sent");
  return Finish(RunStatus::kBudgetStopped, "", error, std::move(d));
}

Disposition RunExecution::StopDisposition() {
  switch (root_.reason()) {
    case StopReason::kCancel:
      return Finish(RunStatus::kCancelled, "", "cancelled by request");
    case StopReason::kLeaseLost:
      return Disposition::kLeaseLost;
    case StopReason::kBudget:
      return BudgetStopped();
    case StopReason::kShutdown:
    case StopReason::kDeadline:
    case StopReason::kNone:
      break;
  }
  if (!draining_) return Disposition::kStoreError;
  RunWrite w;
  w.new_status = RunStatus::kQueued;
  w.events.push_back(RunReleasedEvent(run_.id, {.reason = "worker shutting down"}));
  absl::Status s = Write(std::move(w));
  if (s.ok()) return Disposition::kReleased;
  // Either way nothing more is written: the lease expiry recovers the run.
  Log(config_.logger, LogLevel::kWarning, log_fields(), "run ", run_.id,
      ": releasing it to the queue on shutdown failed: ", s.ToString());
  return Disposition::kLeaseLost;
}

void RunExecution::LogStopped(const absl::Status& why) {
  // A first execution whose lease was refused, or taken but not first, is
  // the launcher's to report (it returns or retries it).
  if (!writer_.lease_error().ok() || writer_.lease_needs_records()) return;
  switch (why.code()) {
    case absl::StatusCode::kCancelled:
      return;  // a requested stop: the disposition says which
    case absl::StatusCode::kAborted:
      Log(config_.logger, LogLevel::kInfo, log_fields(), "run ", run_.id,
          ": execution stopped: ", why.ToString());
      return;
    default:
      Log(config_.logger, LogLevel::kWarning, log_fields(), "run ", run_.id,
          ": execution stopped by a store error (the run is recovered when its lease expires): ",
          why.ToString());
  }
}

Disposition RunExecution::WriteFailed(const char* what, const absl::Status& s) {
  const bool lost = s.code() == absl::StatusCode::kAborted;
  Log(config_.logger, lost ? LogLevel::kInfo : LogLevel::kWarning, log_fields(), "run ", run_.id,
      ": ", what, " failed: ", s.ToString());
  return lost ? Disposition::kLeaseLost : Disposition::kStoreError;
}

Disposition RunExecution::Run() {
  Scope top;
  absl::StatusOr<StepResult> r = RunSequence(workflow_->steps, "", top, root_);
  if (!r.ok()) {
    LogStopped(r.status());
    return StopDisposition();
  }
  if (halt_ == Halt::kPause) return Pause();
  if (halt_ == Halt::kWait) return Park();
  if (halt_ == Halt::kReject) return Finish(RunStatus::kRejected, "rejected", reject_error_);
  if (root_.stopped() || draining_) {
    // Every step finished, but the stop came first: honour a cancel.
    if (root_.reason() == StopReason::kCancel) return StopDisposition();
    if (root_.reason() == StopReason::kLeaseLost) return Disposition::kLeaseLost;
    if (root_.reason() == StopReason::kBudget) return BudgetStopped();
  }
  std::optional<absl::StatusOr<nlohmann::json>> resolved;
  if (!workflow_->outcome.empty()) {
    resolved = ResolveTemplates(nlohmann::json(workflow_->outcome),
                                [&](const std::string& ref) { return Resolve(ref, top); });
  }
  RunOutcome o = ResolveOutcome(r->state == StepState::kFailed, r->error, resolved);
  return Finish(o.status, o.outcome, o.error);
}

}  // namespace runloom::engine_internal
