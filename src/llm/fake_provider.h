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
//   turns:            scripted agent turns ([{text}, {tool_calls}]).
//   chunk_interval:   with LlmRequest::stream, a duration added between the
//                     streamed pieces (default 0).
//
// Streaming (LlmRequest::stream): the reply's text (generated, canned or a
// scripted turn's) goes to on_delta word by word (each word with the
// whitespace after it; the pieces concatenate to the text), its latency
// spread evenly over the pieces: piece k of n arrives at latency * (k+1)/n
// + chunk_interval * k, each wait through ctx.SleepUntil (a stop ends it).
// `latency: 2s` with 10 words: a word every 200 ms. A call that fails
// (fail_times, rate_limit_times, error_rate) streams nothing.
//
// Provider-wide behaviour (FakeProviderOptions, set when the provider is
// made; every field off by default) models a real provider's limits:
//   latency + latency_jitter  every call waits latency + [0, jitter), drawn
//                     from a hash of (seed, system, prompt, attempt);
//   error_rate        that fraction of calls fails with kUnavailable ("503")
//                     after its latency, drawn from the same hash;
//   hidden_limit K    a call arriving while K calls are already in flight is
//                     answered at once with kResourceExhausted ("429") and
//                     rate-limit headers: retry-after, x-ratelimit-limit-
//                     requests (K per mean latency, per minute) and
//                     x-ratelimit-remaining-requests 0 (RateLimitOf reads
//                     them off the status). With `advertise`, successful
//                     replies carry the limit and remaining headers too.
// The same seed and requests give the same latencies and failures, whatever
// the thread interleaving; only 429s depend on how many calls overlap.
//
// Thread-safety: safe to call from many threads; the in-flight count and the
// hidden limit are under a mutex.
#pragma once

#include "runloom/mutex.h"

#include "llm/provider.h"
#include "llm/rate_limit.h"

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

#include <cstdint>
#include <memory>

namespace runloom {

struct FakeProviderOptions {
  absl::Duration latency = absl::ZeroDuration();
  absl::Duration latency_jitter = absl::ZeroDuration();
  double error_rate = 0;  // 0..1
  int hidden_limit = 0;   // 0 = no limit
  absl::Duration retry_after = absl::Seconds(1);
  bool advertise = false;  // rate-limit headers on successful replies too
  uint64_t seed = 0;
};

class FakeLlmProvider final : public LlmProvider {
 public:
  explicit FakeLlmProvider(FakeProviderOptions options = {}) : options_(options) {
    hidden_limit_ = options.hidden_limit;
  }
  FakeLlmProvider(const FakeLlmProvider&) = delete;
  FakeLlmProvider& operator=(const FakeLlmProvider&) = delete;

  absl::Status ValidateOptions(const nlohmann::json& options) const override;
  absl::StatusOr<LlmResponse> Complete(StepContext& ctx, const LlmRequest& request) override;

  // What the provider decided for one call, before any waiting: the status
  // it will answer with (a 429 carries its headers), how long the call takes
  // and the headers of a success. Counts the call in flight until Leave().
  // Complete() is Enter + wait + Leave; a discrete-event simulation calls
  // them itself on its own clock.
  struct Admission {
    absl::Status status;
    absl::Duration latency;
    RateLimitTelemetry telemetry;
  };
  Admission Enter(const LlmRequest& request, int attempt) ABSL_LOCKS_EXCLUDED(mu_);
  void Leave() ABSL_LOCKS_EXCLUDED(mu_);

  // Changes the hidden limit (0 = none) from now on.
  void SetHiddenLimit(int limit) ABSL_LOCKS_EXCLUDED(mu_);
  int in_flight() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  RateLimitTelemetry TelemetryLocked(const runloom::MutexLock&) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const FakeProviderOptions options_;
  mutable runloom::Mutex mu_;
  int hidden_limit_ ABSL_GUARDED_BY(mu_) = 0;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

std::shared_ptr<LlmProvider> NewFakeLlmProvider();
std::shared_ptr<FakeLlmProvider> NewFakeLlmProvider(FakeProviderOptions options);

// Reads FakeProviderOptions from a config map (a provider entry of kind
// fake): latency, latency_jitter, retry_after (durations such as "250ms"),
// error_rate (0..1), hidden_limit (integer >= 0), advertise (bool), seed
// (integer >= 0); every key optional. kInvalidArgument naming the key and
// what is allowed.
absl::StatusOr<FakeProviderOptions> ParseFakeProviderOptions(const nlohmann::json& config);

}  // namespace runloom
