// The approval gate, on the executor's side: which `approval` steps are
// valid, the PendingGate (runloom/gate.h) a run pauses with, and when a
// recorded decision ends the run rejected. RunExecution::RunApproval and
// RunExecution::Pause (approval_gate.cc) apply these. The decision itself is
// recorded by DecideRun (decisions.h), as the gate's step record, which the
// next execution reads from the store.
//
// Thread-safety: stateless functions.
#pragma once

#include "runloom/gate.h"
#include "runloom/workflow.h"

#include "engine/rules/template_scope.h"

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

#include <string>

namespace runloom::engine_internal {

// Checks an approval step's config: only proposal, allow, revision_phase,
// title; a proposal; `allow:` a non-empty list of kDecisions;
// `revision_phase:` the phase of a top-level step; not inside a parallel
// branch. kInvalidArgument "<file>:<line>: step '<id>': ...".
absl::Status ValidateApprovalStep(const Workflow& wf, const StepDef& step, bool in_parallel);

// The gate for approval step `step` at `path`, given its resolved proposal.
PendingGate MakePendingGate(const StepDef& step, const std::string& path, nlohmann::json proposal);

// True when `result` is approval step `step`'s recorded decision "reject",
// which ends the run rejected.
bool IsRejection(const StepDef& step, const StepResult& result);

}  // namespace runloom::engine_internal
