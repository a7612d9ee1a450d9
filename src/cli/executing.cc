// The wiring every command that executes runs shares (commands.h:
// ExecutingFlags, ExecutingEngineOptions, OpenExecutingEngine).
#include "cli/commands.h"

#include "cli/cli_common.h"
#include "core/status_macros.h"

#include <utility>

namespace runloom::cli {

absl::StatusOr<EngineOptions> ExecutingEngineOptions(EngineOptions base, const ExecutingFlags& f) {
  RUNLOOM_ASSIGN_OR_RETURN(base.registry, StepKindsSetting(f.config));
  RUNLOOM_ASSIGN_OR_RETURN(base.stage_events, StageEventsSetting(f.stage_events));
  RUNLOOM_ASSIGN_OR_RETURN(base.park_sleeps_over,
                           PositiveDurationFlag("--park-sleeps-over", f.park_sleeps_over));
  return base;
}

absl::StatusOr<std::unique_ptr<Engine>> OpenExecutingEngine(EngineOptions opts, Backend backend,
                                                           const ExecutingFlags& f) {
  RUNLOOM_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                           Engine::Open(std::move(opts), std::move(backend)));
  RUNLOOM_RETURN_IF_ERROR(ApplyTenantBudgets(f.config, *engine->store()));
  return engine;
}

}  // namespace runloom::cli
