// The http step kind: one HTTP request; with `write: true`, an external
// write made exactly once in effect through the write_operations ledger
// (runloom/write_ledger.h). Config keys: steps/http_config.h.
//
// A write, in order: record the intent (fenced by the lease) -> send with
// the Idempotency-Key -> record the result. An attempt that finds the
// intent with no result (the previous attempt's response was lost, or its
// executor died between sending and recording) reconciles before anything
// else: the lookup request when the step has one, else the same request
// with the same Idempotency-Key, which the server must apply once. A
// response that says nothing certain (a transport error, 429, 5xx) leaves
// the intent open for the next attempt; a result is recorded only from an
// answer.
#include "runloom/workflow.h"

#include "core/digest.h"
#include "core/injected_bug.h"
#include "core/log.h"
#include "core/status_macros.h"
#include "steps/builtin_steps.h"
#include "steps/http_config.h"
#include "steps/http_exchange.h"
#include "steps/internal/snippet.h"

#include "absl/strings/str_cat.h"
#include "net/http_client.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace runloom {
namespace {

using steps_internal::Exchange;
using steps_internal::HttpStepConfig;
using steps_internal::Reply;
using steps_internal::StatusIn;

constexpr absl::Duration kDefaultTimeout = absl::Seconds(30);
constexpr int kTooManyRequests = 429;
constexpr int kFirstServerError = 500;
using steps_internal::Snippet;

// The request timeout: what is left of the step's deadline, else 30 s.
absl::Duration RequestTimeout(StepContext& ctx) {
  if (ctx.deadline() == absl::InfiniteFuture()) return kDefaultTimeout;
  return std::max(ctx.deadline() - ctx.clock()->Now(), absl::Milliseconds(1));
}

std::string Where(StepContext& ctx) {
  return absl::StrCat("run ", ctx.run_id(), " step ", ctx.step_path());
}

// The error of an answer that is not a success. 429 and 5xx are transient
// (retried by the step's policy); any other status is a refusal.
absl::Status AnswerError(const std::string& what, const Reply& reply) {
  const std::string msg =
      absl::StrCat(what, " answered HTTP ", reply.status, ": ", Snippet(reply.body));
  if (reply.status == kTooManyRequests) return absl::ResourceExhaustedError(msg);
  if (reply.status >= kFirstServerError) return absl::UnavailableError(msg);
  return absl::InvalidArgumentError(
      absl::StrCat(msg, "; change the request, or list the status under `expect`"));
}

StepOutput Output(int status, nlohmann::json body) {
  StepOutput out;
  out.output = {{"status", status}, {"body", std::move(body)}};
  return out;
}

class HttpStep final : public StepKind {
 public:
  explicit HttpStep(steps_internal::HttpSender send)
      : send_(send ? std::move(send) : steps_internal::HttpSender(&steps_internal::Send)) {}

  absl::Status Validate(const StepDef& def) const override {
    return steps_internal::ParseHttpConfig(def.config, /*unresolved=*/true).status();
  }
  absl::Duration DefaultTimeout() const override { return kDefaultTimeout; }

  // The step's request(s) under one span (runloom/trace.h), a child of the
  // attempt's, which each request carries as its traceparent.
  absl::StatusOr<StepOutput> Execute(StepContext& ctx, const nlohmann::json& config) override {
    const std::optional<TraceContext> step_trace = ctx.trace();
    if (!step_trace.has_value()) return ExecuteOnce(ctx, config, "");
    const std::string span_id = SpanIdOf(step_trace->span_id + " http");
    const absl::Time start = ctx.clock()->Now();
    absl::StatusOr<StepOutput> out =
        ExecuteOnce(ctx, config, TraceParentOf({step_trace->trace_id, span_id}));
    const std::string method = config.value("method", std::string("GET"));
    TraceSpan span{.span_id = span_id,
                   .name = absl::StrCat("http ", method),
                   .kind = SpanKind::kClient,
                   .start = start,
                   .end = ctx.clock()->Now()};
    span.attributes = {{"http.request.method", method}};
    if (auto url = config.find("url"); url != config.end() && url->is_string()) {
      span.attributes["url.full"] = net::RedactUrl(url->get<std::string>());
    }
    if (out.ok() && out->output.is_object()) {
      if (auto st = out->output.find("status"); st != out->output.end() && st->is_number()) {
        span.attributes["http.response.status_code"] = *st;
      }
    }
    if (!out.ok()) {
      span.error = true;
      span.error_message = std::string(out.status().message());
    }
    ctx.RecordSpan(std::move(span));
    return out;
  }

