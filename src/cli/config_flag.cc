// StepKindsSetting (commands.h): --config and $RUNLOOM_CONFIG.
#include "cli/commands.h"
#include "core/status_macros.h"
#include "engine/secrets.h"
#include "llm/config.h"
#include "llm/configured_registry.h"
#include "steps/builtin_steps.h"

#include "absl/strings/str_cat.h"

#include <cstdlib>

namespace runloom::cli {

absl::StatusOr<std::shared_ptr<StepRegistry>> StepKindsSetting(const std::string& flag) {
  std::shared_ptr<StepRegistry> kinds = StepRegistry::WithBuiltins();
  std::string path = flag;
  if (path.empty()) {
    const char* env = std::getenv("RUNLOOM_CONFIG");
    path = env != nullptr ? env : "";
  }
  if (path.empty()) return kinds;  // the fake provider alone
  absl::StatusOr<LlmConfig> config = LoadLlmConfigFile(path);
  if (!config.ok()) return config.status();
  // Keys are resolved at call time, by whichever process makes the call.
  absl::StatusOr<std::shared_ptr<LlmProviderRegistry>> providers =
      NewConfiguredRegistry(*config, &engine_internal::ResolveSecret);
  if (!providers.ok()) {
    return Annotate(providers.status(), absl::StrCat("config file '", path, "'"));
  }
  kinds->Register("llm", NewLlmStep(*std::move(providers)));
  return kinds;
}

}  // namespace runloom::cli
