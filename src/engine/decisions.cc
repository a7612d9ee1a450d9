// Human and operator actions on runs: decisions at approval gates, reruns
// from a phase, cancel, admin reset. Each is one compare-and-set on the run
// (Store::Commit) by its named party; see the transition table.
#include "engine/decisions.h"

#include "runloom/gate.h"

#include "core/injected_bug.h"
#include "core/status_macros.h"
#include "engine/rules/run_context.h"
#include "engine/rules/step_paths.h"
#include "engine/run/event_helpers.h"
#include "engine/run/signal_wait.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

#include <algorithm>
#include <map>

namespace runloom::engine_internal {

// Step records of `run`'s current revision that a new revision starting at
// `phase` keeps: those of top-level steps declared before the phase.
absl::StatusOr<std::vector<StepRecord>> CarriedRecords(const DecisionContext& ctx,
                                                       const RunRecord& run, const Workflow& wf,
                                                       int phase_index, int64_t new_revision) {
  RUNLOOM_ASSIGN_OR_RETURN(std::vector<StepRecord> records,
                           ctx.store->ListSteps(run.id, run.revision));
  std::map<std::string, int> index;
  for (size_t i = 0; i < wf.steps.size(); ++i) index[wf.steps[i].id] = static_cast<int>(i);
  std::vector<StepRecord> carried;
  for (StepRecord& r : records) {
    auto it = index.find(TopLevelId(r.path));
    if (it == index.end() || it->second >= phase_index) continue;
    r.revision = new_revision;
    carried.push_back(std::move(r));
  }
  return carried;
}

namespace {

// A JSON value's type as a user names it (all numbers alike).
absl::string_view JsonShape(const nlohmann::json& v) {
  if (v.is_object()) return "object";
  if (v.is_array()) return "array";
  if (v.is_string()) return "string";
  if (v.is_number()) return "number";
  if (v.is_boolean()) return "boolean";
  return "null";
}

// The gate's output once decided: what the next execution reads as its
// step record (the edited proposal for `edit`).
absl::StatusOr<nlohmann::json> DecisionOutput(const PendingGate& gate, const DecisionRequest& req,
                                              const std::string& reviewer) {
  nlohmann::json output = {{"decision", ToString(*req.decision)},
                           {"proposal", gate.proposal},
                           {"proposal_digest", gate.proposal_digest},
                           {"reviewer", reviewer},
                           {"feedback", req.feedback}};
  if (req.decision == Decision::kEdit) {
    if (req.edited_proposal.is_null()) {
      return absl::InvalidArgumentError("decision 'edit' needs the edited proposal");
    }
    // Later steps template the proposal's fields; another shape would
    // render them as "null".
    if (JsonShape(req.edited_proposal) != JsonShape(gate.proposal)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the edited proposal is a JSON ", JsonShape(req.edited_proposal),
                       " but the proposal at ", gate.step_path, " is a JSON ",
                       JsonShape(gate.proposal), "; edit it as a ", JsonShape(gate.proposal)));
    }
    output["proposal"] = req.edited_proposal;
  }
  return output;
}

// The decided gate's step record in `run`'s current revision.
StepRecord GateRecord(const RunRecord& run, const PendingGate& gate, nlohmann::json output,
                      absl::Time now) {
  StepRecord gate_record;
  gate_record.run_id = run.id;
  gate_record.revision = run.revision;
  gate_record.path = gate.step_path;
  gate_record.step_id = gate.step_id;
  gate_record.kind = "approval";
  gate_record.phase = gate.phase;
  gate_record.state = StepState::kSucceeded;
  gate_record.output = std::move(output);
  gate_record.started_at = run.updated_at;
  gate_record.finished_at = now;
  return gate_record;
}

}  // namespace

