// The graph walk's pure part: which sibling steps a step depends on, and
// which step runs next. RunExecution (graph_walk.cc) walks a sequence of
// sibling steps with these, applying the trigger rules (trigger_rules.h) and
// `when:` to each, and recurses into loops and parallel branches.
//
// Thread-safety: stateless functions.
#pragma once

#include "runloom/workflow.h"

#include <cstddef>
#include <vector>

namespace runloom::engine_internal {

// For each step, the indexes of the siblings it depends on: its explicit
// `needs:` (even when empty), else the previous sibling. REQUIRES: every
// need names a sibling (validation guarantees it).
std::vector<std::vector<size_t>> StepDependencies(const std::vector<StepDef>& steps);

// The first step in declaration order that is not done and whose
// dependencies all are; deps.size() when there is none.
size_t NextReadyStep(const std::vector<std::vector<size_t>>& deps, const std::vector<bool>& done);

}  // namespace runloom::engine_internal
