// LoadConfigFile (runloom/config.h): the configuration file as step kinds,
// budgets, timeouts and retention.
#include "runloom/config.h"

#include "core/status_macros.h"
#include "engine/run/secrets.h"
#include "llm/config.h"
#include "llm/configured_registry.h"
#include "llm/llm_concurrency.h"
#include "steps/builtin_steps.h"

#include "absl/strings/str_cat.h"

#include <set>
#include <utility>

namespace runloom {
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

}  // namespace

void ConfigFile::ApplyTo(EngineOptions& options) const {
  options.registry = kinds;
  options.tenant_budgets = tenant_budgets;
  options.step_timeouts = step_timeouts;
  options.retention = retention;
}

absl::StatusOr<ConfigFile> LoadConfigFile(const std::string& path,
                                          const RetentionPolicy& retention_defaults,
                                          SecretLookup resolve_secret) {
  ConfigFile out{.kinds = StepRegistry::WithBuiltins(), .retention = retention_defaults};
  if (path.empty()) return out;  // the fake provider alone, no budgets
  absl::StatusOr<LlmConfig> config = LoadLlmConfigFile(path);
  if (!config.ok()) return config.status();
  if (resolve_secret == nullptr) resolve_secret = &engine_internal::ResolveSecret;
  // Keys are resolved at call time, by whichever process makes the call.
  absl::StatusOr<std::shared_ptr<LlmProviderRegistry>> providers =
      NewConfiguredRegistry(*config, std::move(resolve_secret));
  if (!providers.ok()) {
    return Annotate(providers.status(), absl::StrCat("config file '", path, "'"));
  }
  std::shared_ptr<LlmConcurrency> caps = CapsFor(*config, **providers);
  out.kinds->Register("llm", NewLlmStep(*std::move(providers), std::move(caps)));
  for (const auto& [name, tenant] : config->tenants) out.tenant_budgets[name] = tenant.budget_micros;
  out.step_timeouts = config->step_timeouts;
  if (config->keep_runs.has_value()) out.retention.keep_runs = *config->keep_runs;
  if (config->audit_horizon.has_value()) out.retention.audit_horizon = *config->audit_horizon;
  out.retention.keep_runs_by_workflow = config->keep_runs_by_workflow;
  return out;
}

}  // namespace runloom
