// The approval gate on the executor's side (see approval_gate.h): validation,
// building the pending gate, RunExecution::RunApproval and Pause.
#include "engine/run/approval_gate.h"

#include "runloom/write_ledger.h"

#include "core/digest.h"
#include "core/injected_bug.h"
#include "core/status_macros.h"
#include "engine/rules/step_paths.h"
#include "engine/run/event_helpers.h"
#include "engine/run/run_execution.h"
#include "workflow/template.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <string>

namespace runloom::engine_internal {
absl::Status ValidateApprovalStep(const Workflow& wf, const StepDef& step, bool in_parallel) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat(StepLocation(wf, step), "step '", step.id, "': ", what));
  };
  if (in_parallel) {
    return bad("an approval gate cannot sit inside a parallel branch; put it after the join");
  }
  for (const auto& [key, value] : step.config.items()) {
    if (key != "proposal" && key != "allow" && key != "revision_phase" && key != "title") {
      return bad(
          absl::StrCat("unknown key '", key,
                       "' for an approval step; allowed: proposal, allow, revision_phase, title"));
    }
  }
  if (!step.config.contains("proposal")) {
    return bad("an approval step needs `proposal:` (what the reviewer decides on)");
  }
  if (step.config.contains("allow")) {
    const nlohmann::json& allow = step.config["allow"];
    if (!allow.is_array() || allow.empty()) return bad("`allow:` must be a non-empty list");
    for (const nlohmann::json& a : allow) {
      bool known = false;
      for (std::string_view d : kDecisions) {
        known = known || (a.is_string() && a.get<std::string>() == d);
      }
      if (!known) {
        return bad(absl::StrCat("`allow:` has ", a.dump(),
                                "; use approve, edit, reject, request_revision"));
      }
    }
  }
  if (step.config.contains("revision_phase")) {
    const nlohmann::json& p = step.config["revision_phase"];
    if (!p.is_string() || FirstStepOfPhase(wf, p.get<std::string>()) < 0) {
      return bad(
          absl::StrCat("`revision_phase: ", p.dump(), "` is not the phase of any top-level step"));
    }
  }
  return absl::OkStatus();
}

PendingGate MakePendingGate(const StepDef& step, const std::string& path, nlohmann::json proposal) {
  PendingGate gate;
  gate.step_path = path;
  gate.step_id = step.id;
  gate.phase = step.phase;
  gate.proposal_digest = JsonDigest(proposal);
  gate.proposal = std::move(proposal);
  nlohmann::json allow = step.config.value("allow", nlohmann::json::array());
  if (allow.empty()) {
    for (std::string_view d : kDecisions) gate.allowed_decisions.emplace_back(d);
  } else {
    for (const nlohmann::json& a : allow) gate.allowed_decisions.push_back(a.get<std::string>());
  }
  gate.revision_phase = step.config.value("revision_phase", "");
  gate.title = step.config.value("title", step.id);
  return gate;
}

bool IsRejection(const StepDef& step, const StepResult& result) {
  return step.kind == "approval" && result.state == StepState::kSucceeded &&
         result.output.value("decision", "") == "reject";
}

absl::StatusOr<StepResult> RunExecution::RunApproval(const StepDef& step, const std::string& path,
                                                     Scope& scope) {
  // No record for this gate in this revision: resolve the proposal, record it
  // on the run and pause. The decision, when it comes, is written as this
  // gate's step record, which the next execution reads from the store.
  auto proposal = ResolveTemplates(step.config.value("proposal", nlohmann::json(nullptr)),
                                   [&](const std::string& ref) { return Resolve(ref, scope); });
  if (!proposal.ok()) {
    StepResult failed;
    failed.state = StepState::kFailed;
    failed.error = absl::StrCat("proposal: ", proposal.status().message());
    failed.error_class = ErrorClass::kInvalid;
    RUNLOOM_RETURN_IF_ERROR(
        Record(step, path, failed, 1, config_.clock->Now(), "",
               {events::StepFailed(run_.id, path, step.id, 1, failed.error, ErrorClass::kInvalid,
                                   false, std::nullopt)}));
    return failed;
  }
  pending_gate_ = MakePendingGate(step, path, *std::move(proposal));
  halt_ = Halt::kPause;
  StepResult pending;
  pending.state = StepState::kSkipped;  // not recorded; the walk stops here
  return pending;
}

std::string RunExecution::WriteDecisionFor(const std::string& path) const {
  if (RUNLOOM_INJECTED_BUG(InjectedBug::kWriteKeyIgnoresDecision)) return "";
  const std::string top = TopLevelId(path);
  const std::vector<StepDef>& steps = workflow_->steps;
  auto at = std::find_if(steps.begin(), steps.end(), [&](const StepDef& s) { return s.id == top; });
  // Gates are top-level steps (ValidateApprovalStep), and every gate before
  // a running step was decided before this execution began: its record is
  // among those read at the start.
  while (at != steps.begin()) {
    --at;
    if (at->kind != "approval") continue;
    auto rec = records_.find(at->id);
    if (rec == records_.end() || rec->second.state != StepState::kSucceeded) continue;
    const nlohmann::json& out = rec->second.output;
    const std::string decision = out.is_object() ? out.value("decision", "") : "";
    if (decision != "approve" && decision != "edit") continue;
    auto revision = out.find("decided_in_revision");
    return WriteDecision(
        at->id,
        revision != out.end() && revision->is_number_integer() ? revision->get<int64_t>() : 0,
        JsonDigest(out.value("proposal", nlohmann::json(nullptr))));
  }
  return "";
}

Disposition RunExecution::Pause() {
  RunWrite w;
  w.new_status = RunStatus::kPaused;
  w.context = ContextWithPendingGate(run_.context, pending_gate_);
  w.phase = EnterPhase(pending_gate_.phase);  // the run waits in the gate's phase
  w.events.push_back(RunPausedEvent(run_.id, {.step_path = pending_gate_.step_path,
                                              .proposal_digest = pending_gate_.proposal_digest}));
  absl::Status s = Write(std::move(w));
  if (!s.ok()) return WriteFailed("pausing at its approval gate", s);
  ReleaseLeftoverReservations();
  final_status_ = RunStatus::kPaused;
  return Disposition::kPaused;
}

}  // namespace runloom::engine_internal
