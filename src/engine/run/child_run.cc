// Child runs on the executor's side (see child_run.h): RunExecution::RunChild.
//
// A run step admits its child under ChildKey (idempotent: a resumed parent
// finds the child it started) and parks the parent until the child ends.
// The child's end is one signal in the parent's mailbox, sent by whoever
// finished the child (NotifyParentOfEnd, idempotent per child); it wakes
// the parent through the signal store's one compare-and-set, as a signal
// wakes a wait step. The parked parent also carries a timer (kChildPoll):
// if the process that finished the child died before sending the signal,
// the timer wakes the parent, which reads the child itself. The step's
// result is always read from the child's run record, never from the
// signal: the child's terminal status is final, so every execution of the
// step that sees it records the same result, and the step record is
// written once (fenced by the parent's lease).
#include "engine/run/child_run.h"

#include "runloom/budget_ledger.h"
#include "runloom/events.h"

#include "core/injected_bug.h"
#include "core/status_macros.h"
#include "engine/rules/retry_policy.h"
#include "engine/rules/run_context.h"
#include "engine/rules/step_paths.h"
#include "engine/run/event_helpers.h"
#include "engine/run/run_execution.h"
#include "engine/run/signal_wait.h"
#include "workflow/internal/names.h"
#include "workflow/template.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include <algorithm>
#include <optional>
#include <string>

namespace runloom::engine_internal {
namespace {

// A parked parent looks at its child at least this often, in case the
// child's end signal was never sent (its sender died between the commits).
constexpr absl::Duration kChildPoll = absl::Minutes(1);
// The most of a child's outputs a parent's step output takes (JSON bytes).
constexpr size_t kMaxChildOutputBytes = 1 << 20;
// Parks refused because the child's end came in between, before this
// execution gives up (a store error: the lease expiry retries it).
constexpr int kChildParkTries = 3;

// The outputs of a completed child: each top-level step that succeeded in
// its last revision, by step id.
absl::StatusOr<nlohmann::json> ChildOutputs(RunStore& store, const RunRecord& child) {
  RUNLOOM_ASSIGN_OR_RETURN(std::vector<StepRecord> steps, store.ListSteps(child.id, child.revision));
  nlohmann::json out = nlohmann::json::object();
  for (const StepRecord& s : steps) {
    if (s.state != StepState::kSucceeded || s.path != s.step_id) continue;
    out[s.step_id] = s.output;
  }
  return out;
}

}  // namespace

absl::StatusOr<ChildConfig> ParseChildConfig(const nlohmann::json& config) {
  ChildConfig out;
  if (!config.is_object()) {
    return absl::InvalidArgumentError("a run step needs `workflow:` (a catalog workflow's name)");
  }
  for (const auto& [key, value] : config.items()) {
    if (key != "workflow" && key != "version" && key != "inputs") {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown key '", key, "' for a run step; allowed: workflow, version, inputs"));
    }
  }
  auto workflow = config.find("workflow");
  if (workflow == config.end()) {
    return absl::InvalidArgumentError(
        "a run step needs `workflow:` (the name of a workflow in the catalog, e.g. workflow: "
        "summarize)");
  }
  if (!workflow->is_string() || !workflow_internal::IsWorkflowName(workflow->get<std::string>())) {
    return absl::InvalidArgumentError(
        absl::StrCat("workflow: ", workflow->dump(),
                     " is not a workflow name: [a-z][a-z0-9_-]*, as in the child's `name:`"));
  }
  out.workflow = workflow->get<std::string>();
  if (auto v = config.find("version"); v != config.end()) {
    if (!v->is_number_integer() || v->get<int64_t>() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "version: ", v->dump(), " is not a version: a whole number, 0 (the latest) or more"));
    }
    out.version = v->get<int64_t>();
  }
  if (auto in = config.find("inputs"); in != config.end()) {
    if (!in->is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("inputs: must be a mapping of the child's inputs, not ", in->type_name()));
    }
    out.inputs = *in;
  }
  return out;
}

absl::Status ValidateChildStep(const Workflow& wf, const StepDef& step, bool in_parallel) {
  RUNLOOM_RETURN_IF_ERROR(CheckParksOutsideParallel(wf, step, in_parallel));
  if (step.timeout.has_value()) {
    return StepConfigError(
        wf, step, "a run step takes no timeout: put timeouts on the child workflow's steps");
  }
  absl::StatusOr<ChildConfig> c = ParseChildConfig(step.config);
  if (!c.ok()) return StepConfigError(wf, step, std::string(c.status().message()));
  return absl::OkStatus();
}

std::string ChildKey(const std::string& parent_run_id, int64_t revision, const std::string& path,
                     int attempt) {
  return absl::StrCat("child:", parent_run_id, ":", revision, ":", path, "#", attempt);
}

ChildEnd EndOf(const RunRecord& child) {
  return ChildEnd{.run_id = child.id, .parent_run_id = child.parent_run_id, .status = child.status};
}

