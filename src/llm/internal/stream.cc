#include "llm/internal/stream.h"

#include "core/bounded_json.h"
#include "llm/internal/wire.h"

#include "absl/strings/str_cat.h"

#include <string>
#include <utility>

namespace runloom::llm_internal {
namespace {

constexpr int64_t kMaxToolCalls = 1024;  // tool-call indexes a stream may use

// The status an Anthropic `error` event names (its error.type).
absl::Status AnthropicStreamError(const nlohmann::json& j) {
  std::string type = "error";
  std::string message = "no message";
  if (j.contains("error") && j["error"].is_object()) {
    const nlohmann::json& e = j["error"];
    if (e.contains("type") && e["type"].is_string()) type = e["type"].get<std::string>();
    if (e.contains("message") && e["message"].is_string()) {
      message = e["message"].get<std::string>();
    }
  }
  const std::string text = absl::StrCat("anthropic stream error ", type, ": ", message);
  if (type == "overloaded_error" || type == "api_error") return absl::UnavailableError(text);
  if (type == "rate_limit_error") return absl::ResourceExhaustedError(text);
  if (type == "invalid_request_error" || type == "not_found_error" || type == "request_too_large") {
    return absl::InvalidArgumentError(text);
  }
  if (type == "authentication_error" || type == "permission_error") {
    return absl::PermissionDeniedError(text);
  }
  return absl::UnknownError(text);
}

// An integer `index` in [0, kMaxToolCalls).
bool ReadIndex(const nlohmann::json& j, int64_t& index) {
  if (!j.contains("index") || !j["index"].is_number_integer()) return false;
  index = j["index"].get<int64_t>();
  return index >= 0 && index < kMaxToolCalls;
}

// j's `index` (set in `index`) and its object field `key`; nullptr when
// either is missing.
const nlohmann::json* IndexedObject(const nlohmann::json& j, const char* key, int64_t& index) {
  if (!ReadIndex(j, index) || !j.contains(key) || !j[key].is_object()) return nullptr;
  return &j[key];
}

// A string field, or "" when absent or not a string.
std::string StringOf(const nlohmann::json& j, const char* key) {
  if (j.is_object() && j.contains(key) && j[key].is_string()) return j[key].get<std::string>();
  return "";
}

}  // namespace

StreamReader::StreamReader(ProviderKind kind, std::function<void(std::string_view)> on_delta)
    : kind_(kind), on_delta_(std::move(on_delta)) {}

void StreamReader::Feed(std::string_view bytes) {
  bytes_ += bytes.size();
  while (!bytes.empty() && error_.ok() && !done_) {
    const size_t nl = bytes.find('\n');
    const std::string_view part = bytes.substr(0, nl);
    if (line_.size() + part.size() > kMaxStreamLine) {
      error_ = Malformed(ToString(kind_),
                         absl::StrCat("a stream line is longer than ", kMaxStreamLine, " bytes"));
      return;
    }
    line_.append(part);
    if (nl == std::string_view::npos) return;
    bytes.remove_prefix(nl + 1);
    std::string line = std::move(line_);
    line_.clear();
    if (!line.empty() && line.back() == '\r') line.pop_back();
    Line(line);
  }
}

// One SSE line: a blank line dispatches the event; `field: value` sets a
// field (one space after the colon dropped); ":" starts a comment; other
// fields (id, retry) are not used.
void StreamReader::Line(std::string_view line) {
  if (line.empty()) {
    Dispatch();
    return;
  }
  if (line.front() == ':') return;
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value =
      colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "event") {
    event_ = std::string(value);
  } else if (field == "data") {
    if (data_.size() + value.size() + 1 > kMaxStreamLine) {
      error_ = Malformed(ToString(kind_), absl::StrCat("a stream event's data is longer than ",
                                                       kMaxStreamLine, " bytes"));
      return;
    }
    if (has_data_) data_.push_back('\n');
    data_.append(value);
    has_data_ = true;
  }
}

