#include "engine/budgets.h"

#include "core/status_macros.h"
#include "engine/stage_events.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <vector>

namespace runloom::engine_internal {
namespace {

constexpr char kContextKey[] = "budget";
constexpr int64_t kMicrosPerUnit = 1'000'000;

}  // namespace

std::string RunTenant(const Workflow& wf, const nlohmann::json& inputs) {
  if (!wf.stage_events.has_value()) return "";
  return StageIdValue(inputs, wf.stage_events->tenant_id).value_or("");
}

std::string FormatMicros(int64_t micros) {
  const bool negative = micros < 0;
  const uint64_t abs = negative ? 0 - static_cast<uint64_t>(micros) : static_cast<uint64_t>(micros);
  std::string frac = absl::StrFormat("%06d", abs % kMicrosPerUnit);
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  return absl::StrCat(negative ? "-" : "", abs / kMicrosPerUnit, frac.empty() ? "" : ".", frac);
}

absl::Status Preflight(Store& store, const RunBudgetSpec& spec) {
  if (spec.tenant.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<TenantBudget>> tenants = store.ListTenantBudgets();
  if (!tenants.ok()) return Annotate(tenants.status(), "budget preflight");
  for (const TenantBudget& t : *tenants) {
    if (t.tenant != spec.tenant) continue;
    const std::optional<int64_t> left = t.figures.left_micros();
    const int64_t estimate = spec.limit_micros.value_or(0);
    if (!left.has_value() || estimate <= *left) return absl::OkStatus();
    return absl::ResourceExhaustedError(absl::StrCat(
        "budget preflight: tenant '", t.tenant, "' has ", FormatMicros(*left), " left of ",
        FormatMicros(*t.figures.limit_micros), " (spent ", FormatMicros(t.figures.spent_micros),
        ", reserved ", FormatMicros(t.figures.reserved_micros), ") but this run's budget is ",
        FormatMicros(estimate),
        "; the run was not created: lower the run's budget or raise the tenant's `budget` in "
        "the config file (see `runloom budgets`)"));
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
