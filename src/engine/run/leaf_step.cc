// Leaf steps: one step of a registered kind (exec, llm, ...), attempted under
// its timeout and retry policy (retry_policy.h). Each attempt starts with a
// fenced step.started write (refused once a cancel is requested); the step's
// final result is recorded with a deferred write (run_writer.h). A stop
// (cancel, lease lost, shutdown) leaves the step unrecorded, so a later
// execution runs it again; a parallel branch's deadline fails it as timeout.
#include "core/injected_bug.h"
#include "core/log.h"
#include "core/status_macros.h"
#include "engine/observe/live_text.h"
#include "engine/observe/run_spans.h"
#include "engine/rules/retry_policy.h"
#include "engine/run/event_helpers.h"
#include "engine/run/run_budget.h"
#include "engine/run/run_execution.h"
#include "engine/run/secrets.h"
#include "steps/builtin_steps.h"
#include "workflow/template.h"

#include "absl/strings/str_cat.h"

namespace runloom::engine_internal {
namespace {

// A reserve or settle that does not reach the store is sent this many times
// in all (both are idempotent per key), the waits doubling from
// kRetryBackoff (20 + 40 + 80 ms).
constexpr int kStoreTries = 4;
constexpr absl::Duration kRetryBackoff = absl::Milliseconds(20);

// The context a step kind sees while it executes.
class LeafContext final : public StepContext {
 public:
  // What a step may reach of its execution beyond its own config: the
  // store (the write ledger), the lease, the secrets and the logger.
  struct Reach {
    Store* store;
    std::function<std::string()> lease_token;  // the current token
    SecretScrubber* scrubber;
    Logger* logger;
    std::string worker;    // the lease owner executing the run, for log lines
    RunBudgetSpec budget;  // the run's tenant and own limit
    // Called with the figures when a reservation is refused: stops the run.
    std::function<void(const BudgetStopData&)> on_budget_refused;
    // Called before each reservation is asked for.
    std::function<void()> on_reserving;
    // Called when the store's fence refuses this execution (kAborted: its
    // lease expired or was taken): the whole execution stops as lease lost,
    // so the step is left unrecorded for the next holder, never failed.
    std::function<void()> on_fenced;
    // The decision the step's writes carry out (WriteKey::decision).
    std::string write_decision;
    // Where streamed text goes; nullptr = nowhere.
    LiveText* live = nullptr;
    // Where the step's own spans go, and the attempt's span (their parent);
    // nullptr = untraced.
    SpanSink* spans = nullptr;
    TraceContext trace;
  };
  LeafContext(const std::string& run_id, const std::string& path, int attempt,
              const std::string& working_dir, Clock* clock, absl::Time deadline, StopSource& stop,
              Reach reach)
      : run_id_(run_id),
        path_(path),
        attempt_(attempt),
        working_dir_(working_dir),
        clock_(clock),
        deadline_(deadline),
        stop_(stop),
        reach_(std::move(reach)),
        fields_logger_(reach_.logger, run_id, path, attempt, reach_.worker),
        logger_(&fields_logger_, reach_.scrubber) {}
  ~LeafContext() override {
    OnStop(nullptr);
    if (reach_.live != nullptr) reach_.live->End(run_id_, path_, attempt_);
  }

