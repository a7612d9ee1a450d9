// Template scope: what a `{{ ... }}` reference or a condition sees at one
// point of the graph walk — the run's inputs (secret ones from this process's
// memory), `run.*` (id, revision, entry, feedback, rerun_from), `loop.iteration`,
// and the results of the steps visible there (`steps.<id>.output...`,
// `.status`, `.error`). Scopes nest: a loop body or a parallel branch sees its
// own results first, then its parent's.
//
// Thread-safety: a Scope is owned by the one thread walking that part of the
// graph; ResolveRef only reads.
#pragma once

#include "runloom/run.h"

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

#include <map>
#include <optional>
#include <string>

namespace runloom::engine_internal {

// The state of one step id as seen by templates and trigger rules.
struct StepResult {
  StepState state = StepState::kSucceeded;
  nlohmann::json output;
  std::string error;
  std::optional<ErrorClass> error_class;  // set when failed or skipped
};

// The results visible at one point of the graph.
struct Scope {
  const Scope* parent = nullptr;
  std::map<std::string, StepResult> results;
  int loop_iteration = 0;  // 1-based inside a loop body, 0 outside
  // In an agent's tool step: the call's validated arguments (`args`).
  const nlohmann::json* args = nullptr;
  // The nearest result for step `id`, or nullptr (not run yet at this point).
  const StepResult* Find(const std::string& id) const;
  // The innermost loop's iteration, 0 outside any loop.
  int LoopIteration() const;
  // The innermost tool call's arguments, nullptr outside a tool step.
  const nlohmann::json* Args() const;
};

// The value of reference `ref` ("inputs.topic", "steps.edit.output.ok",
// "run.feedback", "loop.iteration", "args.query") in `scope`, for `run`. `secrets` holds
// the secret inputs given to StartRun in this process (never stored).
// kInvalidArgument for an unknown reference or an input with no value; a step
// not run yet reads as null (its status as "pending"), a missing field as null.
absl::StatusOr<nlohmann::json> ResolveRef(const std::string& ref, const Scope& scope,
                                          const RunRecord& run, const nlohmann::json& secrets);

}  // namespace runloom::engine_internal
