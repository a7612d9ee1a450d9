// The runloom configuration file: model providers, model aliases with their
// prices, and tenant budgets (docs/operations.md, "Configuration file").
//
// Given by `--config FILE` (else $RUNLOOM_CONFIG) to the commands that
// execute steps. YAML, read under the same LoadLimits as workflow files (size,
// expanded node count, depth; aliases counted expanded), with every key
// checked: an unknown key, a wrong type or a bad value is kInvalidArgument
// "<file>:<line>: <key path>: <what is wrong>; <how to fix>".
//
//   providers:
//     local:                          # a provider name: [a-z][a-z0-9_-]*
//       kind: openai                  # openai | anthropic | fake
//       base_url: http://127.0.0.1:8000/v1
//       api_key: secret://LOCAL_KEY   # optional; a secret reference, never a value
//       max_concurrency: 8            # static cap on calls in flight
//       connect_timeout: 5s
//       timeout: 60s                  # one whole request
//       retry: {max_attempts: 4, initial_delay: 500ms, max_delay: 20s}
//   models:
//     writer:                         # the alias an llm step names in `model:`
//       provider: local
//       model: qwen2.5-7b-instruct    # the name sent to the provider
//       input_price_per_1k: 0.0005    # price units per 1,000 prompt tokens
//       output_price_per_1k: 0.0015   # per 1,000 completion tokens
//       max_tokens: 1024              # default when the step sets none
//   tenants:
//     acme: {budget: 50}              # price units the tenant may spend
//   step_timeouts:                    # a kind's default timeout for every
//     exec: 2h                        # workflow (a duration, or none)
//   retention:                        # docs/operations.md "Retention"
//     keep_runs: 30d                  # terminal runs older go (a duration, or none)
//     audit_horizon: 90d              # write-ledger rows younger keep their run
//     workflows: {blog: 7d}           # per workflow name, over keep_runs
//
// Prices and budgets are kept as integer micro-units (millionths of the
// price unit, e.g. of a dollar) so that costs add up exactly; a price finer
// than one micro-unit per 1,000 tokens is refused.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include "runloom/limits.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace runloom {

enum class ProviderKind { kOpenAi, kAnthropic, kFake };
std::string ToString(ProviderKind kind);  // "openai", "anthropic", "fake"

// How a provider retries a request answered 429 or 5xx, or that failed to
// connect: up to max_attempts requests in all, waiting the server's
// Retry-After when it sends one (capped at max_delay), else initial_delay
// doubling per retry up to max_delay, with full jitter.
struct ProviderRetry {
  int max_attempts = 3;
  absl::Duration initial_delay = absl::Milliseconds(500);
  absl::Duration max_delay = absl::Seconds(30);
};

struct ProviderConfig {
  std::string name;
  ProviderKind kind = ProviderKind::kFake;
  // Where the API lives, including its version path: requests go to
  // base_url + "/chat/completions" (openai) or base_url + "/messages"
  // (anthropic). Default: https://api.openai.com/v1,
  // https://api.anthropic.com/v1; unused by fake.
  std::string base_url;
  // NAME of the `secret://NAME` reference the API key is read from at call
  // time (see engine/secrets.h); "" = no key is sent (a local server).
  std::string api_key_secret;
  // The static cap on this provider's calls in flight: what the adaptive
  // concurrency controller starts from and falls back to.
  int max_concurrency = 4;
  absl::Duration connect_timeout = absl::Seconds(10);
  absl::Duration timeout = absl::Seconds(120);  // one request, connect to last byte
  ProviderRetry retry;
};

struct ModelConfig {
  std::string alias;
  std::string provider;  // a key of LlmConfig::providers
  std::string model;     // the provider's name for it; default: the alias
  int64_t input_micros_per_1k = 0;
  int64_t output_micros_per_1k = 0;
  std::optional<int64_t> max_tokens;  // default completion cap; nullopt = provider default
};

struct TenantConfig {
  std::string name;
  int64_t budget_micros = 0;  // what the tenant may spend, in micro-units
};

struct LlmConfig {
  std::map<std::string, ProviderConfig> providers;
  std::map<std::string, ModelConfig> models;
  std::map<std::string, TenantConfig> tenants;
  // A step kind's default timeout over its built-in one
  // (EngineOptions::step_timeouts); InfiniteDuration() = `none`.
  std::map<std::string, absl::Duration> step_timeouts;
  // `retention:` (RetentionPolicy, runloom/retention.h): nullopt = not
  // written (the command's default); InfiniteDuration() = `none`.
  std::optional<absl::Duration> keep_runs;
  std::optional<absl::Duration> audit_horizon;
  std::map<std::string, absl::Duration> keep_runs_by_workflow;
};

// The cost of a call in micro-units: for input and for output, tokens times
// the price per 1,000 tokens, each part rounded up to a whole micro-unit.
int64_t CallCostMicros(int64_t input_micros_per_1k, int64_t output_micros_per_1k,
                       int64_t input_tokens, int64_t output_tokens);

// Parses configuration text named `source` in errors. kInvalidArgument as
// described above (and LimitError's wording past `limits`).
absl::StatusOr<LlmConfig> ParseLlmConfig(const std::string& yaml_text, const std::string& source,
                                         const LoadLimits& limits = {});

// Reads and parses the file `path`. kNotFound "config file 'x' not found".
absl::StatusOr<LlmConfig> LoadLlmConfigFile(const std::string& path, const LoadLimits& limits = {});

// Every key the file accepts, as a dotted path with NAME or ALIAS for the
// names a user chooses ("providers.NAME.retry.max_attempts"): the leaves,
// not the mappings that hold them. docs/operations.md lists exactly these
// (LlmConfig.EveryKeyIsDocumentedAndEveryDocumentedKeyIsAccepted).
std::vector<std::string> ConfigFileKeys();

}  // namespace runloom