  const std::string& run_id() const override { return run_id_; }
  const std::string& step_path() const override { return path_; }
  int attempt() const override { return attempt_; }
  const std::string& working_dir() const override { return working_dir_; }
  const std::string& write_decision() const override { return reach_.write_decision; }
  Clock* clock() override { return clock_; }
  absl::Time deadline() const override { return deadline_; }
  bool Stopping() override { return stop_.stopped() || clock_->Now() >= deadline_; }
  bool SleepUntil(absl::Time until) override {
    absl::Time end = std::min(until, deadline_);
    bool stopped = stop_.WaitUntil(clock_, end);
    return !stopped && end == until;
  }
  void OnStop(std::function<void()> fn) override {
    if (callback_id_ >= 0) stop_.RemoveCallback(callback_id_);
    callback_id_ = -1;
    if (fn) callback_id_ = stop_.AddCallback(std::move(fn));
  }
  void RecordEvent(Event event) override {
    event.run_id = run_id_;
    runloom::MutexLock l(&events_mu_);
    events_.push_back(std::move(event));
  }
  std::vector<Event> TakeEvents() {
    runloom::MutexLock l(&events_mu_);
    return std::move(events_);
  }
  absl::StatusOr<BeginWriteResult> BeginWrite(const std::string& action,
                                              const std::string& idempotency_key,
                                              const std::string& request_digest) override {
    return Fenced(reach_.store->BeginWrite({.key = Key(action),
                                            .lease_token = reach_.lease_token(),
                                            .idempotency_key = idempotency_key,
                                            .request_digest = request_digest}));
  }
  absl::StatusOr<WriteOperation> FinishWrite(const std::string& action,
                                             const WriteResult& result) override {
    WriteResult scrubbed = result;
    reach_.scrubber->Scrub(scrubbed.response);
    return reach_.store->FinishWrite(Key(action), scrubbed);
  }
  absl::StatusOr<std::string> ResolveSecret(const std::string& name) override {
    RUNLOOM_ASSIGN_OR_RETURN(std::string value, engine_internal::ResolveSecret(name));
    reach_.scrubber->Add(value);
    return value;
  }
  // The execution's logger, with this attempt's run, step, attempt and
  // worker, and the run's secrets scrubbed.
  Logger* logger() override { return &logger_; }
  std::optional<TraceContext> trace() const override {
    if (reach_.spans == nullptr) return std::nullopt;
    return reach_.trace;
  }
  void RecordSpan(TraceSpan span) override {
    if (reach_.spans == nullptr) return;
    span.trace_id = reach_.trace.trace_id;
    if (span.parent_span_id.empty()) span.parent_span_id = reach_.trace.span_id;
    if (span.error) reach_.scrubber->Scrub(span.error_message);
    reach_.spans->Export(std::move(span));
  }
  void StreamDelta(std::string_view text) override {
    if (reach_.live != nullptr) reach_.live->Append(run_id_, path_, attempt_, text);
  }
  void StreamReset() override {
    if (reach_.live != nullptr) reach_.live->Reset(run_id_, path_, attempt_);
  }
  absl::StatusOr<ReserveResult> ReserveBudget(int64_t amount_micros) override {
    BudgetRequest request{.key = {.run_id = run_id_,
                                  .step_path = path_,
                                  .attempt = attempt_,
                                  .lease_token = reach_.lease_token()},
                          .tenant = reach_.budget.tenant,
                          .run_limit_micros = reach_.budget.limit_micros,
                          .amount_micros = amount_micros};
    reach_.on_reserving();
    // A reserve whose reply was lost may have applied: asking again for the
    // same key returns it granted, unchanged.
    absl::StatusOr<ReserveResult> reserved;
    absl::Duration backoff = kRetryBackoff;
    for (int i = 0; i < kStoreTries; ++i) {
      if (i > 0) {
        clock_->SleepFor(backoff);
        backoff *= 2;
      }
      reserved = reach_.store->Reserve(request);
      if (reserved.status().code() != absl::StatusCode::kUnavailable) break;
    }
    RUNLOOM_ASSIGN_OR_RETURN(ReserveResult r, Fenced(std::move(reserved)));
    if (r.granted) {
      reserved_ = request.key;
      return r;
    }
    const BudgetFigures& by = r.refused_by == "tenant" ? r.tenant : r.run;
    reach_.on_budget_refused(BudgetStopData{.refused_by = r.refused_by,
                                            .amount_micros = amount_micros,
                                            .limit_micros = by.limit_micros,
                                            .spent_micros = by.spent_micros,
                                            .reserved_micros = by.reserved_micros});
    return r;
  }
  absl::Status SettleBudget(int64_t cost_micros) override {
    if (!reserved_.has_value()) {
      return absl::FailedPreconditionError("settling a model call's cost that was never reserved");
    }
    // The call was made: its cost is a fact, and the first settle wins, so a
    // settle that did not reach the store is sent again (a few times, backing
    // off) rather than left to keep the amount reserved.
    absl::Status s;
    absl::Duration backoff = kRetryBackoff;
    for (int i = 0; i < kStoreTries; ++i) {
      if (i > 0) {
        clock_->SleepFor(backoff);
        backoff *= 2;
      }
      s = reach_.store->SettleReservation(*reserved_, cost_micros).status();
      if (s.code() != absl::StatusCode::kUnavailable) return s;
    }
    return s;
  }

