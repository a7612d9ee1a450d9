// ConfigSetting, StepKindsSetting and ApplyTenantBudgets (commands.h): --config
// and $RUNLOOM_CONFIG.
#include "cli/commands.h"

#include "runloom/config.h"

#include "core/status_macros.h"
#include "llm/config.h"

#include "absl/strings/str_cat.h"

#include <cstdlib>

namespace runloom::cli {
namespace {

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
  for (const auto& [name, tenant] : config->tenants) {
    absl::StatusOr<TenantBudget> set = store.SetTenantBudget(name, tenant.budget_micros);
    if (!set.ok()) {
      return Annotate(set.status(),
                      absl::StrCat("config file '", path, "': tenant '", name, "' budget"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ConfigFile> ConfigSetting(const std::string& flag) {
  // The commands' retention defaults (docs/operations.md "Retention"); the
  // library's own default keeps everything.
  RetentionPolicy defaults;
  defaults.keep_runs = kDefaultKeepRuns;
  defaults.audit_horizon = kDefaultAuditHorizon;
  return LoadConfigFile(ConfigPath(flag), defaults);
}

absl::StatusOr<std::shared_ptr<StepRegistry>> StepKindsSetting(const std::string& flag) {
  RUNLOOM_ASSIGN_OR_RETURN(ConfigFile config, ConfigSetting(flag));
  return std::move(config.kinds);
}

}  // namespace runloom::cli
