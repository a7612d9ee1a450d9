// runloom's configuration file (docs/operations.md "Configuration file") for
// an engine of one's own: the model providers and aliases it declares, their
// adaptive concurrency caps, tenant budgets, step timeouts and retention:
// what `runloom run`, `worker` and `serve` take from `--config FILE`.
// Linked as runloom::providers (find_package component `providers`): the
// model providers' HTTP clients need libcurl, which the embedded engine
// (runloom::engine_sqlite) does not link.
//
// API keys never pass through here: a provider names its key
// (`api_key: secret://NAME`) and each call resolves it when it is made, by
// `resolve_secret` (default: the engine's own lookup, environment variable
// RUNLOOM_SECRET_NAME, else the RUNLOOM_SECRETS_FILE file; docs/operations.md
// "Secrets"). A resolved key is never written to the store or a log.
//
// Example:
//   RUNLOOM_ASSIGN_OR_RETURN(ConfigFile config, LoadConfigFile("/etc/runloom/runloom.yaml"));
//   config.kinds->Register("enrich", std::make_shared<MyEnrichStep>());
//   EngineOptions options;
//   config.ApplyTo(options);
//   RUNLOOM_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Open(options, backend));
//
// Thread-safety: LoadConfigFile is thread-safe; a ConfigFile is a value
// whose `kinds` registry is shared.
#pragma once

#include "runloom/engine.h"
#include "runloom/retention.h"
#include "runloom/step.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace runloom {

// The value of the secret NAME (an API key), asked for at each model call
// that needs it. kNotFound (naming where it looked) when there is none.
using SecretLookup = std::function<absl::StatusOr<std::string>(const std::string& name)>;

struct ConfigFile {
  // Every built-in step kind (http included) and `llm` with the file's
  // providers, model aliases and caps (the fake provider too, for "fake"
  // and "fake-*" aliases the file does not declare). Register custom kinds
  // here before Engine::Open.
  std::shared_ptr<StepRegistry> kinds;
  // `tenants:` budget limits in micro-units (EngineOptions::tenant_budgets).
  std::map<std::string, int64_t> tenant_budgets;
  // `step_timeouts:` per step kind (EngineOptions::step_timeouts).
  std::map<std::string, absl::Duration> step_timeouts;
  // The file's `retention:` block over LoadConfigFile's defaults.
  RetentionPolicy retention;

  // Sets options.registry, tenant_budgets, step_timeouts and retention.
  void ApplyTo(EngineOptions& options) const;
};

// Reads and checks the configuration file at `path` ("" = no file: the
// built-in kinds with the fake provider alone, no budgets, no timeouts,
// `retention_defaults`). kInvalidArgument naming the file, and the key or
// line, for a file that is not valid; kNotFound for a missing file. Reading
// never resolves a secret. `resolve_secret` nullptr = the engine's lookup
// (above).
absl::StatusOr<ConfigFile> LoadConfigFile(const std::string& path,
                                          const RetentionPolicy& retention_defaults = {},
                                          SecretLookup resolve_secret = nullptr);

}  // namespace runloom
