#include "llm/configured_registry.h"

#include "llm/fake_provider.h"
#include "llm/http_provider.h"

#include "absl/strings/str_cat.h"

#include <map>

namespace runloom {

absl::StatusOr<std::shared_ptr<LlmProviderRegistry>> NewConfiguredRegistry(
    const LlmConfig& config, SecretResolver resolve_secret) {
  auto registry = LlmProviderRegistry::WithFake();
  std::map<std::string, std::shared_ptr<LlmProvider>> providers;
  for (const auto& [name, p] : config.providers) {
    if (p.kind == ProviderKind::kFake) {
      providers[name] = NewFakeLlmProvider();
      continue;
    }
    if (!p.api_key_secret.empty() && !resolve_secret) {
      return absl::InvalidArgumentError(absl::StrCat(
          "provider '", name, "' has an api_key but this program resolves no secrets"));
    }
    providers[name] = NewHttpLlmProvider({.config = p, .resolve_secret = resolve_secret});
  }
  for (const auto& [alias, m] : config.models) {
    registry->RegisterModel(alias, {.provider = providers.at(m.provider),
                                    .provider_name = m.provider,
                                    .model = m.model,
                                    .input_micros_per_1k = m.input_micros_per_1k,
                                    .output_micros_per_1k = m.output_micros_per_1k,
                                    .max_tokens = m.max_tokens});
  }
  return registry;
}

}  // namespace runloom