 private:
  template <typename T>
  absl::StatusOr<T> Fenced(absl::StatusOr<T> result) {
    if (result.status().code() == absl::StatusCode::kAborted && reach_.on_fenced) {
      reach_.on_fenced();
    }
    return result;
  }

  const std::string run_id_;
  const std::string path_;
  const int attempt_;
  const std::string working_dir_;
  Clock* const clock_;
  const absl::Time deadline_;
  StopSource& stop_;
  const Reach reach_;
  FieldsLogger fields_logger_;  // after reach_
  ScrubbingLogger logger_;      // after fields_logger_
  int callback_id_ = -1;
  std::optional<BudgetKey> reserved_;  // what ReserveBudget reserved
  // A kind may record from a thread of its own.
  runloom::Mutex events_mu_;
  std::vector<Event> events_ ABSL_GUARDED_BY(events_mu_);

  WriteKey Key(const std::string& action) const {
    return {
        .run_id = run_id_, .step_path = path_, .action = action, .decision = reach_.write_decision};
  }
};

constexpr char kBranchDeadline[] = "the parallel branch passed its deadline";

}  // namespace

absl::Status RunExecution::WriteStepStarted(const StepDef& step, const std::string& path,
                                            int attempt) {
  RunWrite w;
  w.events.push_back(StepStartedEvent(run_.id, {.path = path,
                                                .step_id = step.id,
                                                .kind = step.kind,
                                                .attempt = attempt,
                                                .phase = step.phase,
                                                .revision = run_.revision,
                                                .entry = config_.entry}));
  w.phase = EnterPhase(step.phase);
  w.refuse_if_cancel_requested = true;
  RUNLOOM_RETURN_IF_ERROR(Write(std::move(w)));
  // After the commit, once per step (not per retry): the stage it entered.
  if (config_.stage_events != nullptr && !step.stage.empty() && attempt == 1) {
    config_.stage_events->Publish(run_, *workflow_, {.stage = step.stage, .status = "started"});
  }
  return absl::OkStatus();
}

std::optional<std::string> RunExecution::EnterPhase(const std::string& phase) {
  runloom::MutexLock l(&phase_mu_);
  if (phase.empty() || phase == phase_) return std::nullopt;
  phase_ = phase;
  return phase;
}

RunExecution::Attempt RunExecution::ExecuteAttempt(StepKind& kind, const StepDef& step,
                                                   const std::string& path, int attempt,
                                                   absl::Time deadline, Scope& scope,
                                                   StopSource& stop,
                                                   const nlohmann::json* literal) {
  Attempt a;
  auto config =
      ResolveTemplates(step.config, [&](const std::string& ref) { return Resolve(ref, scope); });
  if (config.ok() && literal != nullptr) {
    for (const auto& [key, value] : literal->items()) (*config)[key] = value;
  }
  if (!config.ok()) {
    a.out = absl::InvalidArgumentError(absl::StrCat("templates: ", config.status().message()));
  } else {
    LeafContext ctx(
        run_.id, path, attempt, config_.working_dir, config_.clock, deadline, stop,
        {.store = config_.store,
         .lease_token = [this] { return writer_.lease().token; },
         .scrubber = &scrubber_,
         .logger = config_.logger,
         .worker = run_.lease_owner,
         .budget = BudgetSpecOf(run_),
         .on_budget_refused = [this](const BudgetStopData& refused) { StopForBudget(refused); },
         .on_reserving = [this] { reserved_any_ = true; },
         .on_fenced = [this] { root_.RequestStop(StopReason::kLeaseLost); },
         .write_decision = WriteDecisionFor(path),
         .live = config_.live,
         .spans = config_.spans,
         .trace = config_.spans != nullptr
                      ? StepAttemptTrace(run_, path, attempt, writer_.lease().token)
                      : TraceContext{}});
    a.out = kind.Execute(ctx, *config);
    a.events = ctx.TakeEvents();
  }
  return a;
}

void RunExecution::LogAttemptFailed(const std::string& path, int attempt, ErrorClass cls,
                                    const absl::Status& err) const {
  if (LogLevel::kDebug < config_.logger->min_level()) return;
  // The first line: an exec step's error goes on with its stderr tail.
  const absl::string_view message = err.message().substr(0, err.message().find('\n'));
  std::string text = absl::StrCat("run ", run_.id, ": step ", path, " attempt ", attempt,
                                  " failed (", std::string(ToString(cls)), "): ", message);
  scrubber_.Scrub(text);  // the error may hold a secret the step printed
  config_.logger->LogWithFields(
      LogLevel::kDebug, text,
      {.run_id = run_.id, .step = path, .attempt = attempt, .worker = run_.lease_owner});
}

namespace {

// The attempt's own events, then `last` (its step.succeeded or step.failed).
std::vector<Event> WithLast(std::vector<Event> events, Event last) {
  events.push_back(std::move(last));
  return events;
}

}  // namespace

// The attempt loop: start, execute, then record success, or retry after the
// backoff, or record the failure. Kept whole (~75 lines): the loop's exits share the
// attempt's state.
absl::Duration RunExecution::TimeoutOf(const StepDef& step, const StepKind& kind) const {
  if (step.timeout) return *step.timeout;  // the step's or its workflow's defaults.timeout
  if (RUNLOOM_INJECTED_BUG(InjectedBug::kDefaultTimeoutIgnored)) return absl::InfiniteDuration();
  if (config_.step_timeouts != nullptr) {
    if (auto it = config_.step_timeouts->find(step.kind); it != config_.step_timeouts->end()) {
      return it->second;
    }
  }
  return kind.DefaultTimeout();
}

absl::StatusOr<StepResult> RunExecution::RunLeaf(const StepDef& step, const std::string& path,
                                                 Scope& scope, StopSource& stop,
                                                 const nlohmann::json* literal) {
  std::shared_ptr<StepKind> kind = config_.registry->Find(step.kind);
  const absl::Time first_start = config_.clock->Now();
  StepResult result;
  if (kind == nullptr) {
    result.state = StepState::kFailed;
    result.error = absl::StrCat("unknown step kind '", step.kind, "'");
    result.error_class = ErrorClass::kInvalid;
    RUNLOOM_RETURN_IF_ERROR(
        Record(step, path, result, 1, first_start, "",
               {events::StepFailed(run_.id, path, step.id, 1, result.error, ErrorClass::kInvalid,
                                   false, std::nullopt)}));
    return result;
  }
  const absl::Duration timeout = TimeoutOf(step, *kind);
  for (int attempt = 1;; ++attempt) {
    RUNLOOM_RETURN_IF_ERROR(WriteStepStarted(step, path, attempt));
    const absl::Time started = config_.clock->Now();
    const absl::Time deadline =
        timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : started + timeout;
    Attempt executed = ExecuteAttempt(*kind, step, path, attempt, deadline, scope, stop, literal);
    absl::StatusOr<StepOutput>& out = executed.out;
    if (stop.stopped()) {
      if (stop.reason() != StopReason::kDeadline) {
        // The run is stopping (cancel, lease lost, shutdown): the step's
        // result is not recorded, so a later execution runs it again.
        return absl::CancelledError("stop requested");
      }
      if (out.ok() || out.status().code() == absl::StatusCode::kCancelled) {
        out = absl::DeadlineExceededError(kBranchDeadline);
      }
    }
    const absl::Time now = config_.clock->Now();
    config_.metrics->StepDuration(step.kind, now - started);
    // The attempt's span (runloom/trace.h), whatever became of it.
    auto span = [&](std::string_view outcome, const absl::Status& err, ErrorClass cls) {
      if (config_.spans == nullptr) return;
      std::string error(err.message());
      scrubber_.Scrub(error);
      ExportStepAttemptSpan(config_.spans, run_,
                            {.path = path,
                             .kind = step.kind,
                             .attempt = attempt,
                             .lease_token = writer_.lease().token,
                             .worker = run_.lease_owner,
                             .start = started,
                             .end = now,
                             .outcome = std::string(outcome),
                             .error = std::move(error),
                             .error_class = err.ok() ? "" : std::string(ToString(cls))});
    };
    if (out.ok()) {
      span("succeeded", absl::OkStatus(), ErrorClass::kInvalid);
      result.state = StepState::kSucceeded;
      result.output = std::move(out->output);
      const int64_t ms = absl::ToInt64Milliseconds(now - started);
      RUNLOOM_RETURN_IF_ERROR(
          Record(step, path, result, attempt, started, std::move(out->stderr_tail),
                 WithLast(std::move(executed.events),
                          events::StepSucceeded(run_.id, path, step.id, attempt, ms))));
      // After the commit: the stage the step's success enters (stage:
      // [pending, processing]).
      if (config_.stage_events != nullptr && !step.success_stage.empty()) {
        config_.stage_events->Publish(run_, *workflow_,
                                      {.stage = step.success_stage, .status = "started"});
      }
      return result;
    }
    absl::Status err = out.status();
    if (err.code() == absl::StatusCode::kCancelled && now >= deadline) {
      err = absl::DeadlineExceededError(
          absl::StrCat("timed out after ", absl::FormatDuration(timeout),
                       step.timeout ? "" : " (the step kind's default timeout; set timeout:)"));
    }
    ErrorClass cls = AttemptErrorClass(err);
    LogAttemptFailed(path, attempt, cls, err);
    const bool retried =
        ShouldRetry(step.retry, attempt, cls, stop.reason() == StopReason::kDeadline);
    span(retried ? "retried" : "failed", err, cls);
    if (retried) {
      absl::Duration delay = Backoff(step.retry, attempt);
      RunWrite w;
      w.events =
          WithLast(std::move(executed.events),
                   events::StepFailed(run_.id, path, step.id, attempt, std::string(err.message()),
                                      cls, true, absl::ToInt64Milliseconds(delay)));
      RUNLOOM_RETURN_IF_ERROR(Write(std::move(w)));
      if (stop.WaitUntil(config_.clock, config_.clock->Now() + delay)) {
        if (stop.reason() != StopReason::kDeadline) return absl::CancelledError("stop requested");
      }
      if (!stop.stopped()) continue;
      // Branch deadline passed during the backoff.
      err = absl::DeadlineExceededError(kBranchDeadline);
      cls = ErrorClass::kTimeout;
    }
    result.state = StepState::kFailed;
    result.error = std::string(err.message());
    result.error_class = cls;
    result.output = nullptr;
    std::string stderr_tail;
    if (auto tail = err.GetPayload(kStderrTailPayload)) stderr_tail = std::string(*tail);
    RUNLOOM_RETURN_IF_ERROR(
        Record(step, path, result, attempt, first_start, std::move(stderr_tail),
               WithLast(std::move(executed.events),
                        events::StepFailed(run_.id, path, step.id, attempt, result.error, cls,
                                           false, std::nullopt))));
    return result;
  }
}

}  // namespace runloom::engine_internal