absl::Status NotifyParentOfEnd(SignalStore& store, const ChildEnd& child) {
  if (child.parent_run_id.empty() || !IsTerminal(child.status)) return absl::OkStatus();
  NewSignal n;
  n.run_id = child.parent_run_id;
  n.name = ChildSignalName(child.run_id);
  n.payload = {{"child_run_id", child.run_id}, {"status", std::string(ToString(child.status))}};
  n.idempotency_key = absl::StrCat("child-end:", child.run_id);
  n.events.push_back(SignalReceivedEvent(
      child.parent_run_id, {.name = n.name, .idempotency_key = n.idempotency_key, .by = "runloom"}));
  n.wake_events.push_back(RunResumedEvent(
      child.parent_run_id,
      {.reason = absl::StrCat("child run ", child.run_id, " ended ",
                              std::string(ToString(child.status)))}));
  absl::StatusOr<SendSignalResult> sent = store.SendSignal(n);
  // A parent already finished takes no signal, and needs none.
  if (!sent.ok() && sent.status().code() != absl::StatusCode::kFailedPrecondition) {
    return sent.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<StepResult> RunExecution::RunChild(const StepDef& step, const std::string& path,
                                                  Scope& scope) {
  const absl::Time started = config_.clock->Now();
  auto fail = [&](int attempt, const std::string& error, ErrorClass cls,
                  std::optional<SignalConsumption> consume =
                      std::nullopt) -> absl::StatusOr<StepResult> {
    StepResult failed;
    failed.state = StepState::kFailed;
    failed.error = error;
    failed.error_class = cls;
    RUNLOOM_RETURN_IF_ERROR(Record(
        step, path, failed, attempt, started, "",
        {events::StepFailed(run_.id, path, step.id, attempt, error, cls, false, std::nullopt)},
        std::move(consume)));
    return failed;
  };
  // Refused at load time; a stored definition that fails now fails the step.
  absl::StatusOr<nlohmann::json> resolved =
      ResolveTemplates(step.config, [&](const std::string& ref) { return Resolve(ref, scope); });
  absl::StatusOr<ChildConfig> config =
      resolved.ok() ? ParseChildConfig(*resolved) : absl::StatusOr<ChildConfig>(resolved.status());
  if (!config.ok()) return fail(1, std::string(config.status().message()), ErrorClass::kInvalid);
  const RunContext context = ContextOf(run_);
  const int depth = context.parent.has_value() ? context.parent->depth + 1 : 1;
  if (depth > kMaxChildDepth) {
    return fail(1,
                absl::StrCat("run step: a child here would be ", depth,
                             " levels deep; the limit is ", kMaxChildDepth,
                             " (does the workflow start itself?)"),
                ErrorClass::kInvalid);
  }
  if (!config_.start_child) {
    return fail(1, "run step: this engine cannot start child runs", ErrorClass::kInvalid);
  }
  Store& store = *config_.store;
  // Carved from this run's budget: a child may spend at most what is left.
  ChildLink link{.parent_run_id = run_.id, .step_path = path, .revision = run_.revision,
                 .depth = depth};
  if (absl::StatusOr<RunBudget> mine = store.GetRunBudget(run_.id); mine.ok()) {
    link.budget_cap_micros = mine->figures.left_micros();
  } else if (mine.status().code() != absl::StatusCode::kNotFound) {
    return mine.status();
  } else if (context.budget.has_value()) {
    link.budget_cap_micros = context.budget->limit_micros;  // nothing spent yet
  }
  // Attempt k's child is admitted under its own key, so a retry starts a new
  // child and a resumed parent finds each child it started: walk the
  // attempts from the first, each admission returning the child already
  // there, until one is not finished (wait for it) or the step's result is
  // known.
  // The attempt before this one failed and is retried: its step.failed and
  // its end signal (if still in the mailbox), written with the first
  // admission of the child that retries it, so an execution that walks past
  // that attempt again writes its event no second time.
  std::optional<Event> retried;
  std::optional<SignalConsumption> retried_consume;
  for (int attempt = 1;; ++attempt) {
    ChildStart req{.workflow = config->workflow,
                   .version = config->version,
                   .inputs = config->inputs,
                   .idempotency_key = ChildKey(run_.id, run_.revision, path, attempt),
                   .working_dir = context.working_dir,
                   .link = link,
                   .traceparent = config_.spans != nullptr ? TraceParentOf(RunTraceOf(run_)) : ""};
    if (RUNLOOM_INJECTED_BUG(InjectedBug::kChildKeyPerExecution)) {
      absl::StrAppend(&req.idempotency_key, "@", run_.attempts, "-", run_.last_event_seq);
    }
    // A child an earlier execution admitted is returned by its key, even
    // when the budget preflight would refuse a new one (Admission::StartRun).
    absl::StatusOr<CreateRunResult> admitted = config_.start_child(req);
    if (!admitted.ok()) {
      const absl::StatusCode code = admitted.status().code();
      if (code == absl::StatusCode::kNotFound || code == absl::StatusCode::kInvalidArgument ||
          code == absl::StatusCode::kFailedPrecondition ||
          code == absl::StatusCode::kResourceExhausted) {
        return fail(attempt,
                    absl::StrCat("run step: child of workflow ", config->workflow,
                                 " not started: ", admitted.status().message()),
                    code == absl::StatusCode::kResourceExhausted ? ErrorClass::kRateLimited
                                                                 : ErrorClass::kInvalid,
                    std::move(retried_consume));
      }
      return admitted.status();  // the store: the lease expiry retries the run
    }
    if ((admitted->created && retried.has_value()) || retried_consume.has_value()) {
      RunWrite w;
      w.consume_signal = std::move(retried_consume);
      if (admitted->created && retried.has_value()) w.events.push_back(*std::move(retried));
      RUNLOOM_RETURN_IF_ERROR(Write(std::move(w)));
    }
    retried.reset();
    retried_consume.reset();
    if (attempt == 1 || admitted->created) {
      RUNLOOM_RETURN_IF_ERROR(WriteStepStarted(step, path, attempt));
    }
    const std::string child_id = admitted->run.id;
    const std::string signal = ChildSignalName(child_id);
    const std::string key = absl::StrCat(WaitKey(run_.revision, path), "#", attempt);
    // The end signal, if it came: consumed with the result (once), so the
    // mailbox keeps nothing of a finished step.
    std::optional<SignalConsumption> consume;
    RUNLOOM_ASSIGN_OR_RETURN(std::optional<SignalRecord> consumed, store.SignalConsumedBy(run_.id, key));
    RunRecord child = admitted->run;
    for (int tries = 0;; ++tries) {
      RUNLOOM_ASSIGN_OR_RETURN(child, store.GetRun(child_id));
      if (!consumed.has_value()) {
        RUNLOOM_ASSIGN_OR_RETURN(std::optional<SignalRecord> next, store.NextSignal(run_.id, signal));
        if (next.has_value()) consume = SignalConsumption{.seq = next->seq, .key = key};
      }
      if (IsTerminal(child.status)) break;
      if (tries >= kChildParkTries) {
        return absl::UnavailableError(absl::StrCat(
            "run step at ", path, ": child ", child_id, " kept ending while the parent parked"));
      }
      // Not finished: park until its end signal, or the poll timer.
      RUNLOOM_ASSIGN_OR_RETURN(const absl::Time now, store.Now());
      const absl::Duration poll =
          std::clamp((now - child.created_at) / 10, absl::Seconds(5), kChildPoll);
      RunWrite w;
      w.new_status = RunStatus::kWaiting;
      w.wait_for_signal = SignalWait{.signal = signal, .key = key};
      w.wake_at = now + poll;
      w.events.push_back(RunWaitingEvent(
          run_.id, {.step_path = path, .for_what = "child", .child_run_id = child_id}));
      absl::Status s = Write(std::move(w));
      if (s.ok()) return ParkedAtStep();
      // kAlreadyExists: the child's end came since the read; read again.
      if (s.code() != absl::StatusCode::kAlreadyExists) return s;
    }
    if (child.status == RunStatus::kCompleted) {
      RUNLOOM_ASSIGN_OR_RETURN(nlohmann::json outputs, ChildOutputs(store, child));
      StepResult r;
      r.state = StepState::kSucceeded;
      r.output = {{"run_id", child.id}, {"status", "completed"}, {"outputs", std::move(outputs)}};
      if (r.output.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size() >
          kMaxChildOutputBytes) {
        return fail(attempt,
                    absl::StrCat("run step: child ", child.id, "'s outputs are over ",
                                 kMaxChildOutputBytes, " bytes of JSON"),
                    ErrorClass::kInvalid);
      }
      RUNLOOM_RETURN_IF_ERROR(Record(
          step, path, r, attempt, started, "",
          {events::StepSucceeded(run_.id, path, step.id, attempt,
                                 absl::ToInt64Milliseconds(config_.clock->Now() - started))},
          std::move(consume)));
      return r;
    }
    const std::string error =
        absl::StrCat("child run ", child.id, " ended ", std::string(ToString(child.status)),
                     child.error.empty() ? "" : absl::StrCat(": ", child.error));
    if (ShouldRetry(step.retry, attempt, ErrorClass::kError, false)) {
      // The next attempt starts a new child (see `retried`).
      retried = events::StepFailed(run_.id, path, step.id, attempt, error, ErrorClass::kError,
                                   true, int64_t{0});
      retried_consume = std::move(consume);
      continue;
    }
    StepResult failed;
    failed.state = StepState::kFailed;
    failed.error = error;
    failed.error_class = ErrorClass::kError;
    RUNLOOM_RETURN_IF_ERROR(Record(step, path, failed, attempt, started, "",
                                   {events::StepFailed(run_.id, path, step.id, attempt, error,
                                                       ErrorClass::kError, false, std::nullopt)},
                                   std::move(consume)));
    return failed;
  }
}

}  // namespace runloom::engine_internal
