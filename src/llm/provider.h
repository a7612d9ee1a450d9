// LLM providers: what the `llm` step kind calls to get a completion.
//
// A model alias (the step's `model:` key) is routed by an LlmProviderRegistry:
// an alias declared in the configuration file (llm/config.h) goes to its
// provider (openai, anthropic or fake) with its model name and prices;
// any other alias goes to the provider registered for the longest matching
// alias prefix (the built-in fake provider: "fake", "fake-*").
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
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace runloom {

// A tool the model may call (an agent step's `tools:`).
struct LlmTool {
  std::string name;
  std::string description;
  nlohmann::json parameters;  // JSON Schema of the arguments
};

// One tool call the model asked for. The arguments are the model's own text:
// untrusted, parsed and checked by the agent step, never by the provider.
struct LlmToolCall {
  std::string id;         // the provider's call id ("call_..", "toolu_.."); may be ""
  std::string name;       // as the model wrote it; may name no tool
  std::string arguments;  // JSON text as the model wrote it
};

// One message after the prompt in an agent's conversation: a model turn
// (role "assistant": its text and tool calls) or the answer to one tool call
// (role "tool": the result's JSON text, or the error the call got).
struct LlmMessage {
  std::string role;  // "assistant" or "tool"
  std::string text;  // assistant: its text; tool: the result or error text
  std::vector<LlmToolCall> tool_calls;  // assistant only
  std::string tool_call_id;             // tool only: LlmToolCall::id answered
  std::string tool_name;                // tool only
  bool is_error = false;                // tool only: the call was refused or failed
};

// One completion request, with templates already resolved.
struct LlmRequest {
  // The provider's name for the model: the configured `model:` of the
  // alias, or the alias itself (e.g. "fake") when it is not configured.
  std::string model;
  std::string system;  // "" = no system prompt
  std::string prompt;
  bool json_mode = false;  // the caller will parse the reply as a JSON object
  // In json mode, the JSON Schema the reply must match (the step's
  // response_schema); providers that can pass it to the API do. The caller
  // checks the reply against it either way.
  std::optional<nlohmann::json> json_schema;
  std::optional<int64_t> max_tokens;  // cap on completion tokens; nullopt = provider default
  // Agent steps: the tools the model may call, and the conversation after
  // the prompt (the earlier turns and the answers to their tool calls).
  // Empty for an `llm` step.
  std::vector<LlmTool> tools;
  std::vector<LlmMessage> history;
  // Provider-specific options (for the fake provider: the step's `fake:` block).
  nlohmann::json options = nlohmann::json::object();
  // `stream: true` on the step: the provider asks for a streaming response
  // (OpenAI-compatible SSE chunks, Anthropic's event stream) and calls
  // on_delta, on the calling thread, with each piece of the reply's text as
  // it arrives; the response's text is the pieces concatenated. A stream cut
  // before its end is kUnavailable (retryable). When the provider sends the
  // request again after pieces went out (its own retry), it calls
  // on_stream_reset first: what was sent so far is void. Unset = nobody
  // listens (the provider may still stream).
  bool stream = false;
  std::function<void(std::string_view text)> on_delta;
  std::function<void()> on_stream_reset;
  // Called (on the calling thread) with each failed answer the provider is
  // about to retry: its error as the call would return it and what the
  // answer said about the provider's limits. The last answer is the call's
  // own result and is not passed here. Unset = nobody listens.
  std::function<void(const absl::Status&, const RateLimitTelemetry&)> on_retry;
  // The W3C traceparent of the call's span (runloom/trace.h), sent as the
  // `traceparent` header by the http provider; "" = none.
  std::string traceparent;
};

struct LlmUsage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

struct LlmResponse {
  std::string text;   // the raw reply; in json mode, text the caller parses
  std::string model;  // the model that answered
  // The tools the model asked to call, in its order (empty: a final answer).
  std::vector<LlmToolCall> tool_calls;
  LlmUsage usage;
  // What the provider's headers said about its limits (llm/rate_limit.h).
  RateLimitTelemetry rate_limit;
  int requests = 1;  // requests sent for this call, retries included
  // Of those, the requests whose answers were lost after they were sent (a
  // timeout, a cut stream): the provider may have billed them, so the
  // caller books each at its worst case (llm_step.cc, budget_ledger.h).
  int maybe_billed = 0;
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

// Where an alias goes, and what its calls cost.
struct ModelRoute {
  std::shared_ptr<LlmProvider> provider;
  std::string provider_name;          // the config's provider name; the prefix for prefix routes
  std::string model;                  // LlmRequest::model: the provider's name for the model
  int64_t input_micros_per_1k = 0;    // price of 1,000 prompt tokens, in micro-units
  int64_t output_micros_per_1k = 0;   // price of 1,000 completion tokens
  std::optional<int64_t> max_tokens;  // default completion cap when the step sets none
};

// The cost of `usage` at the route's prices, in micro-units, rounded up.
int64_t CostMicros(const ModelRoute& route, const LlmUsage& usage);

// Routes model aliases to providers.
class LlmProviderRegistry {
 public:
  LlmProviderRegistry() = default;
  LlmProviderRegistry(const LlmProviderRegistry&) = delete;
  LlmProviderRegistry& operator=(const LlmProviderRegistry&) = delete;

  // Routes every alias equal to `prefix` or starting with it to `provider`
  // (adds or replaces). REQUIRES: prefix not empty, provider not null.
  void Register(const std::string& prefix, std::shared_ptr<LlmProvider> provider);

  // Routes exactly the alias `alias` (adds or replaces); it wins over prefix
  // routes. REQUIRES: alias not empty, route.provider not null.
  void RegisterModel(const std::string& alias, ModelRoute route);

  // The route of `model`: its RegisterModel route, else the longest matching
  // prefix's provider (model name = the alias, no price). kInvalidArgument
  // "model 'x' is not configured ..." naming the configured aliases when
  // neither matches.
  absl::StatusOr<ModelRoute> Route(const std::string& model) const;

  // Route(model).provider.
  absl::StatusOr<std::shared_ptr<LlmProvider>> Resolve(const std::string& model) const;

  // A registry routing "fake*" to the fake provider.
  static std::shared_ptr<LlmProviderRegistry> WithFake();

 private:
  mutable runloom::Mutex mu_;
  std::map<std::string, std::shared_ptr<LlmProvider>> providers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, ModelRoute> models_ ABSL_GUARDED_BY(mu_);
};

// How many requests a failed Complete sent (retries included), carried on
// its status as a payload; a status without one counts as 1 request.
inline constexpr char kLlmRequestsPayload[] = "runloom.dev/llm_requests";
absl::Status WithRequests(absl::Status s, int requests);
int RequestsOf(const absl::Status& s);
// How many requests of a failed Complete were sent and then lost (timed
// out, cut, cancelled mid-flight, or answered with a success the caller
// could not read): the provider may have billed each. Carried as a
// payload; none = 0. WithMaybeBilled(s, 0) leaves `s` as it is.
inline constexpr char kLlmMaybeBilledPayload[] = "runloom.dev/llm_maybe_billed";
absl::Status WithMaybeBilled(absl::Status s, int requests);
int MaybeBilledOf(const absl::Status& s);

// Rough token count of `text`: whitespace-separated words * 4 / 3, rounded.
int64_t CountTokens(std::string_view text);

}  // namespace runloom
