#include "engine/budgets.h"

#include "runloom/budget_ledger.h"

#include "core/status_macros.h"
#include "engine/stage_events.h"

#include "absl/strings/str_cat.h"

#include <vector>

namespace runloom::engine_internal {
namespace {

constexpr char kContextKey[] = "budget";

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

absl::Status Preflight(Store& store, const RunBudgetSpec& spec) {
  if (spec.tenant.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<TenantBudget>> tenants = store.ListTenantBudgets();
  if (!tenants.ok()) return Annotate(tenants.status(), "budget preflight");
  for (const TenantBudget& t : *tenants) {
    if (t.tenant != spec.tenant) continue;
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

void PutBudgetSpec(const RunBudgetSpec& spec, nlohmann::json& context) {
  if (spec.tenant.empty() && !spec.limit_micros.has_value()) return;
  nlohmann::json b = {{"tenant", spec.tenant}};
  if (spec.limit_micros.has_value()) b["limit_micros"] = *spec.limit_micros;
  context[kContextKey] = std::move(b);
}

RunBudgetSpec BudgetSpecOf(const RunRecord& run) {
  RunBudgetSpec spec;
  auto it = run.context.find(kContextKey);
  if (it == run.context.end() || !it->is_object()) return spec;
  if (auto t = it->find("tenant"); t != it->end() && t->is_string()) {
    spec.tenant = t->get<std::string>();
  }
  if (auto l = it->find("limit_micros"); l != it->end() && l->is_number_integer()) {
    spec.limit_micros = l->get<int64_t>();
  }
  return spec;
}

}  // namespace runloom::engine_internal
