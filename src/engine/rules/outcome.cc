#include "engine/rules/outcome.h"

#include "absl/strings/str_cat.h"

namespace runloom::engine_internal {

RunOutcome ResolveOutcome(bool graph_failed, const std::string& graph_error,
                          const std::optional<absl::StatusOr<nlohmann::json>>& resolved) {
  // No `outcome:` (workflow-yaml.md): the status alone; a completed run has
  // no outcome to show ("completed", not "completed (outcome approved)").
  if (!resolved.has_value() && !graph_failed) return {RunStatus::kCompleted, "", ""};
  std::string outcome = graph_failed ? "failed" : "approved";
  std::string error = graph_error;
  if (resolved.has_value()) {
    const absl::StatusOr<nlohmann::json>& v = *resolved;
    if (!v.ok()) {
      outcome = "failed";
      error = absl::StrCat("outcome: ", v.status().message());
    } else if (!v->is_string()) {
      outcome = "failed";
      error = absl::StrCat("outcome: expected a string, got ", v->dump());
    } else {
      outcome = v->get<std::string>();
      if (outcome == "completed") outcome = "approved";
    }
  }
  if (outcome == "approved") return {RunStatus::kCompleted, outcome, ""};
  if (outcome == "rejected") return {RunStatus::kRejected, outcome, error};
  if (outcome == "unresolved") return {RunStatus::kUnresolved, outcome, error};
  if (outcome != "failed") {
    error = absl::StrCat("outcome: '", outcome,
                         "' is not one of approved, completed, rejected, unresolved, failed");
  }
  if (error.empty()) error = "the outcome rule resolved to failed";
  return {RunStatus::kFailed, "failed", error};
}

}  // namespace runloom::engine_internal
