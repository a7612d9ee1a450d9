#include "engine/run/run_budget.h"

#include "runloom/budget_ledger.h"

#include "core/status_macros.h"
#include "engine/observe/stage_events.h"

#include "absl/strings/str_cat.h"

#include <vector>

namespace runloom::engine_internal {
namespace {

bool CallsModels(const std::vector<StepDef>& steps) {
  for (const StepDef& s : steps) {
    if (s.kind == "llm" || CallsModels(s.body)) return true;
    for (const Branch& b : s.branches) {
      if (CallsModels(b.steps)) return true;
    }
  }
  return false;
}

}  // namespace

RunBudgetSpec NewRunBudget(const Workflow& wf, const nlohmann::json& inputs,
                           std::optional<int64_t> requested) {
  return RunBudgetSpec{.tenant = RunTenant(wf, inputs),
                       .limit_micros = requested.has_value() ? requested : wf.budget_micros,
                       .calls_models = CallsModels(wf.steps)};
}

std::string RunTenant(const Workflow& wf, const nlohmann::json& inputs) {
  if (!wf.tenant_input.empty()) return StageIdValue(inputs, wf.tenant_input).value_or("");
  if (!wf.stage_events.has_value()) return "";
  return StageIdValue(inputs, wf.stage_events->tenant_id).value_or("");
}

absl::Status Preflight(BudgetStore& store, const RunBudgetSpec& spec) {
  if (spec.tenant.empty()) return absl::OkStatus();
  absl::StatusOr<std::optional<TenantBudget>> row = store.GetTenantBudget(spec.tenant);
  if (!row.ok()) return Annotate(row.status(), "budget preflight");
  if (row->has_value()) {
    const TenantBudget& t = **row;
    const std::optional<int64_t> left = t.figures.left_micros();
    if (!left.has_value()) return absl::OkStatus();
    const std::string figures =
        absl::StrCat("budget preflight: tenant '", t.tenant, "' has ", FormatAmountMicros(*left),
                     " left of ", FormatAmountMicros(*t.figures.limit_micros), " (spent ",
                     FormatAmountMicros(t.figures.spent_micros), ", reserved ",
                     FormatAmountMicros(t.figures.reserved_micros), ")");
    if (spec.limit_micros.has_value()) {
      if (*spec.limit_micros <= *left) return absl::OkStatus();
      return absl::ResourceExhaustedError(absl::StrCat(
          figures, " but this run's budget is ", FormatAmountMicros(*spec.limit_micros),
          "; the run was not created: lower the run's budget or raise the tenant's `budget` in "
          "the config file (see `runloom budgets`)"));
    }
    if (!spec.calls_models || *left > 0) return absl::OkStatus();
    return absl::ResourceExhaustedError(
        absl::StrCat(figures,
                     " and this workflow calls a model; the run was not created: raise the "
                     "tenant's `budget` in the config file (see `runloom budgets`)"));
  }
  return absl::OkStatus();  // no row: the tenant has spent nothing and has no limit stored
}

void PutBudgetSpec(const RunBudgetSpec& spec, RunContext& context) {
  if (spec.tenant.empty() && !spec.limit_micros.has_value()) return;
  context.budget = StoredBudget{.tenant = spec.tenant, .limit_micros = spec.limit_micros};
}

RunBudgetSpec BudgetSpecOf(const RunRecord& run) {
  RunBudgetSpec spec;
  const RunContext context = ContextOf(run);
  if (!context.budget.has_value()) return spec;
  spec.tenant = context.budget->tenant;
  spec.limit_micros = context.budget->limit_micros;
  return spec;
}

}  // namespace runloom::engine_internal
