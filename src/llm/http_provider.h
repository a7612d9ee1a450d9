// The HTTP model providers: `openai` (any OpenAI-compatible chat-completions
// API: OpenAI, vLLM, llama.cpp's server, Ollama) and `anthropic` (the
// Messages API), both over libcurl (net/http_client.h).
//
// One Complete() is one model call: up to retry.max_attempts requests. A
// 429, 408, 409 or 5xx answer, a refused or dropped connection, or a request
// timeout is sent again after the wait the server asked for (Retry-After,
// retry-after-ms) or else a capped exponential backoff with jitter; the wait
// goes through ctx.SleepUntil, so a stop request ends it (kCancelled) and the
// step's deadline bounds it. A server asking for a wait longer than
// retry.max_delay, or past the step's deadline, is not waited for: the call
// fails at once with the answer's class, and the step's own retry policy
// decides. Each request's total timeout is the provider's `timeout`, cut to
// what is left of the step's deadline.
//
// Final errors: 429 kResourceExhausted (rate_limited); 5xx, 408, 409 and
// connection failures kUnavailable; a request timeout kDeadlineExceeded;
// 400, 404, 413, 422 kInvalidArgument (the request or the model name is
// wrong: invalid); 401, 403 kPermissionDenied; a malformed reply kUnknown.
// Each carries the number of requests sent (RequestsOf).
//
// With LlmRequest::stream the request asks for a streamed reply and reads
// it as it arrives (llm/internal/stream.h), passing text to on_delta. A
// stream cut before its end marker is kUnavailable and retried like a
// dropped connection, with on_stream_reset called before the new request
// when pieces went out; a malformed stream is aborted (kUnknown); an error
// event names its code (overloaded_error: kUnavailable, retried). A non-2xx
// answer is read as without streaming, and a 2xx JSON reply (a server that
// does not stream) goes to on_delta in one piece.
//
// The API key is resolved at each call from its secret reference, sent only
// in the Authorization (openai) or x-api-key (anthropic) header, and
// replaced by "[secret]" in any text a provider's answer echoes it in.
//
// Thread-safety: Complete may be called from many threads at once.
#pragma once

#include "llm/config.h"
#include "llm/provider.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace runloom {

// Returns the value of the secret NAME (a `secret://NAME` reference), at the
// time of a call: in runloom, engine_internal::ResolveSecret.
using SecretResolver = std::function<absl::StatusOr<std::string>(const std::string& name)>;

struct HttpProviderOptions {
  // REQUIRES: kind openai or anthropic.
  ProviderConfig config;
  // Called when config.api_key_secret is set. REQUIRES: set then.
  SecretResolver resolve_secret;
  // Seeds the backoff jitter (tests); nullopt = seeded from the OS.
  std::optional<uint64_t> jitter_seed;
};

std::shared_ptr<LlmProvider> NewHttpLlmProvider(HttpProviderOptions options);

}  // namespace runloom
