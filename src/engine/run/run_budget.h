// Budgets at admission: a run's tenant and budget, and the preflight that
// refuses a run its tenant cannot pay for (runloom/budget_ledger.h has the
// ledger; docs/operations.md "Budgets").
//
// A run's tenant is the value of the input its workflow names as `tenant:`,
// or else as `stage_events.tenant_id` (the tenant stage events publish
// under); a workflow with neither has runs without a tenant. A run's own budget comes
// from the start request (StartRunRequest::budget_micros: `runloom run
// --budget`, the HTTP body's `budget`). Both are kept in the run's context
// under "budget" so every executor reserves against the same figures.
//
// Thread-safety: stateless functions.
#pragma once

#include "runloom/run.h"
#include "runloom/store.h"
#include "runloom/workflow.h"

#include "engine/rules/run_context.h"

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace runloom::engine_internal {

// What a run is budgeted against.
struct RunBudgetSpec {
  std::string tenant;                   // "" = none
  std::optional<int64_t> limit_micros;  // the run's own budget; nullopt = none
  bool calls_models = false;            // the workflow has an llm step (preflight only)
};

// The spec of a new run: its tenant, and its budget from the start request
// (`requested`) or else the workflow's `budget:`.
RunBudgetSpec NewRunBudget(const Workflow& wf, const nlohmann::json& inputs,
                           std::optional<int64_t> requested);

// The tenant of a run of `wf` with (frozen) `inputs`; "" when the workflow
// names no tenant input or the run's value is missing or empty.
std::string RunTenant(const Workflow& wf, const nlohmann::json& inputs);

// The preflight: kResourceExhausted, saying what is left and how to fix it,
// when the run's estimated cost is more than its tenant has left. The
// estimate is the run's own budget; a run without one that calls a model
// is refused when its tenant has nothing left (its first call could not
// reserve). OK for a run without a tenant and for a tenant without a limit
// or without a ledger row yet (nothing spent).
absl::Status Preflight(BudgetStore& store, const RunBudgetSpec& spec);

// The run's context with `spec` as its budget (unchanged when spec is
// empty), and the spec read back from a run's context.
void PutBudgetSpec(const RunBudgetSpec& spec, RunContext& context);
RunBudgetSpec BudgetSpecOf(const RunRecord& run);

}  // namespace runloom::engine_internal
