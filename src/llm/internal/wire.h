// The request and response bodies of the two HTTP model APIs: OpenAI-style
// chat completions (POST {base_url}/chat/completions; also vLLM, llama.cpp,
// Ollama) and Anthropic's Messages API (POST {base_url}/messages).
//
// With LlmRequest::stream the request bodies ask for a streamed reply
// (internal/stream.h reads it).
//
// Bodies are untrusted: parsed under StepOutputLimits(), every field checked
// for its type. A reply that is not what the API documents is kUnknown
// (class `error`), naming the provider and what was missing.
//
// Thread-safety: pure functions.
#pragma once

#include "llm/provider.h"

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

#include <string>

namespace runloom::llm_internal {

// Anthropic requires max_tokens; used when neither the step nor the model
// sets one.
inline constexpr int64_t kAnthropicDefaultMaxTokens = 1024;
inline constexpr char kAnthropicVersion[] = "2023-06-01";

// The instruction added to the system prompt in json mode where the API has
// no JSON mode of its own (anthropic), with the schema when there is one.
std::string JsonModeInstruction(const LlmRequest& request);

nlohmann::json OpenAiRequestBody(const LlmRequest& request);
absl::StatusOr<LlmResponse> ParseOpenAiResponse(absl::string_view body);

nlohmann::json AnthropicRequestBody(const LlmRequest& request);
absl::StatusOr<LlmResponse> ParseAnthropicResponse(absl::string_view body);

// kUnknown "<api> response is malformed: <what>; check that base_url ...".
absl::Status Malformed(absl::string_view api, absl::string_view what);

// The two counts of j's `usage` object (absent: 0 tokens); kUnknown when
// one is not a non-negative integer.
absl::StatusOr<LlmUsage> ReadUsage(absl::string_view api, const nlohmann::json& j,
                                   const char* input_key, const char* output_key);

// j's `model` string, or "".
std::string ModelOf(const nlohmann::json& j);

// v as compact JSON text (invalid UTF-8 replaced).
std::string Dump(const nlohmann::json& v);

// The error text of an error response body of either API
// ({"error": {"message": ...}}), cut to a few hundred bytes; the raw body's
// start when it has none.
std::string ErrorBodyMessage(absl::string_view body);

}  // namespace runloom::llm_internal
