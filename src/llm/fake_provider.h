// The fake LLM provider: deterministic, offline replies for tests, demos and
// benchmarks.
//
// The same (system, prompt) always gives the same reply: a short echo of the
// prompt's first words and a few pseudo-words chosen by the SHA-256 of
// system + prompt. In json mode (without a canned `response`) the reply is an
// object {"summary": <text>, "approved": <bool>, "score": <0..100>}, all taken
// from the same digest.
//
// Options (the llm step's `fake:` block; every key optional):
//   latency:          duration to wait before answering ("250ms"); waits via
//                     ctx.SleepUntil, so a stop request ends it (kCancelled)
//                     and the step deadline bounds it (kDeadlineExceeded).
//   fail_times:       attempts 1..N fail with kUnavailable.
//   rate_limit_times: the next M attempts (after the fail_times ones) fail
//                     with kResourceExhausted ("429").
//   response:         a canned reply. A string is returned as the text; any
//                     other JSON value is returned as its JSON text.
//
// Thread-safety: stateless; safe to call from many threads.
#pragma once

#include "llm/provider.h"

#include <memory>

namespace runloom {

class FakeLlmProvider final : public LlmProvider {
 public:
  FakeLlmProvider() = default;
  FakeLlmProvider(const FakeLlmProvider&) = delete;
  FakeLlmProvider& operator=(const FakeLlmProvider&) = delete;

  absl::Status ValidateOptions(const nlohmann::json& options) const override;
  absl::StatusOr<LlmResponse> Complete(StepContext& ctx, const LlmRequest& request) override;
};

std::shared_ptr<LlmProvider> NewFakeLlmProvider();

}  // namespace runloom
