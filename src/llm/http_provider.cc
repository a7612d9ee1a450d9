#include "llm/http_provider.h"

#include "core/check.h"
#include "core/status_macros.h"
#include "llm/internal/retry.h"
#include "llm/internal/stream.h"
#include "llm/internal/wire.h"
#include "llm/rate_limit.h"

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "net/http_client.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace runloom {
namespace {

constexpr char kScrubbed[] = "[secret]";
constexpr int kTooManyRequests = 429;
// Replies above this are refused (a completion is far smaller).
constexpr int64_t kMaxReplyBytes = int64_t{64} << 20;

bool IsSuccess(int status) { return status >= 200 && status < 300; }  // NOLINT: HTTP classes

// The final status of an answer that was not a success.
absl::Status AnswerError(const ProviderConfig& p, int status, const std::string& message) {
  const std::string text = absl::StrCat("provider '", p.name, "' (", ToString(p.kind),
                                        ") answered HTTP ", status, ": ", message);
  if (status == kTooManyRequests) return absl::ResourceExhaustedError(text);
  if (llm_internal::IsRetryableHttpStatus(status)) return absl::UnavailableError(text);
  switch (status) {
    case 400:  // NOLINT: HTTP status codes are their own names
    case 404:  // NOLINT
    case 413:  // NOLINT
    case 422:  // NOLINT
      return absl::InvalidArgumentError(
          absl::StrCat(text, "; check the model name and the request (max_tokens, prompt size)"));
    case 401:  // NOLINT
    case 403:  // NOLINT
      return absl::PermissionDeniedError(absl::StrCat(
          text, "; check the API key (",
          p.api_key_secret.empty() ? "none is configured" : "secret://" + p.api_key_secret, ")"));
    default:
      return absl::UnknownError(text);
  }
}

class HttpLlmProvider final : public LlmProvider {
 public:
  explicit HttpLlmProvider(HttpProviderOptions options)
      : options_(std::move(options)),
        gen_(options_.jitter_seed.has_value() ? absl::BitGen(std::seed_seq{*options_.jitter_seed})
                                              : absl::BitGen()) {
    RUNLOOM_CHECK(options_.config.kind != ProviderKind::kFake) << "the fake provider is not HTTP";
    RUNLOOM_CHECK(options_.config.api_key_secret.empty() || options_.resolve_secret)
        << "provider '" << options_.config.name << "' has an api_key and no secret resolver";
  }

  absl::Status ValidateOptions(const nlohmann::json& options) const override {
    if (options.is_null() || (options.is_object() && options.empty())) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "llm step: `fake:` options apply to the fake provider only; this model goes "
        "to provider '",
        options_.config.name, "' (", ToString(options_.config.kind), "): remove the fake block"));
  }

  absl::StatusOr<LlmResponse> Complete(StepContext& ctx, const LlmRequest& request) override;

 private:
  net::HttpRequest BuildRequest(const LlmRequest& request, const std::string& key) const;
  absl::StatusOr<LlmResponse> Parse(const net::HttpResponse& answer) const;
  absl::Duration Backoff(int retry) ABSL_LOCKS_EXCLUDED(gen_mu_);

  const HttpProviderOptions options_;
  runloom::Mutex gen_mu_;
  absl::BitGen gen_ ABSL_GUARDED_BY(gen_mu_);
};