// One compare-and-set built in order (checks, the gate's record, a new
// revision for request_revision); a little over 80 lines, kept whole.
absl::StatusOr<RunRecord> DecideRun(const DecisionContext& ctx, const std::string& run_id,
                                    const DecisionRequest& req, const std::string& reviewer) {
  if (reviewer.empty()) {
    return absl::InvalidArgumentError("a decision needs an authenticated reviewer identity");
  }
  if (!req.decision.has_value()) {
    return absl::InvalidArgumentError(
        "a decision request names no decision: approve, edit, reject or request_revision");
  }
  const std::string decision(ToString(*req.decision));
  RUNLOOM_ASSIGN_OR_RETURN(RunRecord run, ctx.store->GetRun(run_id));
  absl::StatusOr<PendingGate> pending = PendingGateOf(run);
  if (run.status != RunStatus::kPaused || absl::IsNotFound(pending.status())) {
    return absl::FailedPreconditionError(
        absl::StrCat("run ", run_id, " is ", std::string(ToString(run.status)),
                     ", not paused at an approval gate; nothing was recorded"));
  }
  RUNLOOM_RETURN_IF_ERROR(pending.status());
  const PendingGate gate = *std::move(pending);
  const std::string& digest = gate.proposal_digest;
  if (req.proposal_digest != digest && !RUNLOOM_INJECTED_BUG(InjectedBug::kDecisionIgnoresDigest)) {
    // The current digest is not in the message: a script that could copy it
    // from here would decide without reading the proposal.
    return absl::AbortedError(absl::StrCat(
        "proposal digest '", req.proposal_digest, "' is not the current proposal's at ",
        gate.step_path, "; review the current proposal and its digest with `runloom status ",
        run_id, "`; nothing was recorded"));
  }
  if (!gate.Allows(decision)) {
    return absl::InvalidArgumentError(
        absl::StrCat("decision '", decision, "' is not allowed at ", gate.step_path,
                     "; allowed: ", nlohmann::json(gate.allowed_decisions).dump()));
  }
  RUNLOOM_ASSIGN_OR_RETURN(nlohmann::json output, DecisionOutput(gate, req, reviewer));
  // The revision a write after the gate names as its decision's, carried
  // with the record into later revisions (WriteKey::decision).
  output["decided_in_revision"] = run.revision;
  RunWrite w;
  w.run_id = run_id;
  w.party = Party::kDecision;
  w.expected = {RunStatus::kPaused};
  w.expected_last_event_seq = run.last_event_seq;
  w.new_status = RunStatus::kQueued;
  w.reset_attempts = true;
  w.entry = RunEntry::kResume;  // the same revision goes on after the gate
  RunContext context = ContextOf(run);
  context.pending_gate = nullptr;
  int64_t revision = run.revision;
  std::string rerun_from;
  const StepRecord gate_record = GateRecord(run, gate, std::move(output), ctx.clock->Now());
  w.steps.push_back(gate_record);
  if (req.decision == Decision::kRequestRevision) {
    RUNLOOM_ASSIGN_OR_RETURN(std::shared_ptr<const Workflow> wf, ctx.load_pinned(run));
    rerun_from = req.from_phase.empty() ? gate.revision_phase : req.from_phase;
    if (rerun_from.empty()) {
      return absl::InvalidArgumentError(
          "request_revision needs a phase to rerun from (--from PHASE), and the gate names none");
    }
    int phase_index = FirstStepOfPhase(*wf, rerun_from);
    int gate_index = -1;
    for (size_t i = 0; i < wf->steps.size(); ++i) {
      if (wf->steps[i].id == TopLevelId(gate_record.path)) {
        gate_index = static_cast<int>(i);
      }
    }
    if (phase_index < 0 || phase_index > gate_index) {
      return absl::InvalidArgumentError(absl::StrCat(
          "phase '", rerun_from, "' is not a phase at or before the gate ", gate_record.path));
    }
    revision = run.revision + 1;
    RUNLOOM_ASSIGN_OR_RETURN(std::vector<StepRecord> carried,
                             CarriedRecords(ctx, run, *wf, phase_index, revision));
    for (StepRecord& r : carried) w.steps.push_back(std::move(r));
    w.revision = revision;
    w.entry = RunEntry::kRevision;
    context.feedback = req.feedback;
    context.rerun_from = rerun_from;
    w.outcome = "";
    w.error = "";
  }
  w.context = EncodeRunContext(context);
  w.events.push_back(RunDecidedEvent(run_id, {.step_path = gate_record.path,
                                              .decision = decision,
                                              .reviewer = reviewer,
                                              .proposal_digest = digest,
                                              .feedback = req.feedback,
                                              .rerun_from = rerun_from,
                                              .revision = revision}));
  absl::Status s = ctx.store->Commit(w);
  if (s.code() == absl::StatusCode::kAborted) {
    return absl::AbortedError(absl::StrCat(
        "run ", run_id, " changed while deciding (another decision won); nothing was recorded"));
  }
  RUNLOOM_RETURN_IF_ERROR(s);
  return ctx.store->GetRun(run_id);
}

