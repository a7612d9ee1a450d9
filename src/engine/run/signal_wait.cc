// Signals on the executor's side (see signal_wait.h): RunExecution::RunWait.
//
// A wait resolves exactly once, by one of: a signal, its timeout, or the run
// leaving (cancel, reset, rerun). The store decides the race: a signal sent
// to a run resting at the wait marks itself consumed by the wait's key and
// queues the run in one commit (SignalStore::SendSignal), the timer sweep
// queues it with no signal consumed, and a cancel finishes it; each expects
// the run waiting, so one wins. The next execution reads which: a signal
// consumed by its key, else a passed deadline (the timeout), else the
// mailbox (a signal sent before the wait was reached), else it parks again.
#include "engine/run/signal_wait.h"

#include "runloom/events.h"
#include "runloom/store.h"

#include "core/duration.h"
#include "core/status_macros.h"
#include "engine/rules/run_context.h"
#include "engine/rules/step_paths.h"
#include "engine/run/event_helpers.h"
#include "engine/run/run_execution.h"
#include "llm/json_schema.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <string>

namespace runloom::engine_internal {
namespace {

constexpr size_t kMaxName = 128;
constexpr size_t kMaxPayloadBytes = 64 * 1024;
constexpr size_t kMaxIdempotencyKey = 200;
// Parks refused because a signal came in between, before the wait gives up
// for this execution (a store error: the lease expiry retries it).
constexpr int kParkTries = 3;

void CollectWaits(const std::vector<StepDef>& steps, const std::string& signal,
                  std::vector<const StepDef*>& out) {
  for (const StepDef& s : steps) {
    if (s.kind == "wait") {
      absl::StatusOr<WaitConfig> c = ParseWaitConfig(s.config);
      if (c.ok() && c->signal == signal) out.push_back(&s);
    }
    CollectWaits(s.body, signal, out);
    for (const Branch& b : s.branches) CollectWaits(b.steps, signal, out);
  }
}

}  // namespace

bool IsSignalName(const std::string& name) {
  if (name.empty() || name.size() > kMaxName || !absl::ascii_isalnum(name[0])) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '.' && c != '-') return false;
  }
  return true;
}

absl::StatusOr<WaitConfig> ParseWaitConfig(const nlohmann::json& config) {
  WaitConfig out;
  if (!config.is_object()) return absl::InvalidArgumentError("a wait step needs `signal:`");
  for (const auto& [key, value] : config.items()) {
    if (key != "signal" && key != "timeout" && key != "schema") {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown key '", key, "' for a wait step; allowed: signal, timeout, schema"));
    }
  }
  auto signal = config.find("signal");
  if (signal == config.end()) {
    return absl::InvalidArgumentError("a wait step needs `signal:` (e.g. signal: payment)");
  }
  if (!signal->is_string() || !IsSignalName(signal->get<std::string>())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "signal: ", signal->dump(),
        " is not a signal name: 1 to 128 of A-Z a-z 0-9 _ . -, starting with a letter or digit"));
  }
  out.signal = signal->get<std::string>();
  if (auto s = config.find("schema"); s != config.end()) {
    RUNLOOM_RETURN_IF_ERROR(JsonSchema::Compile(*s, "schema", "payload").status());
    out.schema = *s;
  }
  return out;
}

absl::Status StepConfigError(const Workflow& wf, const StepDef& step, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat(StepLocation(wf, step), "step '", step.id, "': ", what));
}

absl::Status CheckParksOutsideParallel(const Workflow& wf, const StepDef& step, bool in_parallel) {
  if (!in_parallel) return absl::OkStatus();
  return StepConfigError(wf, step,
                         absl::StrCat("a ", step.kind,
                                      " step cannot sit inside a parallel branch (it parks the "
                                      "whole run); put it before or after the parallel step"));
}

absl::Status ValidateWaitStep(const Workflow& wf, const StepDef& step, bool in_parallel) {
  RUNLOOM_RETURN_IF_ERROR(CheckParksOutsideParallel(wf, step, in_parallel));
  absl::StatusOr<WaitConfig> c = ParseWaitConfig(step.config);
  if (!c.ok()) return StepConfigError(wf, step, std::string(c.status().message()));
  return absl::OkStatus();
}

std::string WaitKey(int64_t revision, const std::string& path) {
  return absl::StrCat(revision, ":", path);
}

std::vector<const StepDef*> WaitStepsFor(const Workflow& wf, const std::string& signal) {
  std::vector<const StepDef*> out;
  CollectWaits(wf.steps, signal, out);
  return out;
}

absl::Status CheckSignal(const Workflow& wf, const std::string& name,
                         const nlohmann::json& payload, const std::string& idempotency_key) {
  if (!IsSignalName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("name: '", name.substr(0, kMaxName),
                     "' is not a signal name: 1 to 128 of A-Z a-z 0-9 _ . -, starting with a "
                     "letter or digit"));
  }
  if (idempotency_key.size() > kMaxIdempotencyKey) {
    return absl::InvalidArgumentError(
        absl::StrCat("idempotency_key: over ", kMaxIdempotencyKey, " bytes"));
  }
  const std::string text = payload.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > kMaxPayloadBytes) {
    return absl::InvalidArgumentError(absl::StrCat("payload: ", text.size(),
                                                   " bytes of JSON, over the limit of ",
                                                   kMaxPayloadBytes));
  }
  std::vector<const StepDef*> waits = WaitStepsFor(wf, name);
  if (waits.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("name: workflow ", wf.name,
                                                   " has no wait step for signal '", name,
                                                   "'; nothing was kept"));
  }
  for (const StepDef* w : waits) {
    absl::StatusOr<WaitConfig> c = ParseWaitConfig(w->config);
    if (!c.ok() || c->schema.is_null()) continue;
    RUNLOOM_ASSIGN_OR_RETURN(std::unique_ptr<JsonSchema> schema,
                             JsonSchema::Compile(c->schema, "schema", "payload"));
    absl::Status s = schema->Validate(payload);
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(s.message(), " (the schema of wait step '", w->id, "')"));
    }
  }
  return absl::OkStatus();
}

