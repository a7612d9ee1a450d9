// LLM providers: what the `llm` step kind calls to get a completion.
//
// A model alias (the step's `model:` key) is routed by an LlmProviderRegistry
// to the provider registered for the longest matching alias prefix. Only the
// fake provider ("fake", "fake-*") exists today; real providers (an
// OpenAI-compatible HTTP API) come in a later issue and plug in here.
//
// Thread-safety: LlmProvider::Complete may be called from many threads at once
// and implementations must be thread-safe. LlmProviderRegistry is thread-safe.
#pragma once

#include "runloom/mutex.h"
#include "runloom/step.h"

#include "llm/rate_limit.h"

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace runloom {

// One completion request, with templates already resolved.
struct LlmRequest {
  std::string model;   // the alias as written, e.g. "fake"
  std::string system;  // "" = no system prompt
  std::string prompt;
  bool json_mode = false;             // the caller will parse the reply as a JSON object
  std::optional<int64_t> max_tokens;  // cap on completion tokens; nullopt = provider default
  // Provider-specific options (for the fake provider: the step's `fake:` block).
  nlohmann::json options = nlohmann::json::object();
};

struct LlmUsage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

struct LlmResponse {
  std::string text;   // the raw reply; in json mode, text the caller parses
  std::string model;  // the model that answered
  LlmUsage usage;
  // What the provider's headers said about its limits (llm/rate_limit.h).
  RateLimitTelemetry rate_limit;
};

class LlmProvider {
 public:
  virtual ~LlmProvider() = default;

  // Checks provider-specific options at workflow-load time. Values that are
  // still templates ("{{ ... }}") are accepted unchecked. kInvalidArgument
  // naming the bad key and what is allowed.
  virtual absl::Status ValidateOptions(const nlohmann::json& options) const = 0;

  // Makes one call. Waits only through ctx (ctx.SleepUntil), so a stop request
  // ends the wait. Codes: kCancelled (ctx stopped), kDeadlineExceeded (past
  // ctx.deadline()), kUnavailable (provider down), kResourceExhausted (rate
  // limited, "429"), kInvalidArgument (bad request or options).
  virtual absl::StatusOr<LlmResponse> Complete(StepContext& ctx, const LlmRequest& request) = 0;
};

// Routes model aliases to providers.
class LlmProviderRegistry {
 public:
  LlmProviderRegistry() = default;
  LlmProviderRegistry(const LlmProviderRegistry&) = delete;
  LlmProviderRegistry& operator=(const LlmProviderRegistry&) = delete;

  // Routes every alias equal to `prefix` or starting with it to `provider`
  // (adds or replaces). REQUIRES: prefix not empty, provider not null.
  void Register(const std::string& prefix, std::shared_ptr<LlmProvider> provider);

  // The provider for `model` (longest matching prefix). kInvalidArgument
  // "model 'x' has no provider configured ..." when none matches.
  absl::StatusOr<std::shared_ptr<LlmProvider>> Resolve(const std::string& model) const;

  // A registry routing "fake*" to the fake provider.
  static std::shared_ptr<LlmProviderRegistry> WithFake();

 private:
  mutable runloom::Mutex mu_;
  std::map<std::string, std::shared_ptr<LlmProvider>> providers_ ABSL_GUARDED_BY(mu_);
};

// Rough token count of `text`: whitespace-separated words * 4 / 3, rounded.
int64_t CountTokens(std::string_view text);

}  // namespace runloom