absl::StatusOr<RunRecord> RerunRun(const DecisionContext& ctx, const std::string& run_id,
                                   const std::string& phase, const std::string& feedback,
                                   const std::string& by) {
  RUNLOOM_ASSIGN_OR_RETURN(RunRecord run, ctx.store->GetRun(run_id));
  if (!IsTerminal(run.status) && run.status != RunStatus::kPaused &&
      run.status != RunStatus::kWaiting) {
    return absl::FailedPreconditionError(
        absl::StrCat("run ", run_id, " is ", std::string(ToString(run.status)),
                     "; rerun a finished, paused or waiting run (cancel it first)"));
  }
  if (run.status == RunStatus::kCancelled) {
    return absl::FailedPreconditionError(
        absl::StrCat("run ", run_id, " was cancelled; start a new run instead"));
  }
  RUNLOOM_ASSIGN_OR_RETURN(std::shared_ptr<const Workflow> wf, ctx.load_pinned(run));
  int phase_index = FirstStepOfPhase(*wf, phase);
  if (phase_index < 0) {
    std::vector<std::string> phases;
    for (const StepDef& s : wf->steps) {
      if (!s.phase.empty() && std::find(phases.begin(), phases.end(), s.phase) == phases.end()) {
        phases.push_back(s.phase);
      }
    }
    return absl::InvalidArgumentError(absl::StrCat("workflow ", wf->name, " has no phase '", phase,
                                                   "'; phases: ", absl::StrJoin(phases, ", ")));
  }
  const int64_t revision = run.revision + 1;
  RunWrite w;
  w.run_id = run_id;
  w.party = Party::kRerun;
  w.expected = {run.status};
  w.expected_last_event_seq = run.last_event_seq;
  w.new_status = RunStatus::kQueued;
  w.reset_attempts = true;
  // A cancel request belongs to the execution it was made for: one that
  // ended first (completed before it saw the request) must not cancel the
  // new revision (tests/model/run_protocol.pml, MUTANT_RERUN_KEEPS_CANCEL).
  w.cancel_requested = RUNLOOM_INJECTED_BUG(InjectedBug::kRerunKeepsCancel) && run.cancel_requested;
  RUNLOOM_ASSIGN_OR_RETURN(w.steps, CarriedRecords(ctx, run, *wf, phase_index, revision));
  w.revision = revision;
  w.entry = RunEntry::kRerun;
  RunContext context = ContextOf(run);
  context.pending_gate = nullptr;
  context.feedback = feedback;
  context.rerun_from = phase;
  w.context = EncodeRunContext(context);
  w.outcome = "";
  w.error = "";
  w.events.push_back(RunRerunRequestedEvent(
      run_id, {.from_phase = phase, .revision = revision, .by = by, .feedback = feedback}));
  absl::Status s = ctx.store->Commit(w);
  if (s.code() == absl::StatusCode::kAborted) {
    return absl::AbortedError(absl::StrCat("run ", run_id, " changed meanwhile; try again"));
  }
  RUNLOOM_RETURN_IF_ERROR(s);
  return ctx.store->GetRun(run_id);
}

absl::StatusOr<RunRecord> CancelRun(const DecisionContext& ctx, const std::string& run_id,
                                    const std::string& by) {
  RUNLOOM_ASSIGN_OR_RETURN(RunRecord run, ctx.store->GetRun(run_id));
  if (IsTerminal(run.status)) {
    return absl::FailedPreconditionError(
        absl::StrCat("run ", run_id, " is already ", std::string(ToString(run.status))));
  }
  RunWrite w;
  w.run_id = run_id;
  w.party = Party::kCancel;
  w.expected = {run.status};
  w.events.push_back(RunCancelRequestedEvent(run_id, {.by = by}));
  if (run.status == RunStatus::kRunning) {
    // The executor holds the lease: ask it to stop. It sees the flag within
    // EngineOptions::cancel_check (CancelWatch), on its next renewal, or at
    // its next step start, which the store refuses.
    w.cancel_requested = true;
  } else {
    w.new_status = RunStatus::kCancelled;
    w.outcome = "";
    w.error = absl::StrCat("cancelled by ", by);
    w.events.push_back(events::RunFinished(run_id, RunStatus::kCancelled, "", *w.error));
  }
  absl::Status s = ctx.store->Commit(w);
  if (s.code() == absl::StatusCode::kAborted) {
    return absl::AbortedError(absl::StrCat("run ", run_id, " changed meanwhile; try again"));
  }
  RUNLOOM_RETURN_IF_ERROR(s);
  RUNLOOM_ASSIGN_OR_RETURN(RunRecord after, ctx.store->GetRun(run_id));
  if (ctx.on_finished && after.status == RunStatus::kCancelled) ctx.on_finished(after);
  return after;
}

