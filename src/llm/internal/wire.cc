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

// The OpenAI messages of an agent's earlier turns and tool answers.
void AppendOpenAiHistory(const LlmRequest& request, nlohmann::json& messages) {
  for (const LlmMessage& m : request.history) {
    if (m.role == "tool") {
      messages.push_back(
          {{"role", "tool"}, {"tool_call_id", m.tool_call_id}, {"content", m.text}});
      continue;
    }
    nlohmann::json msg = {{"role", "assistant"}};
    msg["content"] = m.text.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.text);
    if (!m.tool_calls.empty()) {
      nlohmann::json calls = nlohmann::json::array();
      for (const LlmToolCall& c : m.tool_calls) {
        calls.push_back({{"id", c.id},
                         {"type", "function"},
                         {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
      }
      msg["tool_calls"] = std::move(calls);
    }
    messages.push_back(std::move(msg));
  }
}

// A tool call's arguments as Anthropic's `input` object: the model's text
// parsed, or {} when it was not a JSON object (such a call was refused).
nlohmann::json AnthropicInput(const std::string& arguments) {
  absl::StatusOr<nlohmann::json> parsed =
      ParseJsonBounded(arguments, "tool arguments", StepOutputLimits());
  if (parsed.ok() && parsed->is_object()) return *std::move(parsed);
  return nlohmann::json::object();
}

// The Anthropic messages of an agent's earlier turns: each model turn as
// text and tool_use blocks, the answers to its calls as one user message of
// tool_result blocks.
void AppendAnthropicHistory(const LlmRequest& request, nlohmann::json& messages) {
  nlohmann::json results = nlohmann::json::array();
  auto flush = [&] {
    if (results.empty()) return;
    messages.push_back({{"role", "user"}, {"content", std::move(results)}});
    results = nlohmann::json::array();
  };
  for (const LlmMessage& m : request.history) {
    if (m.role == "tool") {
      nlohmann::json block = {
          {"type", "tool_result"}, {"tool_use_id", m.tool_call_id}, {"content", m.text}};
      if (m.is_error) block["is_error"] = true;
      results.push_back(std::move(block));
      continue;
    }
    flush();
    nlohmann::json content = nlohmann::json::array();
    if (!m.text.empty()) content.push_back({{"type", "text"}, {"text", m.text}});
    for (const LlmToolCall& c : m.tool_calls) {
      content.push_back({{"type", "tool_use"},
                         {"id", c.id},
                         {"name", c.name},
                         {"input", AnthropicInput(c.arguments)}});
    }
    messages.push_back({{"role", "assistant"}, {"content", std::move(content)}});
  }
  flush();
}

// choices[0].message.tool_calls, if any.
absl::Status ReadOpenAiToolCalls(const nlohmann::json& message, LlmResponse& out) {
  constexpr absl::string_view kApi = "openai";
  if (!message.contains("tool_calls") || message["tool_calls"].is_null()) {
    return absl::OkStatus();
  }
  if (!message["tool_calls"].is_array()) return Malformed(kApi, "tool_calls is not a list");
  for (const nlohmann::json& call : message["tool_calls"]) {
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) {
      return Malformed(kApi, "a tool call has no function");
    }
    const nlohmann::json& fn = call["function"];
    if (!fn.contains("name") || !fn["name"].is_string()) {
      return Malformed(kApi, "a tool call's function has no name");
    }
    LlmToolCall c;
    c.name = fn["name"].get<std::string>();
    if (call.contains("id") && call["id"].is_string()) c.id = call["id"].get<std::string>();
    if (fn.contains("arguments")) {
      c.arguments = fn["arguments"].is_string() ? fn["arguments"].get<std::string>()
                                                : Dump(fn["arguments"]);
    }
    out.tool_calls.push_back(std::move(c));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Malformed(absl::string_view api, absl::string_view what) {
  return absl::UnknownError(absl::StrCat(api, " response is malformed: ", what,
                                         "; check that base_url points at an API of this kind"));
}

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

std::string Dump(const nlohmann::json& v) { return v.dump(-1, ' ', false, kReplace); }

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
  AppendOpenAiHistory(request, messages);
  nlohmann::json body = {{"model", request.model}, {"messages", std::move(messages)}};
  if (request.max_tokens.has_value()) body["max_tokens"] = *request.max_tokens;
  if (!request.tools.empty()) {
    nlohmann::json tools = nlohmann::json::array();
    for (const LlmTool& t : request.tools) {
      tools.push_back({{"type", "function"},
                       {"function",
                        {{"name", t.name},
                         {"description", t.description},
                         {"parameters", t.parameters}}}});
    }
    body["tools"] = std::move(tools);
  }
  if (request.stream) {
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
  }
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
  if (absl::Status s = ReadOpenAiToolCalls(message, out); !s.ok()) return s;
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
  nlohmann::json messages = nlohmann::json::array({{{"role", "user"}, {"content", request.prompt}}});
  AppendAnthropicHistory(request, messages);
  nlohmann::json body = {{"model", request.model},
                         {"max_tokens", request.max_tokens.value_or(kAnthropicDefaultMaxTokens)},
                         {"messages", std::move(messages)}};
  if (!system.empty()) body["system"] = system;
  if (request.stream) body["stream"] = true;
  if (!request.tools.empty()) {
    nlohmann::json tools = nlohmann::json::array();
    for (const LlmTool& t : request.tools) {
      tools.push_back(
          {{"name", t.name}, {"description", t.description}, {"input_schema", t.parameters}});
    }
    body["tools"] = std::move(tools);
  }
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
    // Text blocks make the reply, tool_use blocks the tool calls; other
    // block types (thinking) are not used.
    if (!block.is_object()) continue;
    const std::string type = block.value("type", "");
    if (type == "text" && block.contains("text") && block["text"].is_string()) {
      out.text += block["text"].get<std::string>();
    } else if (type == "tool_use") {
      if (!block.contains("name") || !block["name"].is_string()) {
        return Malformed(kApi, "a tool_use block has no name");
      }
      LlmToolCall c;
      c.name = block["name"].get<std::string>();
      if (block.contains("id") && block["id"].is_string()) c.id = block["id"].get<std::string>();
      c.arguments = block.contains("input") ? Dump(block["input"]) : "{}";
      out.tool_calls.push_back(std::move(c));
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
