#include "llm/internal/wire.h"

#include "core/bounded_json.h"

#include "absl/strings/str_cat.h"

#include <string>

namespace runloom::llm_internal {
namespace {

constexpr size_t kMaxErrorText = 300;
constexpr auto kReplace = nlohmann::json::error_handler_t::replace;

std::string Cut(absl::string_view text) {
  if (text.size() <= kMaxErrorText) return std::string(text);
  return absl::StrCat(text.substr(0, kMaxErrorText), "...");
}

absl::Status Malformed(absl::string_view api, absl::string_view what) {
  return absl::UnknownError(absl::StrCat(api, " response is malformed: ", what,
                                         "; check that base_url points at an API of this kind"));
}

absl::StatusOr<nlohmann::json> ParseBody(absl::string_view api, absl::string_view body) {
  absl::StatusOr<nlohmann::json> parsed =
      ParseJsonBounded(body, absl::StrCat(api, " response"), StepOutputLimits());
  if (!parsed.ok()) return Malformed(api, parsed.status().message());
  if (!parsed->is_object()) return Malformed(api, "not a JSON object");
  return parsed;
}

// A non-negative integer field of `usage`; absent counts as 0.
absl::StatusOr<int64_t> UsageField(absl::string_view api, const nlohmann::json& usage,
                                   const char* key) {
  if (!usage.contains(key) || usage[key].is_null()) return 0;
  if (!usage[key].is_number_integer() || usage[key].get<int64_t>() < 0) {
    return Malformed(api, absl::StrCat("usage.", key, " is not a non-negative integer"));
  }
  return usage[key].get<int64_t>();
}

// The `usage` object's two counts (absent: 0 tokens).
absl::StatusOr<LlmUsage> ReadUsage(absl::string_view api, const nlohmann::json& j,
                                   const char* input_key, const char* output_key) {
  LlmUsage usage;
  if (!j.contains("usage") || !j["usage"].is_object()) return usage;
  absl::StatusOr<int64_t> in = UsageField(api, j["usage"], input_key);
  if (!in.ok()) return in.status();
  absl::StatusOr<int64_t> out = UsageField(api, j["usage"], output_key);
  if (!out.ok()) return out.status();
  return LlmUsage{*in, *out};
}

std::string ModelOf(const nlohmann::json& j) {
  if (j.contains("model") && j["model"].is_string()) return j["model"].get<std::string>();
  return "";
}

}  // namespace

std::string JsonModeInstruction(const LlmRequest& request) {
  std::string text =
      "Reply with exactly one JSON object and nothing else: no prose, no code fence.";
  if (request.json_schema.has_value()) {
    absl::StrAppend(&text, " The object must match this JSON Schema: ",
                    request.json_schema->dump(-1, ' ', false, kReplace));
  }
  return text;
}

nlohmann::json OpenAiRequestBody(const LlmRequest& request) {
  nlohmann::json messages = nlohmann::json::array();
  if (!request.system.empty()) {
    messages.push_back({{"role", "system"}, {"content", request.system}});
  }
  messages.push_back({{"role", "user"}, {"content", request.prompt}});
  nlohmann::json body = {{"model", request.model}, {"messages", std::move(messages)}};
  if (request.max_tokens.has_value()) body["max_tokens"] = *request.max_tokens;
  if (request.json_mode) {
    if (request.json_schema.has_value()) {
      body["response_format"] = {
          {"type", "json_schema"},
          {"json_schema", {{"name", "response"}, {"schema", *request.json_schema}}}};
    } else {
      body["response_format"] = {{"type", "json_object"}};
    }
  }
  return body;
}

absl::StatusOr<LlmResponse> ParseOpenAiResponse(absl::string_view body) {
  constexpr absl::string_view kApi = "openai";
  absl::StatusOr<nlohmann::json> j = ParseBody(kApi, body);
  if (!j.ok()) return j.status();
  const nlohmann::json& choices = (*j)["choices"];
  if (!choices.is_array() || choices.empty() || !choices[0].is_object()) {
    return Malformed(kApi, "no choices[0]");
  }
  const nlohmann::json& message = choices[0]["message"];
  if (!message.is_object() || !message.contains("content")) {
    return Malformed(kApi, "no choices[0].message.content");
  }
  LlmResponse out;
  if (message["content"].is_string()) {
    out.text = message["content"].get<std::string>();
  } else if (!message["content"].is_null()) {
    return Malformed(kApi, "choices[0].message.content is not a string");
  }
  out.model = ModelOf(*j);
  absl::StatusOr<LlmUsage> usage = ReadUsage(kApi, *j, "prompt_tokens", "completion_tokens");
  if (!usage.ok()) return usage.status();
  out.usage = *usage;
  return out;
}

nlohmann::json AnthropicRequestBody(const LlmRequest& request) {
  std::string system = request.system;
  if (request.json_mode) {
    system = system.empty() ? JsonModeInstruction(request)
                            : absl::StrCat(system, "\n\n", JsonModeInstruction(request));
  }
  nlohmann::json body = {
      {"model", request.model},
      {"max_tokens", request.max_tokens.value_or(kAnthropicDefaultMaxTokens)},
      {"messages", nlohmann::json::array({{{"role", "user"}, {"content", request.prompt}}})}};
  if (!system.empty()) body["system"] = system;
  return body;
}

absl::StatusOr<LlmResponse> ParseAnthropicResponse(absl::string_view body) {
  constexpr absl::string_view kApi = "anthropic";
  absl::StatusOr<nlohmann::json> j = ParseBody(kApi, body);
  if (!j.ok()) return j.status();
  const nlohmann::json& content = (*j)["content"];
  if (!content.is_array()) return Malformed(kApi, "no content array");
  LlmResponse out;
  for (const nlohmann::json& block : content) {
    // Only text blocks make the reply; other block types (tool use) are not
    // asked for.
    if (block.is_object() && block.value("type", "") == "text" && block.contains("text") &&
        block["text"].is_string()) {
      out.text += block["text"].get<std::string>();
    }
  }
  out.model = ModelOf(*j);
  absl::StatusOr<LlmUsage> usage = ReadUsage(kApi, *j, "input_tokens", "output_tokens");
  if (!usage.ok()) return usage.status();
  out.usage = *usage;
  return out;
}

std::string ErrorBodyMessage(absl::string_view body) {
  absl::StatusOr<nlohmann::json> j = ParseJsonBounded(body, "error response", StepOutputLimits());
  if (j.ok() && j->is_object() && (*j)["error"].is_object() &&
      (*j)["error"]["message"].is_string()) {
    return Cut((*j)["error"]["message"].get<std::string>());
  }
  if (j.ok() && j->is_object() && (*j)["error"].is_string()) {
    return Cut((*j)["error"].get<std::string>());
  }
  return Cut(body);
}

}  // namespace runloom::llm_internal
