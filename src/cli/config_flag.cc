// ConfigSetting, StepKindsSetting and ApplyTenantBudgets (commands.h): --config
// and $RUNLOOM_CONFIG.
#include "cli/commands.h"
#include "core/status_macros.h"
#include "engine/run/secrets.h"
#include "llm/config.h"
#include "llm/configured_registry.h"
#include "llm/llm_concurrency.h"
#include "steps/builtin_steps.h"

#include "absl/strings/str_cat.h"

#include <cstdlib>
#include <map>
#include <set>

namespace runloom::cli {
namespace {

// One adaptive cap per configured provider, starting from and falling back
// to its `max_concurrency`, and the built-in fake provider's.
std::shared_ptr<LlmConcurrency> CapsFor(const LlmConfig& config,
                                        const LlmProviderRegistry& providers) {
  auto caps = std::make_shared<LlmConcurrency>();
  std::set<std::string> capped;
  for (const auto& [alias, model] : config.models) {
    absl::StatusOr<ModelRoute> route = providers.Route(alias);
    if (!route.ok() || route->provider == nullptr) continue;
    if (!capped.insert(model.provider).second) continue;
    caps->Add(
        model.provider, route->provider.get(),
        ConcurrencyOptions{.static_cap = config.providers.at(model.provider).max_concurrency});
  }
  if (!config.models.contains("fake")) {
    absl::StatusOr<std::shared_ptr<LlmProvider>> fake = providers.Resolve("fake");
    if (fake.ok() && capped.insert("fake").second) {
      caps->Add("fake", fake->get(), ConcurrencyOptions{.static_cap = kFakeStaticCap});
    }
  }
  return caps;
}

// Each configured tenant's budget limit, in micro-units.
std::map<std::string, int64_t> BudgetsOf(const LlmConfig& config) {
  std::map<std::string, int64_t> out;
  for (const auto& [name, tenant] : config.tenants) out[name] = tenant.budget_micros;
  return out;
}

// The configuration file's path: `flag`, else $RUNLOOM_CONFIG, else "".
std::string ConfigPath(const std::string& flag) {
  if (!flag.empty()) return flag;
  const char* env = std::getenv("RUNLOOM_CONFIG");
  return env != nullptr ? env : "";
}

}  // namespace

absl::Status ApplyTenantBudgets(const std::string& flag, BudgetStore& store) {
  const std::string path = ConfigPath(flag);
  if (path.empty()) return absl::OkStatus();
  absl::StatusOr<LlmConfig> config = LoadLlmConfigFile(path);
  if (!config.ok()) return config.status();
  for (const auto& [name, limit] : BudgetsOf(*config)) {
    absl::StatusOr<TenantBudget> set = store.SetTenantBudget(name, limit);
    if (!set.ok()) {
      return Annotate(set.status(),
                      absl::StrCat("config file '", path, "': tenant '", name, "' budget"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ConfigSettings> ConfigSetting(const std::string& flag) {
  ConfigSettings out{.kinds = StepRegistry::WithBuiltins()};
  // The commands' retention defaults (docs/operations.md "Retention"); the
  // library's own default keeps everything.
  out.retention.keep_runs = kDefaultKeepRuns;
  out.retention.audit_horizon = kDefaultAuditHorizon;
  const std::string path = ConfigPath(flag);
  if (path.empty()) return out;  // the fake provider alone, no budgets
  absl::StatusOr<LlmConfig> config = LoadLlmConfigFile(path);
  if (!config.ok()) return config.status();
  // Keys are resolved at call time, by whichever process makes the call.
  absl::StatusOr<std::shared_ptr<LlmProviderRegistry>> providers =
      NewConfiguredRegistry(*config, &engine_internal::ResolveSecret);
  if (!providers.ok()) {
    return Annotate(providers.status(), absl::StrCat("config file '", path, "'"));
  }
  std::shared_ptr<LlmConcurrency> caps = CapsFor(*config, **providers);
  out.kinds->Register("llm", NewLlmStep(*std::move(providers), std::move(caps)));
  out.tenant_budgets = BudgetsOf(*config);
  out.step_timeouts = config->step_timeouts;
  if (config->keep_runs.has_value()) out.retention.keep_runs = *config->keep_runs;
  if (config->audit_horizon.has_value()) out.retention.audit_horizon = *config->audit_horizon;
  out.retention.keep_runs_by_workflow = config->keep_runs_by_workflow;
  return out;
}

absl::StatusOr<std::shared_ptr<StepRegistry>> StepKindsSetting(const std::string& flag) {
  RUNLOOM_ASSIGN_OR_RETURN(ConfigSettings settings, ConfigSetting(flag));
  return std::move(settings.kinds);
}

}  // namespace runloom::cli