void StreamReader::Dispatch() {
  const std::string event = std::move(event_);
  const std::string data = std::move(data_);
  const bool has_data = has_data_;
  event_.clear();
  data_.clear();
  has_data_ = false;
  if (!has_data) return;
  const std::string api = ToString(kind_);
  if (kind_ == ProviderKind::kOpenAi && data == "[DONE]") {
    done_ = true;
    return;
  }
  absl::StatusOr<nlohmann::json> j =
      ParseJsonBounded(data, absl::StrCat(api, " stream event"), StepOutputLimits());
  if (!j.ok()) {
    error_ = Malformed(api, j.status().message());
    return;
  }
  if (!j->is_object()) {
    error_ = Malformed(api, absl::StrCat("a stream event", event.empty() ? "" : " ", event,
                                         " is not a JSON object"));
    return;
  }
  error_ = kind_ == ProviderKind::kOpenAi ? OpenAiEvent(*j) : AnthropicEvent(*j);
}

void StreamReader::Delta(const std::string& text) {
  if (text.empty()) return;
  response_.text += text;
  ++deltas_;
  if (on_delta_) on_delta_(text);
}

// One chat-completion chunk: choices[0].delta.{content, tool_calls[]};
// the last one (with stream_options.include_usage) has usage and no choices.
absl::Status StreamReader::OpenAiEvent(const nlohmann::json& j) {
  constexpr absl::string_view kApi = "openai";
  if (j.contains("error") && !j["error"].is_null()) {
    const nlohmann::json& e = j["error"];
    return absl::UnknownError(
        absl::StrCat("openai stream error: ", e.is_object()   ? StringOf(e, "message")
                                              : e.is_string() ? e.get<std::string>()
                                                              : ""));
  }
  if (std::string model = ModelOf(j); !model.empty()) response_.model = std::move(model);
  if (j.contains("usage") && j["usage"].is_object()) {
    absl::StatusOr<LlmUsage> usage = ReadUsage(kApi, j, "prompt_tokens", "completion_tokens");
    if (!usage.ok()) return usage.status();
    response_.usage = *usage;
  }
  if (!j.contains("choices") || j["choices"].is_null()) return absl::OkStatus();
  const nlohmann::json& choices = j["choices"];
  if (!choices.is_array()) return Malformed(kApi, "a chunk's choices is not a list");
  if (choices.empty()) return absl::OkStatus();
  if (!choices[0].is_object()) return Malformed(kApi, "a chunk's choices[0] is not an object");
  if (!choices[0].contains("delta") || choices[0]["delta"].is_null()) return absl::OkStatus();
  const nlohmann::json& delta = choices[0]["delta"];
  if (!delta.is_object()) return Malformed(kApi, "a chunk's choices[0].delta is not an object");
  if (delta.contains("content") && !delta["content"].is_null()) {
    if (!delta["content"].is_string()) {
      return Malformed(kApi, "a chunk's delta.content is not a string");
    }
    Delta(delta["content"].get<std::string>());
  }
  if (!delta.contains("tool_calls") || delta["tool_calls"].is_null()) return absl::OkStatus();
  if (!delta["tool_calls"].is_array()) return Malformed(kApi, "delta.tool_calls is not a list");
  for (const nlohmann::json& piece : delta["tool_calls"]) {
    int64_t index = 0;
    if (!piece.is_object() || !ReadIndex(piece, index)) {
      return Malformed(kApi,
                       absl::StrCat("a tool call fragment has no index below ", kMaxToolCalls));
    }
    LlmToolCall& call = calls_[index].call;
    if (std::string id = StringOf(piece, "id"); !id.empty()) call.id = std::move(id);
    if (piece.contains("function") && piece["function"].is_object()) {
      const nlohmann::json& fn = piece["function"];
      if (std::string name = StringOf(fn, "name"); !name.empty()) call.name = std::move(name);
      call.arguments += StringOf(fn, "arguments");
    }
  }
  return absl::OkStatus();
}

