// Trigger rules: whether a step runs, given the final states of the steps it
// needs (all_success, all_done, none_failed_min_one_success, one_success;
// see TriggerRule in runloom/workflow.h). A pure function; the graph walk
// applies it, then the step's `when:` condition.
//
// Thread-safety: stateless.
#pragma once

#include "runloom/run.h"
#include "runloom/workflow.h"

#include <string>
#include <vector>

namespace runloom::engine_internal {

// The final state of one step that a step needs.
struct Upstream {
  std::string step_id;
  StepState state = StepState::kSucceeded;
};

struct TriggerDecision {
  bool run = true;
  // Why the step is skipped, for step.skipped ("trigger all_success:
  // upstream bad failed"); meaningful only when !run.
  std::string skip_reason;
};

// `upstream`: the needed steps in declaration order (the first one that did
// not succeed is the one a skip reason names).
TriggerDecision EvaluateTrigger(TriggerRule rule, const std::vector<Upstream>& upstream);

}  // namespace runloom::engine_internal
