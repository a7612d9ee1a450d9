// The agent step on the executor's side (issue 24): which `kind: agent`
// steps are valid, and the llm step each of its model turns runs as.
// RunExecution::RunAgent (agent_step.cc) walks the turns and tool calls.
//
// Thread-safety: stateless functions.
#pragma once

#include "runloom/step.h"
#include "runloom/workflow.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <cstddef>

namespace runloom::engine_internal {

// The largest arguments a tool call may carry (the model's JSON text), and
// how deep they may nest; a call past either is refused, not run.
inline constexpr size_t kMaxToolArgumentBytes = 64 * 1024;
inline constexpr int kMaxToolArgumentDepth = 16;

// The step's `max_turns:` (default kDefaultAgentTurns); kInvalidArgument
// when it is not a whole number from 1 to kMaxAgentTurns.
absl::StatusOr<int> AgentMaxTurns(const StepDef& agent);

// The llm step one model turn of `agent` runs as: the agent's model,
// system, prompt, response_schema (then response_format json), max_tokens,
// fake, retry and timeout.
StepDef AgentTurnStep(const StepDef& agent);

// Checks an agent step's own settings at load time: max_turns, its turns
// as an llm step of `registry`, and each tool's parameters as a JSON
// Schema. The tools' steps are checked by the caller as any other step.
// kInvalidArgument naming the key.
absl::Status ValidateAgentStep(const StepDef& agent, const StepRegistry& registry);

}  // namespace runloom::engine_internal
