// Streamed replies of the two HTTP model APIs, read as Server-Sent Events
// while the body arrives: OpenAI-style chat-completion chunks
// (`data: {json}` lines ending with `data: [DONE]`) and Anthropic's Messages
// event stream (`event:`/`data:` pairs, message_start .. message_stop).
//
// The SSE framing is parsed here by hand: Debian 12 packages no SSE parser
// library, and the subset the two APIs use (data/event fields, comments,
// blank-line dispatch) is small. Lines end with "\n" or "\r\n".
//
// The stream is untrusted: a line or an event's data over kMaxStreamLine,
// a data line that is not a JSON object, or fields of the wrong type make
// it malformed (kUnknown, as a malformed whole reply). After the first
// error, further bytes are ignored and Finish returns that error.
//
// Thread-safety: a StreamReader is used by one thread (the one that runs
// the request; curl's write callback calls Feed there).
//
// Example:
//   StreamReader reader(ProviderKind::kOpenAi, [](std::string_view t) { show(t); });
//   http.on_data = [&](std::string_view bytes) { reader.Feed(bytes); };
//   ... net::SendHttp(http) ...
//   absl::StatusOr<LlmResponse> out = reader.Finish();
#pragma once

#include "llm/config.h"
#include "llm/provider.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace runloom::llm_internal {

// The longest line, and the longest data of one event, a stream may send.
inline constexpr size_t kMaxStreamLine = size_t{1} << 20;

class StreamReader {
 public:
  // `on_delta` (may be unset) gets each piece of the reply's text in order.
  StreamReader(ProviderKind kind, std::function<void(std::string_view)> on_delta);

  // Reads the next bytes of the body. No-op after an error or the end.
  void Feed(std::string_view bytes);

  // True once the stream said it is complete ([DONE], message_stop).
  bool done() const { return done_; }
  // The first error the stream gave (OK while none).
  const absl::Status& error() const { return error_; }
  size_t bytes() const { return bytes_; }
  // How many pieces went to on_delta.
  size_t deltas() const { return deltas_; }

  // The whole reply, once the body has ended: the error, or kUnavailable
  // "the stream was cut after N bytes" when it ended before its end marker.
  absl::StatusOr<LlmResponse> Finish();

 private:
  void Line(std::string_view line);
  void Dispatch();
  absl::Status OpenAiEvent(const nlohmann::json& j);
  absl::Status AnthropicEvent(const nlohmann::json& j);
  void Delta(const std::string& text);

  // A tool call being assembled, keyed by Anthropic's content block index
  // or OpenAI's tool_calls[].index.
  struct PendingCall {
    LlmToolCall call;
    bool anthropic_json = false;  // arguments are partial_json pieces
  };

  const ProviderKind kind_;
  const std::function<void(std::string_view)> on_delta_;
  std::string line_;   // the current line, before its end
  std::string event_;  // the current event's `event:` field
  std::string data_;   // the current event's data lines
  bool has_data_ = false;
  bool done_ = false;
  absl::Status error_;
  size_t bytes_ = 0;
  size_t deltas_ = 0;
  LlmResponse response_;
  std::map<int64_t, PendingCall> calls_;  // in index order: the reply's order
};

}  // namespace runloom::llm_internal