 private:
  absl::StatusOr<StepOutput> ExecuteOnce(StepContext& ctx, const nlohmann::json& config,
                                         const std::string& traceparent) const {
    RUNLOOM_ASSIGN_OR_RETURN(HttpStepConfig cfg,
                             steps_internal::ParseHttpConfig(config, /*unresolved=*/false));
    Exchange request;
    if (!traceparent.empty()) request.headers.emplace_back("traceparent", traceparent);
    request.method = cfg.method;
    request.url = cfg.url;
    request.max_response_bytes = cfg.max_response_bytes;
    request.cancelled = [&ctx] { return ctx.Stopping(); };
    for (const auto& [name, value] : cfg.headers) {
      std::string text = value.prefix;
      if (value.secret_name.has_value()) {
        absl::StatusOr<std::string> secret = ctx.ResolveSecret(*value.secret_name);
        if (!secret.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("http step: header '", name, "': ", secret.status().message()));
        }
        text += *secret;
      }
      request.headers.emplace_back(name, std::move(text));
    }
    if (cfg.body.has_value()) request.body = cfg.body->dump();
    if (!cfg.write) {
      request.timeout = RequestTimeout(ctx);
      RUNLOOM_ASSIGN_OR_RETURN(Reply reply, send_(request));
      if (!StatusIn(cfg.expect, reply.status)) {
        return AnswerError(absl::StrCat(cfg.method, " ", net::RedactUrl(cfg.url)), reply);
      }
      return Output(reply.status, steps_internal::BodyJson(reply.body));
    }
    return Write(ctx, cfg, std::move(request));
  }

  absl::StatusOr<StepOutput> Write(StepContext& ctx, const HttpStepConfig& cfg,
                                   Exchange request) const;
  // The reconciliation of an intent with no result: the recorded output
  // when the lookup finds the write applied; nullopt when the write must be
  // sent (lookup: missing); an error when nothing certain is known.
  absl::StatusOr<std::optional<StepOutput>> Reconcile(StepContext& ctx, const HttpStepConfig& cfg,
                                                      const Exchange& request,
                                                      const std::string& key) const;
  absl::StatusOr<StepOutput> Recorded(StepContext& ctx, const HttpStepConfig& cfg,
                                      const WriteOperation& op) const;

  const steps_internal::HttpSender send_;  // constant: Execute may run on many threads
};

absl::StatusOr<StepOutput> HttpStep::Recorded(StepContext& ctx, const HttpStepConfig& cfg,
                                              const WriteOperation& op) const {
  const WriteResult& r = *op.result;
  // A lookup's answer stands for the write's success: it found it applied.
  if (r.source != "lookup" && !StatusIn(cfg.expect, r.http_status)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(ctx), ": write '", cfg.action, "' was refused with HTTP ", r.http_status,
                     ": ", Snippet(r.response.dump()), " (recorded, ", r.source,
                     "); it is not sent again: give a changed request another `action`"));
  }
  StepOutput out = Output(r.http_status, r.response);
  out.output["write"] = {
      {"action", cfg.action}, {"idempotency_key", op.idempotency_key}, {"source", r.source}};
  return out;
}

absl::StatusOr<std::optional<StepOutput>> HttpStep::Reconcile(StepContext& ctx,
                                                              const HttpStepConfig& cfg,
                                                              const Exchange& request,
                                                              const std::string& key) const {
  Exchange lookup = request;
  lookup.method = cfg.lookup->method;
  lookup.url = cfg.lookup->url;
  lookup.body.clear();
  lookup.headers.emplace_back("Idempotency-Key", key);
  lookup.timeout = RequestTimeout(ctx);
  absl::StatusOr<Reply> reply = send_(lookup);
  if (!reply.ok()) {
    return absl::UnavailableError(absl::StrCat(Where(ctx), ": write '", cfg.action,
                                               "' has an intent without a result and its lookup "
                                               "failed (",
                                               reply.status().message(), "); nothing was resent"));
  }
  if (StatusIn(cfg.lookup->found, reply->status)) {
    Log(ctx.logger(), LogLevel::kInfo, "http write: ", Where(ctx), " action ", cfg.action,
        ": lookup found the write applied (HTTP ", reply->status, "); recorded, not resent");
    RUNLOOM_ASSIGN_OR_RETURN(
        WriteOperation op,
        ctx.FinishWrite(cfg.action, {.http_status = reply->status,
                                     .response = steps_internal::BodyJson(reply->body),
                                     .source = "lookup"}));
    RUNLOOM_ASSIGN_OR_RETURN(StepOutput out, Recorded(ctx, cfg, op));
    return std::optional<StepOutput>(std::move(out));
  }
  if (StatusIn(cfg.lookup->missing, reply->status)) {
    Log(ctx.logger(), LogLevel::kInfo, "http write: ", Where(ctx), " action ", cfg.action,
        ": lookup found no such write (HTTP ", reply->status, "); sending it with key ", key);
    return std::optional<StepOutput>();
  }
  return absl::UnavailableError(absl::StrCat(Where(ctx), ": write '", cfg.action,
                                             "' has an intent without a result and its lookup "
                                             "answered HTTP ",
                                             reply->status,
                                             ", neither found nor missing; nothing was resent"));
}

