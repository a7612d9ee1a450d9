// The outcome rule: the terminal status a finished graph writes. With no
// `outcome:` template, failed if a step that was not allowed to fail failed,
// else completed with no outcome (""). With one, its value decides: approved or
// completed -> completed, rejected, unresolved, failed; anything else (or a
// template that does not resolve to a string) fails the run and says why.
// A pure function; RunExecution::Run applies it.
//
// Thread-safety: stateless.
#pragma once

#include "runloom/status.h"

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

#include <optional>
#include <string>

namespace runloom::engine_internal {

struct RunOutcome {
  RunStatus status = RunStatus::kCompleted;
  std::string outcome;  // approved | rejected | unresolved | failed; "" with no `outcome:`
  std::string error;    // "" for completed; why, otherwise (may be "" for rejected/unresolved)
};

// `graph_failed`/`graph_error`: whether the walk ended failed, and its first
// error. `resolved`: the workflow's `outcome:` template resolved, or nullopt
// when the workflow has none.
RunOutcome ResolveOutcome(bool graph_failed, const std::string& graph_error,
                          const std::optional<absl::StatusOr<nlohmann::json>>& resolved);

}  // namespace runloom::engine_internal