StepResult RunExecution::ParkedAtStep() {
  parked_ = true;
  halt_ = Halt::kWait;
  StepResult pending;
  pending.state = StepState::kSkipped;  // not recorded; the walk stops here
  return pending;
}

absl::StatusOr<StepResult> RunExecution::RunWait(const StepDef& step, const std::string& path) {
  absl::StatusOr<WaitConfig> wait = ParseWaitConfig(step.config);
  // The common key; the loader checked it. `timeout: none` waits as long as
  // no timeout does.
  if (wait.ok() && step.timeout != absl::InfiniteDuration()) wait->timeout = step.timeout;
  const absl::Time started = config_.clock->Now();
  if (!wait.ok()) {  // refused at load time; a stored definition that fails now fails the step
    StepResult failed;
    failed.state = StepState::kFailed;
    failed.error = std::string(wait.status().message());
    failed.error_class = ErrorClass::kInvalid;
    RUNLOOM_RETURN_IF_ERROR(
        Record(step, path, failed, 1, started, "",
               {events::StepFailed(run_.id, path, step.id, 1, failed.error, ErrorClass::kInvalid,
                                   false, std::nullopt)}));
    return failed;
  }
  RUNLOOM_RETURN_IF_ERROR(WriteStepStarted(step, path, 1));
  Store& store = *config_.store;
  const std::string key = WaitKey(run_.revision, path);
  auto received = [&](const SignalRecord& signal,
                      std::optional<SignalConsumption> consume) -> absl::StatusOr<StepResult> {
    StepResult r;
    r.state = StepState::kSucceeded;
    r.output = signal.payload;
    RUNLOOM_RETURN_IF_ERROR(Record(
        step, path, r, 1, started, "",
        {events::StepSucceeded(run_.id, path, step.id, 1,
                               absl::ToInt64Milliseconds(config_.clock->Now() - started))},
        std::move(consume)));
    return r;
  };
  // Resolved while the run rested here: the signal its wake consumed.
  RUNLOOM_ASSIGN_OR_RETURN(std::optional<SignalRecord> consumed,
                           store.SignalConsumedBy(run_.id, key));
  if (consumed.has_value()) return received(*consumed, std::nullopt);
  RUNLOOM_ASSIGN_OR_RETURN(const absl::Time now, store.Now());
  const RunContext context = ContextOf(run_);
  std::optional<absl::Time> deadline;
  if (context.timer.has_value() && context.timer->step_path == path &&
      context.timer->revision == run_.revision) {
    deadline = context.timer->until;  // set when the wait was first reached
  } else if (wait->timeout.has_value()) {
    deadline = now + *wait->timeout;
  }
  // The timer resolved it (its deadline passed before any signal came): a
  // signal that comes later stays in the mailbox for a later wait.
  if (deadline.has_value() && *deadline <= now) {
    StepResult failed;
    failed.state = StepState::kFailed;
    failed.error = absl::StrCat("wait: no signal '", wait->signal, "' within ",
                                runloom::FormatDuration(wait->timeout.value_or(absl::ZeroDuration())));
    failed.error_class = ErrorClass::kTimeout;
    RUNLOOM_RETURN_IF_ERROR(
        Record(step, path, failed, 1, started, "",
               {events::StepFailed(run_.id, path, step.id, 1, failed.error, ErrorClass::kTimeout,
                                   false, std::nullopt)}));
    return failed;
  }
  for (int tries = 0; tries < kParkTries; ++tries) {
    RUNLOOM_ASSIGN_OR_RETURN(std::optional<SignalRecord> next,
                             store.NextSignal(run_.id, wait->signal));
    if (next.has_value()) {
      return received(*next, SignalConsumption{.seq = next->seq, .key = key});
    }
    RunWrite w;
    w.new_status = RunStatus::kWaiting;
    w.wait_for_signal = SignalWait{.signal = wait->signal, .key = key};
    w.wake_at = deadline;
    RunContext parked = context;
    if (deadline.has_value()) {
      parked.timer = StoredTimer{.step_path = path, .revision = run_.revision, .until = *deadline};
    }
    w.context = EncodeRunContext(parked);
    w.events.push_back(RunWaitingEvent(
        run_.id, {.step_path = path,
                  .for_what = "signal",
                  .until = deadline.has_value() ? WakeTimeText(*deadline) : "",
                  .signal = wait->signal}));
    absl::Status s = Write(std::move(w));
    if (s.ok()) return ParkedAtStep();
    // kAlreadyExists: a signal came since the read; consume it instead.
    if (s.code() != absl::StatusCode::kAlreadyExists) return s;
  }
  return absl::UnavailableError(absl::StrCat("wait at ", path, ": signals kept arriving while it "
                                             "parked; the next execution resolves it"));
}

}  // namespace runloom::engine_internal