absl::StatusOr<StepOutput> HttpStep::Write(StepContext& ctx, const HttpStepConfig& cfg,
                                           Exchange request) const {
  const std::string key = DeriveIdempotencyKey({.run_id = ctx.run_id(),
                                                .step_path = ctx.step_path(),
                                                .action = cfg.action,
                                                .decision = ctx.write_decision()});
  // Headers stay out of the digest: they may hold secrets.
  const std::string digest = JsonDigest(
      {{"method", request.method},
       {"url", request.url},
       {"body", request.body.empty() ? nlohmann::json(nullptr) : nlohmann::json(request.body)}});
  if (RUNLOOM_INJECTED_BUG(InjectedBug::kWriteIntentNotRecorded)) {
    request.headers.emplace_back("Idempotency-Key", key);
    RUNLOOM_ASSIGN_OR_RETURN(Reply reply, send_(request));
    RUNLOOM_RETURN_IF_ERROR(ctx.BeginWrite(cfg.action, key, digest).status());
    RUNLOOM_ASSIGN_OR_RETURN(
        WriteOperation op,
        ctx.FinishWrite(cfg.action, {.http_status = reply.status,
                                     .response = steps_internal::BodyJson(reply.body),
                                     .source = "sent"}));
    return Recorded(ctx, cfg, op);
  }
  absl::StatusOr<BeginWriteResult> begin = ctx.BeginWrite(cfg.action, key, digest);
  if (!begin.ok()) {
    if (begin.status().code() == absl::StatusCode::kAborted) {
      return absl::CancelledError(
          absl::StrCat("lease lost before write '", cfg.action, "' was sent; nothing was sent"));
    }
    return begin.status();
  }
  if (begin->op.state == WriteState::kDone) {
    Log(ctx.logger(), LogLevel::kInfo, "http write: ", Where(ctx), " action ", cfg.action,
        ": already done (", begin->op.result->source, ", HTTP ", begin->op.result->http_status,
        "); not sent again");
    return Recorded(ctx, cfg, begin->op);
  }
  std::string source = "sent";
  if (!begin->created) {
    Log(ctx.logger(), LogLevel::kWarning, "http write: ", Where(ctx), " action ", cfg.action,
        ": intent without a result (begun ", begin->op.begins + 1,
        " times; a response was lost or its executor died); reconciling ",
        cfg.lookup.has_value() ? "by lookup" : "by resending with the same Idempotency-Key");
    if (cfg.lookup.has_value()) {
      RUNLOOM_ASSIGN_OR_RETURN(std::optional<StepOutput> found, Reconcile(ctx, cfg, request, key));
      if (found.has_value()) return std::move(*found);
    } else {
      source = "resent";
    }
  }
  request.headers.emplace_back("Idempotency-Key", key);
  request.timeout = RequestTimeout(ctx);
  absl::StatusOr<Reply> reply = send_(request);
  if (!reply.ok()) {
    Log(ctx.logger(), LogLevel::kWarning, "http write: ", Where(ctx), " action ", cfg.action,
        ": no answer (", reply.status().message(),
        "); the intent stays open and the next attempt reconciles");
    return reply.status();
  }
  const bool transient = reply->status == kTooManyRequests || reply->status >= kFirstServerError;
  if (!StatusIn(cfg.expect, reply->status) && transient) {
    return AnswerError(
        absl::StrCat("write '", cfg.action, "' ", request.method, " ", net::RedactUrl(request.url)),
        *reply);
  }
  RUNLOOM_ASSIGN_OR_RETURN(
      WriteOperation op,
      ctx.FinishWrite(cfg.action, {.http_status = reply->status,
                                   .response = steps_internal::BodyJson(reply->body),
                                   .source = source}));
  return Recorded(ctx, cfg, op);
}

}  // namespace

std::shared_ptr<StepKind> NewHttpStep() { return std::make_shared<HttpStep>(nullptr); }

namespace steps_internal {
std::shared_ptr<StepKind> NewHttpStepWith(HttpSender send) {
  return std::make_shared<HttpStep>(std::move(send));
}
}  // namespace steps_internal

}  // namespace runloom