// One event of the Messages stream, by its data's `type` (the same as its
// `event:` line).
absl::Status StreamReader::AnthropicEvent(const nlohmann::json& j) {
  constexpr absl::string_view kApi = "anthropic";
  const std::string type = StringOf(j, "type");
  if (type == "error") return AnthropicStreamError(j);
  if (type == "message_start") {
    if (!j.contains("message") || !j["message"].is_object()) {
      return Malformed(kApi, "message_start has no message");
    }
    response_.model = ModelOf(j["message"]);
    absl::StatusOr<LlmUsage> usage = ReadUsage(kApi, j["message"], "input_tokens", "output_tokens");
    if (!usage.ok()) return usage.status();
    response_.usage = *usage;
  } else if (type == "content_block_start") {
    int64_t index = 0;
    const nlohmann::json* start = IndexedObject(j, "content_block", index);
    if (start == nullptr) return Malformed(kApi, "content_block_start has no index or block");
    const nlohmann::json& block = *start;
    if (const std::string block_type = StringOf(block, "type"); block_type == "text") {
      Delta(StringOf(block, "text"));
    } else if (block_type == "tool_use") {
      if (!block.contains("name") || !block["name"].is_string()) {
        return Malformed(kApi, "a tool_use block has no name");
      }
      PendingCall& pending = calls_[index];
      pending.call.id = StringOf(block, "id");
      pending.call.name = block["name"].get<std::string>();
      pending.anthropic_json = true;
    }
  } else if (type == "content_block_delta") {
    int64_t index = 0;
    const nlohmann::json* delta = IndexedObject(j, "delta", index);
    if (delta == nullptr) return Malformed(kApi, "content_block_delta has no index or delta");
    if (const std::string delta_type = StringOf(*delta, "type"); delta_type == "text_delta") {
      Delta(StringOf(*delta, "text"));
    } else if (delta_type == "input_json_delta") {
      auto it = calls_.find(index);
      if (it == calls_.end()) return Malformed(kApi, "input_json_delta for no tool_use block");
      it->second.call.arguments += StringOf(*delta, "partial_json");
    }
  } else if (type == "message_delta") {
    if (j.contains("usage") && j["usage"].is_object()) {
      const nlohmann::json& u = j["usage"];
      absl::StatusOr<LlmUsage> usage = ReadUsage(kApi, j, "input_tokens", "output_tokens");
      if (!usage.ok()) return usage.status();
      // Counts are cumulative; the input count usually comes in message_start only.
      if (u.contains("input_tokens") && !u["input_tokens"].is_null()) {
        response_.usage.prompt_tokens = usage->prompt_tokens;
      }
      if (u.contains("output_tokens") && !u["output_tokens"].is_null()) {
        response_.usage.completion_tokens = usage->completion_tokens;
      }
    }
  } else if (type == "message_stop") {
    done_ = true;
  }
  // ping, content_block_stop and event types added later: nothing to read.
  return absl::OkStatus();
}

absl::StatusOr<LlmResponse> StreamReader::Finish() {
  if (error_.ok() && !done_) {
    // The body's end ends a last line and event that lack their newlines.
    if (!line_.empty()) Line(std::exchange(line_, ""));
    if (error_.ok()) Dispatch();
  }
  if (!error_.ok()) return error_;
  if (!done_) {
    return absl::UnavailableError(
        absl::StrCat(ToString(kind_), " stream was cut after ", bytes_, " bytes, before its end"));
  }
  LlmResponse out = response_;
  for (auto& [index, pending] : calls_) {
    if (pending.call.name.empty()) {
      return Malformed(ToString(kind_), absl::StrCat("tool call ", index, " has no name"));
    }
    if (pending.anthropic_json) {
      // As the whole reply would give it: the input object as compact JSON
      // ({} when empty); text that does not parse is kept as the model's own.
      if (pending.call.arguments.empty()) {
        pending.call.arguments = "{}";
      } else {
        absl::StatusOr<nlohmann::json> input =
            ParseJsonBounded(pending.call.arguments, "tool arguments", StepOutputLimits());
        if (input.ok()) pending.call.arguments = Dump(*input);
      }
    }
    out.tool_calls.push_back(std::move(pending.call));
  }
  return out;
}

}  // namespace runloom::llm_internal
