// The built-in step kinds: exec, noop, sleep, fail, llm and http.
//
// StepRegistry::WithBuiltins() registers all of them; the factories below let
// an embedder build a registry of its own (e.g. an llm kind with more
// providers). Each kind's config keys are documented at its factory; unknown
// keys are refused by Validate with the list of allowed ones.
//
// Thread-safety: every kind is stateless after construction, so Execute may
// run concurrently for many steps.
#pragma once

#include "runloom/step.h"

#include "llm/llm_concurrency.h"
#include "llm/provider.h"

#include <memory>

namespace runloom {

// Failed exec steps carry their stderr tail (the last 4 KiB) both in the
// status message and as a payload under this type URL, so the engine can
// store it in the step record without parsing the message.
inline constexpr char kStderrTailPayload[] = "runloom.dev/stderr_tail";

// exec: runs a subprocess; JSON on stdin, one JSON object on stdout.
//   command: a string (run with /bin/sh -c) or a list of strings (run directly,
//            looked up in PATH). Required.
//   input:   any JSON, written to stdin (default {}); stdin is then closed.
//   cwd:     working directory, relative to the workflow's directory; "" =
//            the engine's own cwd. Default: the workflow's directory.
//   env:     map of extra environment variables (string, number or bool values).
// The child runs in its own process group; when it exits, times out or the
// step is stopped, the whole group is SIGKILLed. Errors: exit 75 (EX_TEMPFAIL)
// -> kUnavailable; other nonzero exit or a signal -> kUnknown; timeout ->
// kDeadlineExceeded; stopped -> kCancelled; stdout not a JSON object ->
// kInvalidArgument.
std::shared_ptr<StepKind> NewExecStep();

// noop: returns `output` (a JSON object, default {}).
std::shared_ptr<StepKind> NewNoopStep();

// sleep: waits `duration` (required, e.g. "2s") on the step's clock; output
// {"slept_ms": N}. kCancelled when stopped early, kDeadlineExceeded when the
// step's timeout is shorter than the duration.
std::shared_ptr<StepKind> NewSleepStep();

// fail: fails on purpose (tests and benchmarks).
//   message: the error text (default "failed on purpose").
//   class:   error | timeout | unavailable | rate_limited | invalid (default
//            error): kUnknown, kDeadlineExceeded, kUnavailable,
//            kResourceExhausted, kInvalidArgument.
//   times:   fail only while attempt <= times, then succeed with
//            {"attempts": attempt}; absent = always fail.
std::shared_ptr<StepKind> NewFailStep();

// llm: one model call through `providers`.
//   model:           alias, default "fake"; must resolve in `providers`.
//   prompt:          required string.  system: optional string.
//   response_format: "text" (default) or "json" (the reply must be a JSON object).
//   response_schema: with response_format json, a JSON Schema the reply must
//                    match (compiled at Validate); a mismatch is kInvalidArgument.
//   max_tokens:      optional positive integer; default: the alias's max_tokens.
//   fake:            options for the fake provider (see llm/fake_provider.h).
// Output: {"text", "json" (json mode only), "model", "provider",
//          "usage": {"prompt_tokens", "completion_tokens", "cost_micros"},
//          "latency_ms"}.
// Every call, whatever its outcome, records an llm.call event
// (StepContext::RecordEvent) with tokens, cost at the route's prices,
// latency and requests sent.
// With `concurrency`, each call first takes a slot under its provider's cap
// (llm/llm_concurrency.h; a provider it does not know is not capped) and
// reports its outcome to the provider's controller.
std::shared_ptr<StepKind> NewLlmStep(std::shared_ptr<LlmProviderRegistry> providers,
                                     std::shared_ptr<LlmConcurrency> concurrency = nullptr);

// The caps of the llm step in `registry`; nullptr when it has none (or no
// llm step). The engine starts their controllers.
LlmConcurrency* LlmConcurrencyOf(const StepRegistry& registry);

// The static cap of the fake provider in StepRegistry::WithBuiltins().
inline constexpr int kFakeStaticCap = 64;

// http: one HTTP request over libcurl; with `write: true` an external write
// made once in effect through the write_operations ledger (intent before,
// result after, reconciliation of a lost response). Config keys and their
// limits: steps/http_config.h. Output: {"status", "body" (JSON, or the text
// as a string), "write": {"action", "idempotency_key", "source"} (writes
// only)}. Errors: no answer -> kUnavailable (kDeadlineExceeded past the
// step's timeout); 429 -> kResourceExhausted; 5xx -> kUnavailable; another
// status not in `expect` -> kInvalidArgument (never retried); a lost lease
// before sending -> kCancelled.
std::shared_ptr<StepKind> NewHttpStep();

}  // namespace runloom
