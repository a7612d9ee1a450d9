// Step paths: how a step inside loops and branches is named
// ("refine[2]/write", "fanout[sec]/scan"), and the phase index a rerun
// starts at.
//
// Thread-safety: stateless functions.
#pragma once

#include "runloom/workflow.h"

#include <string>

namespace runloom::engine_internal {

// "refine[2]/write" style paths: `id` under `prefix` ("" at the top level).
std::string ChildPath(const std::string& prefix, const std::string& id);

// The top-level step id a path belongs to: "refine[2]/write" -> "refine".
std::string TopLevelId(const std::string& path);

// Index of the first top-level step of `phase`, or -1.
int FirstStepOfPhase(const Workflow& wf, const std::string& phase);

// "<file>:<line>: " (or "<file>: ") for messages about `step` of `wf`.
std::string StepLocation(const Workflow& wf, const StepDef& step);

}  // namespace runloom::engine_internal