net::HttpRequest HttpLlmProvider::BuildRequest(const LlmRequest& request,
                                               const std::string& key) const {
  const ProviderConfig& p = options_.config;
  net::HttpRequest r;
  r.method = "POST";
  r.headers.emplace_back("content-type", "application/json");
  if (p.kind == ProviderKind::kOpenAi) {
    r.url = p.base_url + "/chat/completions";
    if (!key.empty()) r.headers.emplace_back("authorization", "Bearer " + key);
    r.body = llm_internal::OpenAiRequestBody(request).dump(
        -1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    r.url = p.base_url + "/messages";
    r.headers.emplace_back("anthropic-version", llm_internal::kAnthropicVersion);
    if (!key.empty()) r.headers.emplace_back("x-api-key", key);
    r.body = llm_internal::AnthropicRequestBody(request).dump(
        -1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  r.connect_timeout = p.connect_timeout;
  r.total_timeout = p.timeout;
  r.max_response_bytes = kMaxReplyBytes;
  if (!request.traceparent.empty()) r.headers.emplace_back("traceparent", request.traceparent);
  return r;
}

absl::StatusOr<LlmResponse> HttpLlmProvider::Parse(const net::HttpResponse& answer) const {
  return options_.config.kind == ProviderKind::kOpenAi
             ? llm_internal::ParseOpenAiResponse(answer.body)
             : llm_internal::ParseAnthropicResponse(answer.body);
}

absl::Duration HttpLlmProvider::Backoff(int retry) {
  runloom::MutexLock l(&gen_mu_);
  return llm_internal::BackoffWithJitter(options_.config.retry, retry, gen_);
}

std::string Scrub(std::string text, const std::string& key) {
  if (!key.empty()) absl::StrReplaceAll({{key, kScrubbed}}, &text);
  return text;
}

std::string Header(const net::HttpResponse& answer, std::string_view name) {
  return std::string(answer.Header(name).value_or(""));
}

// A 2xx answer that is one JSON reply, not an event stream (a server that
// does not stream).
bool WholeReply(const absl::StatusOr<net::HttpResponse>& answer) {
  return answer.ok() && answer->Header("content-type").value_or("").starts_with("application/json");
}

// " (after 2 requests)" appended, code kept.
absl::Status After(const absl::Status& s, int requests, absl::string_view more = "") {
  return absl::Status(s.code(), absl::StrCat(s.message(), more, " (after ", requests,
                                             requests == 1 ? " request)" : " requests)"));
}

// The attempt loop (~100 lines kept whole: each exit shares the attempt's state).
absl::StatusOr<LlmResponse> HttpLlmProvider::Complete(StepContext& ctx, const LlmRequest& request) {
  const ProviderConfig& p = options_.config;
  std::string key;
  if (!p.api_key_secret.empty()) {
    absl::StatusOr<std::string> resolved = options_.resolve_secret(p.api_key_secret);
    if (!resolved.ok()) {
      return WithRequests(absl::FailedPreconditionError(absl::StrCat(
                              "provider '", p.name, "': API key: ", resolved.status().message())),
                          0);
    }
    key = *std::move(resolved);
  }
  net::HttpRequest http = BuildRequest(request, key);
  // A streamed reply is read as it arrives (llm/internal/stream.h); one
  // reader per attempt.
  std::optional<llm_internal::StreamReader> stream;
  if (request.stream) {
    http.on_data = [&stream](std::string_view bytes) { stream->Feed(bytes); };
  }
  // A stream found malformed mid-way is aborted like a stop.
  auto malformed = [&stream] { return stream.has_value() && !stream->error().ok(); };
  // Polled by the client while a request runs: a cancel ends it too.
  http.cancelled = [&ctx, &malformed] { return ctx.Stopping() || malformed(); };
  const absl::Time deadline = ctx.deadline();
  // Requests sent whose answers were lost (LlmResponse::maybe_billed).
  int maybe_billed = 0;
  auto fail = [&maybe_billed](absl::Status s, int requests) {
    return WithMaybeBilled(WithRequests(std::move(s), requests), maybe_billed);
  };
  for (int attempt = 1;; ++attempt) {
    if (ctx.Stopping()) {
      return fail(absl::CancelledError("llm call stopped"), attempt - 1);
    }
    const absl::Duration left = deadline - ctx.clock()->Now();
    if (left <= absl::ZeroDuration()) {
      return fail(absl::DeadlineExceededError(
                              absl::StrCat("provider '", p.name, "': the step's deadline passed")),
                          attempt - 1);
    }
    http.total_timeout = std::min(p.timeout, left);
    if (request.stream) {
      // What the last attempt streamed is void now.
      if (stream.has_value() && stream->deltas() > 0 && request.on_stream_reset) {
        request.on_stream_reset();
      }
      stream.emplace(p.kind, request.on_delta);
    }
    absl::StatusOr<net::HttpResponse> answer = net::SendHttp(http);
    if (!answer.ok() && net::WasSent(answer.status())) ++maybe_billed;
    // Aborted by us: the stream went wrong (Finish says how).
    const bool stream_failed =
        !answer.ok() && absl::IsCancelled(answer.status()) && malformed() && !ctx.Stopping();
    if (!answer.ok() && absl::IsCancelled(answer.status()) && !stream_failed) {
      // Stopping() also turns true at the step's deadline.
      if (ctx.clock()->Now() >= deadline) {
        return fail(
            absl::DeadlineExceededError(absl::StrCat(
                "provider '", p.name, "': the step's deadline passed during the request")),
            attempt);
      }
      return fail(absl::CancelledError("llm call stopped"), attempt);
    }
    absl::Status failure;
    std::optional<absl::Duration> asked;
    bool retryable = false;
    RateLimitTelemetry telemetry;  // for the concurrency controller (llm/rate_limit.h)
    if (stream_failed || (answer.ok() && IsSuccess(answer->status))) {
      absl::StatusOr<LlmResponse> out =
          stream.has_value() && !WholeReply(answer) ? stream->Finish() : Parse(*answer);
      // A server that ignored "stream": one piece.
      if (stream.has_value() && WholeReply(answer) && out.ok() && !out->text.empty() &&
          request.on_delta) {
        request.on_delta(out->text);
      }
      const bool retry_stream = stream.has_value() && (absl::IsUnavailable(out.status()) ||
                                                       absl::IsResourceExhausted(out.status()));
      if (retry_stream) {
        // Cut, or an error event such as overloaded_error: retried as a 5xx.
        if (answer.ok()) telemetry = ParseRateLimitHeaders(answer->headers);
        // Text the model generated is billed, though the answer is lost.
        if (answer.ok() && stream->deltas() > 0) ++maybe_billed;
        failure =
            absl::Status(out.status().code(),
                         absl::StrCat("provider '", p.name, "' (", ToString(p.kind),
                                      "): ", Scrub(std::string(out.status().message()), key)));
        retryable = true;
      } else if (!out.ok()) {
        // A success the caller cannot read was billed all the same.
        if (answer.ok()) ++maybe_billed;
        return fail(
            absl::Status(out.status().code(), Scrub(std::string(out.status().message()), key)),
            attempt);
      } else {
        if (out->model.empty()) out->model = request.model;
        out->requests = attempt;
        out->maybe_billed = maybe_billed;
        out->rate_limit = ParseRateLimitHeaders(answer->headers);
        return out;
      }
    }
    // The call fails with `failure`: after how many requests, and what the
    // last answer said about the provider's limits.
    auto give_up = [&](absl::string_view more = "") {
      absl::Status s = After(failure, attempt, more);
      AttachRateLimit(s, telemetry);
      return fail(std::move(s), attempt);
    };
    if (retryable) {
      // A streamed success that was cut: `failure` is set.
    } else if (answer.ok()) {
      telemetry = ParseRateLimitHeaders(answer->headers);
      failure =
          AnswerError(p, answer->status, Scrub(llm_internal::ErrorBodyMessage(answer->body), key));
      retryable = llm_internal::IsRetryableHttpStatus(answer->status);
      asked = llm_internal::RetryAfter(Header(*answer, "retry-after-ms"),
                                       Header(*answer, "retry-after"), ctx.clock()->Now());
    } else {
      // A body over the bound is the provider's fault, not a rate limit.
      const absl::StatusCode code = answer.status().code() == absl::StatusCode::kResourceExhausted
                                        ? absl::StatusCode::kUnknown
                                        : answer.status().code();
      const std::string cut =
          stream.has_value() && stream->bytes() > 0
              ? absl::StrCat("the stream was cut after ", stream->bytes(), " bytes: ")
              : "";
      failure =
          absl::Status(code, absl::StrCat("provider '", p.name, "' (", ToString(p.kind), "): ", cut,
                                          Scrub(std::string(answer.status().message()), key)));
      retryable =
          code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded;
    }
    if (!retryable || attempt >= p.retry.max_attempts) return give_up();
    if (asked.has_value() && *asked > p.retry.max_delay) {
      return give_up(absl::StrCat("; it asks to wait ", absl::FormatDuration(*asked),
                                  ", longer than retry.max_delay"));
    }
    const absl::Duration wait = asked.value_or(Backoff(attempt));
    const absl::Time until = ctx.clock()->Now() + wait;
    if (until >= deadline) {
      // No time left to wait: the step's own retry policy decides.
      return give_up();
    }
    // The concurrency controller hears of this answer now, not only through
    // the call's final status (a 429 cuts the cap at once).
    if (request.on_retry) request.on_retry(failure, telemetry);
    if (!ctx.SleepUntil(until)) {
      return fail(absl::CancelledError("llm call stopped while waiting to retry"), attempt);
    }
  }
}

}  // namespace

std::shared_ptr<LlmProvider> NewHttpLlmProvider(HttpProviderOptions options) {
  return std::make_shared<HttpLlmProvider>(std::move(options));
}

}  // namespace runloom