absl::StatusOr<SendSignalResult> SendRunSignal(const DecisionContext& ctx, const std::string& run_id,
                                               const SignalRequest& request, const std::string& by) {
  RUNLOOM_ASSIGN_OR_RETURN(RunRecord run, ctx.store->GetRun(run_id));
  // A finished run takes no signal; with an idempotency key the store says
  // so, unless the key names a signal kept before the run finished: a
  // sender retrying a send whose answer it lost gets that signal again.
  if (IsTerminal(run.status) && request.idempotency_key.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "run ", run_id, " is ", std::string(ToString(run.status)), ": a finished run takes no signals"));
  }
  RUNLOOM_ASSIGN_OR_RETURN(std::shared_ptr<const Workflow> wf, ctx.load_pinned(run));
  RUNLOOM_RETURN_IF_ERROR(
      CheckSignal(*wf, request.name, request.payload, request.idempotency_key));
  NewSignal n;
  n.run_id = run_id;
  n.name = request.name;
  n.payload = request.payload;
  n.idempotency_key = request.idempotency_key;
  n.events.push_back(SignalReceivedEvent(
      run_id, {.name = request.name, .idempotency_key = request.idempotency_key, .by = by}));
  n.wake_events.push_back(
      RunResumedEvent(run_id, {.reason = absl::StrCat("signal ", request.name, " arrived")}));
  return ctx.store->SendSignal(n);
}

absl::StatusOr<int> ResetAllRuns(const DecisionContext& ctx, const std::string& by) {
  int cancelled = 0;
  for (RunStatus st :
       {RunStatus::kQueued, RunStatus::kRunning, RunStatus::kPaused, RunStatus::kWaiting}) {
    while (true) {
      RunFilter f;
      f.status = st;
      f.limit = 500;
      RUNLOOM_ASSIGN_OR_RETURN(std::vector<RunRecord> runs, ctx.store->ListRuns(f));
      int acted = 0;
      for (const RunRecord& r : runs) {
        RunWrite w;
        w.run_id = r.id;
        w.party = Party::kAdmin;
        w.expected = {st};
        w.new_status = RunStatus::kCancelled;
        w.error = absl::StrCat("admin reset by ", by);
        w.events.push_back(events::RunFinished(r.id, RunStatus::kCancelled, "", *w.error));
        absl::Status s = ctx.store->Commit(w);
        if (s.ok() && st == RunStatus::kRunning) {
          // Its executor no longer holds it: the run's open reservations are
          // released now, charged (a call still in flight settles its real
          // cost in place of the charge), or a crash of that executor would
          // keep them reserved for good (found by the simulation,
          // tests/regressions/).
          absl::Status released = ctx.store->ReleaseReservations(r.id).status();
          if (!released.ok()) {
            return absl::Status(
                released.code(),
                absl::StrCat("admin reset cancelled run ", r.id,
                             " but releasing its budget reservations failed (", released.message(),
                             "); they stay reserved, and the reset stopped"));
          }
        }
        if (s.ok()) {
          ++acted;
          if (ctx.on_finished) {
            RunRecord done = r;
            done.status = RunStatus::kCancelled;
            done.error = *w.error;
            ctx.on_finished(done);
          }
        } else if (s.code() != absl::StatusCode::kAborted) {
          return s;
        }
      }
      cancelled += acted;
      if (runs.empty() || acted == 0) break;
    }
  }
  return cancelled;
}

}  // namespace runloom::engine_internal
