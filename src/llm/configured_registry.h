// The provider registry a configuration file describes (llm/config.h): one
// provider object per configured provider, one route per model alias, and
// the built-in fake provider for "fake" and "fake-*" aliases that the file
// does not declare, so offline examples keep working with any config.
//
// Thread-safety: the returned registry is thread-safe; so are its providers.
#pragma once

#include "llm/config.h"
#include "llm/http_provider.h"
#include "llm/provider.h"

#include "absl/status/statusor.h"

#include <memory>
#include <string>

namespace runloom {

// REQUIRES: `config` came from ParseLlmConfig (every model names a declared
// provider). `resolve_secret` is called for each request that needs an API
// key; it may be empty when no provider has one. kInvalidArgument when a
// provider needs a key and there is no resolver.
absl::StatusOr<std::shared_ptr<LlmProviderRegistry>> NewConfiguredRegistry(
    const LlmConfig& config, SecretResolver resolve_secret);

}  // namespace runloom
