// The wiring every command that executes runs shares (commands.h:
// ExecutingFlags, ExecutingEngineOptions).
#include "cli/commands.h"

#include "cli/cli_common.h"
#include "core/status_macros.h"

#include <utility>

namespace runloom::cli {

absl::StatusOr<EngineOptions> ExecutingEngineOptions(EngineOptions base, const ExecutingFlags& f) {
  RUNLOOM_ASSIGN_OR_RETURN(ConfigSettings config, ConfigSetting(f.config));
  base.registry = std::move(config.kinds);
  base.tenant_budgets = std::move(config.tenant_budgets);
  base.step_timeouts = std::move(config.step_timeouts);
  base.retention = std::move(config.retention);
  RUNLOOM_ASSIGN_OR_RETURN(base.stage_events, StageEventsSetting(f.stage_events));
  RUNLOOM_ASSIGN_OR_RETURN(base.park_sleeps_over,
                           PositiveDurationFlag("--park-sleeps-over", f.park_sleeps_over));
  return base;
}

}  // namespace runloom::cli
