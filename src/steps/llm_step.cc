// The llm step kind: one model call through the provider registry.
#include "runloom/events.h"
#include "runloom/workflow.h"

#include "core/bounded_json.h"
#include "core/check.h"
#include "core/injected_bug.h"
#include "core/log.h"
#include "core/status_macros.h"
#include "llm/config.h"
#include "llm/conversation.h"
#include "llm/json_schema.h"
#include "llm/llm_concurrency.h"
#include "steps/builtin_steps.h"
#include "steps/internal/config.h"
#include "steps/internal/snippet.h"

#include "absl/strings/str_cat.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace runloom {
namespace {

using steps_internal::ConfigReader;

constexpr char kDefaultModel[] = "fake";
constexpr int64_t kMaxTokensLimit = 1'000'000;
using steps_internal::Snippet;
// The budget's worst case of a call: the prompt counted as one token per
// byte (no tokenizer makes more tokens than bytes), and max_tokens
// completion tokens, or this many when neither the step nor the model sets
// max_tokens (then the provider's own cap may be higher: set max_tokens).
constexpr int64_t kUnsetMaxTokensEstimate = 4096;

struct LlmCall {
  std::string alias;  // the step's `model:`
  LlmRequest request;
  ModelRoute route;                    // route.provider is null while the model is a template
  std::shared_ptr<JsonSchema> schema;  // the compiled response_schema, if any
};

// The prompt a step record keeps for the operators' model-call inspector
// (issue 25): the first kMaxRecordedPromptBytes, cut at a UTF-8 character
// boundary, with "truncated" set when cut. The engine scrubs the run's
// secrets from a step's output before it is stored (engine/run/secrets.h).
constexpr size_t kMaxRecordedPromptBytes = 16 * 1024;

// The first kMaxRecordedPromptBytes of `text` or fewer, ending before a
// UTF-8 continuation byte (0b10xxxxxx), so no character is split.
std::string_view RecordedPrefix(std::string_view text) {
  if (text.size() <= kMaxRecordedPromptBytes) return text;
  size_t end = kMaxRecordedPromptBytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

nlohmann::json RecordedPrompt(const LlmRequest& request) {
  const std::string_view user = RecordedPrefix(request.prompt);
  const std::string_view system = RecordedPrefix(request.system);
  nlohmann::json out = {{"user", user}};
  if (!request.system.empty()) out["system"] = system;
  if (user.size() < request.prompt.size() || system.size() < request.system.size()) {
    out["truncated"] = true;
  }
  return out;
}

// Models often wrap JSON in a ```json fence; accept that.
std::string StripCodeFence(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t\r\n");
  const size_t end = text.find_last_not_of(" \t\r\n");
  if (begin == std::string::npos) {
    return "";
  }
  std::string body = text.substr(begin, end + 1 - begin);
  if (body.rfind("```", 0) != 0 || body.size() < 6 ||
      body.compare(body.size() - 3, 3, "```") != 0) {
    return body;
  }
  const size_t first_newline = body.find('\n');
  if (first_newline == std::string::npos) {
    return body;
  }
  return body.substr(first_newline + 1, body.size() - 3 - (first_newline + 1));
}

absl::StatusOr<nlohmann::json> ParseJsonReply(const std::string& text) {
  const std::string body = StripCodeFence(text);
  const std::string snippet = Snippet(body);
  absl::StatusOr<nlohmann::json> parsed = ParseJsonBounded(body, "llm reply", StepOutputLimits());
  if (!parsed.ok()) {
    if (IsLimitError(parsed.status())) return parsed.status();
    return absl::InvalidArgumentError(
        absl::StrCat("llm reply is not a JSON object: ", snippet, " (", parsed.status().message(),
                     "); ask for a JSON object in the prompt, or use response_format: text"));
  }
  nlohmann::json value = *std::move(parsed);
  if (!value.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("llm reply is not a JSON object: got ", value.type_name(), " ", snippet));
  }
  return value;
}

// What a call may cost at most, at its route's prices (0 when unpriced).
int64_t WorstCaseMicros(const LlmCall& call) {
  const int64_t prompt_tokens =
      static_cast<int64_t>(call.request.prompt.size() + call.request.system.size());
  return CallCostMicros(call.route.input_micros_per_1k, call.route.output_micros_per_1k,
                        prompt_tokens, call.request.max_tokens.value_or(kUnsetMaxTokensEstimate));
}

// Books a budgeted call's real cost (the context retries a settle that did
// not reach the store); a failure is logged, never the call's. A
// reservation left open is released by the run's next lease, or by the
// sweeper when the lease expires.
void Settle(StepContext& ctx, bool budgeted, int64_t cost_micros) {
  if (!budgeted) return;
  absl::Status s = ctx.SettleBudget(cost_micros);
  if (!s.ok()) {
    Log(ctx.logger(), LogLevel::kWarning, "run ", ctx.run_id(), ": step ", ctx.step_path(),
        ": settling the model call's cost (", cost_micros, " micro-units) failed: ", s.ToString());
  }
}

class LlmStep final : public StepKind {
 public:
  LlmStep(std::shared_ptr<LlmProviderRegistry> providers,
          std::shared_ptr<LlmConcurrency> concurrency)
      : providers_(std::move(providers)), concurrency_(std::move(concurrency)) {
    RUNLOOM_CHECK(providers_ != nullptr) << "the llm step needs a provider registry";
  }

  // One model call, its provider's own retries of a rate limit or a cut
  // stream included (an agent's turn too).
  absl::Duration DefaultTimeout() const override { return absl::Minutes(10); }

  absl::Status Validate(const StepDef& def) const override {
    RUNLOOM_ASSIGN_OR_RETURN(LlmCall call, Parse(def.config, /*unresolved=*/true));
    if (call.route.provider != nullptr) {
      return call.route.provider->ValidateOptions(call.request.options);
    }
    return absl::OkStatus();
  }

  LlmConcurrency* concurrency() const { return concurrency_.get(); }

  absl::StatusOr<StepOutput> Execute(StepContext& ctx, const nlohmann::json& config) override {
    RUNLOOM_ASSIGN_OR_RETURN(LlmCall call, Parse(config, /*unresolved=*/false));
    // Paid for in advance: the worst case is reserved before anything is
    // sent; a call the run or its tenant cannot cover is not sent (the
    // engine ends the run budget_stopped).
    bool budgeted = false;
    const int64_t worst = WorstCaseMicros(call);
    if (worst > 0) {
      absl::StatusOr<ReserveResult> reserved = ctx.ReserveBudget(worst);
      if (reserved.ok() && !reserved->granted) {
        return absl::CancelledError(absl::StrCat("llm model '", call.alias, "': the ",
                                                 reserved->refused_by,
                                                 " budget cannot cover the call; it was not sent"));
      }
      if (!reserved.ok() && !absl::IsUnimplemented(reserved.status())) {
        return Annotate(reserved.status(), absl::StrCat("llm model '", call.alias, "': budget"));
      }
      budgeted = reserved.ok();
    }
    // A slot under the provider's concurrency cap for the call's duration.
    LlmSlots* slots = concurrency_ ? concurrency_->SlotsFor(call.route.provider.get()) : nullptr;
    std::optional<LlmSlots::Slot> slot;
    if (slots != nullptr) {
      absl::StatusOr<LlmSlots::Slot> acquired = slots->Acquire(ctx);
      if (!acquired.ok()) {
        Settle(ctx, budgeted, 0);  // nothing was sent
        return Annotate(acquired.status(), absl::StrCat("llm model '", call.request.model, "'"));
      }
      slot.emplace(*std::move(acquired));
      call.request.on_retry = [&slot](const absl::Status& s, const RateLimitTelemetry& t) {
        slot->Report(s, t);
      };
    }
    LlmCallData record{.path = ctx.step_path(),
                       .attempt = ctx.attempt(),
                       .model = call.alias,
                       .provider = call.route.provider_name,
                       .provider_model = call.route.model == call.alias ? "" : call.route.model};
    if (call.request.stream) {
      // Each piece to the run's live subscribers as it arrives (issue 24).
      call.request.on_delta = [&ctx](std::string_view text) { ctx.StreamDelta(text); };
      call.request.on_stream_reset = [&ctx] { ctx.StreamReset(); };
    }
    // The call's span (runloom/trace.h): a child of the step attempt's; the
    // request carries it as traceparent.
    const std::optional<TraceContext> step_trace = ctx.trace();
    std::string call_span;
    if (step_trace.has_value()) {
      call_span = SpanIdOf(step_trace->span_id + " llm");
      call.request.traceparent = TraceParentOf({step_trace->trace_id, call_span});
    }
    const absl::Time start = ctx.clock()->Now();
    absl::StatusOr<LlmResponse> response = call.route.provider->Complete(ctx, call.request);
    const absl::Time end = ctx.clock()->Now();
    record.latency_ms = absl::ToInt64Milliseconds(end - start);
    // Attributes after the OpenTelemetry GenAI conventions (gen_ai.*).
    auto trace_call = [&](int64_t booked) {
      if (call_span.empty()) return;
      TraceSpan span{.span_id = call_span,
                     .name = absl::StrCat("llm ", call.alias),
                     .kind = SpanKind::kClient,
                     .start = start,
                     .end = end};
      span.attributes = {
          {"gen_ai.request.model", call.route.model},
          {"gen_ai.system", call.route.provider_name},
          {"runloom.model", call.alias},
          {"runloom.cost_micros", booked},
          {"runloom.requests", response.ok() ? response->requests : RequestsOf(response.status())}};
      if (response.ok()) {
        span.attributes["gen_ai.usage.input_tokens"] = response->usage.prompt_tokens;
        span.attributes["gen_ai.usage.output_tokens"] = response->usage.completion_tokens;
        span.attributes["gen_ai.response.model"] = response->model;
      } else {
        span.error = true;
        span.error_message = std::string(response.status().message());
      }
      ctx.RecordSpan(std::move(span));
    };
    if (slot) {
      slot->Finish(response.status(),
                   response.ok() ? response->rate_limit : RateLimitOf(response.status()));
    }
    if (!response.ok()) {
      // A request refused with an HTTP status reports no usage and costs
      // nothing; one whose answer was lost after it was sent (a timeout, a
      // cancel mid-flight, a cut stream) may have been billed, so it is
      // booked at its worst case, as recovery books a call whose executor
      // died (budget_ledger.h). Settling 0 there would replace the charge
      // a recovery already made with nothing.
      const int64_t charged = MaybeBilledOf(response.status()) * worst;
      Settle(ctx, budgeted,
             RUNLOOM_INJECTED_BUG(InjectedBug::kLostAnswerBookedFree) ? 0 : charged);
      record.cost_micros = charged;
      trace_call(charged);
      record.outcome = "error";
      record.error_class = ErrorClassOf(response.status());
      record.requests = RequestsOf(response.status());
      ctx.RecordEvent(LlmCallEvent(ctx.run_id(), record));
      return WithRequests(Annotate(response.status(), absl::StrCat("llm model '", call.alias, "'")),
                          record.requests);
    }
    // The answer's cost, and the worst case of each earlier request of the
    // call whose answer was lost (it may have been billed too).
    const int64_t cost = CostMicros(call.route, response->usage) + response->maybe_billed * worst;
    Settle(ctx, budgeted, cost);
    trace_call(cost);
    record.input_tokens = response->usage.prompt_tokens;
    record.output_tokens = response->usage.completion_tokens;
    record.cost_micros = cost;
    record.requests = response->requests;
    StepOutput out;
    nlohmann::json calls = nlohmann::json::array();
    for (const LlmToolCall& c : response->tool_calls) {
      calls.push_back({{"id", c.id}, {"name", c.name}, {"arguments", c.arguments}});
    }
    out.output = {{"text", response->text},
                  {"model", response->model},
                  {"provider", call.route.provider_name},
                  {"usage",
                   {{"prompt_tokens", response->usage.prompt_tokens},
                    {"completion_tokens", response->usage.completion_tokens},
                    {"cost_micros", cost}}},
                  {"latency_ms", record.latency_ms},
                  {"prompt", RecordedPrompt(call.request)}};
    if (!calls.empty()) out.output["tool_calls"] = std::move(calls);
    // An agent's turn that calls tools is not its answer: only a reply
    // without tool calls is held to the JSON reply and its schema.
    if (call.request.json_mode && response->tool_calls.empty()) {
      absl::StatusOr<nlohmann::json> reply = ParseJsonReply(response->text);
      if (reply.ok() && call.schema != nullptr) {
        if (absl::Status s = call.schema->Validate(*reply); !s.ok()) reply = s;
      }
      if (!reply.ok()) {
        record.outcome = "invalid";
        record.error_class = ErrorClassOf(reply.status());
        ctx.RecordEvent(LlmCallEvent(ctx.run_id(), record));
        return reply.status();
      }
      out.output["json"] = *std::move(reply);
    }
    record.outcome = "ok";
    ctx.RecordEvent(LlmCallEvent(ctx.run_id(), record));
    return out;
  }

 private:
  absl::StatusOr<LlmCall> Parse(const nlohmann::json& config, bool unresolved) const {
    ConfigReader r("llm", config, unresolved);
    // An agent's turn (engine/run/agent_step.cc) adds its tools and the
    // conversation so far under the internal keys, after templates; a
    // workflow file cannot write them (Validate parses with unresolved).
    RUNLOOM_RETURN_IF_ERROR(
        unresolved ? r.CheckKeys({"model", "prompt", "system", "response_format",
                                  "response_schema", "max_tokens", "fake", "stream"})
                   : r.CheckKeys({"model", "prompt", "system", "response_format",
                                  "response_schema", "max_tokens", "fake", "stream",
                                  kAgentToolsKey, kAgentHistoryKey}));
    LlmCall call;
    LlmRequest& req = call.request;
    RUNLOOM_ASSIGN_OR_RETURN(std::optional<std::string> model, r.String("model"));
    call.alias = model.value_or(kDefaultModel);
    if (!r.Deferred("model")) {
      absl::StatusOr<ModelRoute> route = providers_->Route(call.alias);
      if (!route.ok()) {
        return Annotate(route.status(), "llm step");
      }
      call.route = *std::move(route);
      req.model = call.route.model;
      req.max_tokens = call.route.max_tokens;
    }
    if (!r.Has("prompt")) {
      return r.Missing("prompt", "prompt: \"Summarize {{ inputs.topic }}\"");
    }
    RUNLOOM_ASSIGN_OR_RETURN(std::optional<std::string> prompt, r.String("prompt"));
    req.prompt = prompt.value_or("");
    RUNLOOM_ASSIGN_OR_RETURN(std::optional<std::string> system, r.String("system"));
    req.system = system.value_or("");
    RUNLOOM_ASSIGN_OR_RETURN(std::optional<std::string> format, r.String("response_format"));
    if (format.has_value() && !r.Deferred("response_format")) {
      if (*format != "text" && *format != "json") {
        return r.Error("response_format", absl::StrCat("is '", *format, "'; allowed: text, json"));
      }
      req.json_mode = *format == "json";
    }
    if (r.Has("response_schema")) {
      if (!r.Deferred("response_format") && !req.json_mode) {
        return r.Error("response_schema",
                       "needs response_format: json (the schema checks a JSON reply)");
      }
      absl::StatusOr<std::unique_ptr<JsonSchema>> schema =
          JsonSchema::Compile(r.Get("response_schema"));
      if (!schema.ok()) return Annotate(schema.status(), "llm step");
      call.schema = std::shared_ptr<JsonSchema>(*std::move(schema));
      req.json_schema = r.Get("response_schema");
    }
    RUNLOOM_ASSIGN_OR_RETURN(std::optional<int64_t> max_tokens,
                             r.Int("max_tokens", 1, kMaxTokensLimit));
    if (max_tokens.has_value()) req.max_tokens = max_tokens;
    if (r.Has("fake")) {
      req.options = r.Get("fake");
    }
    RUNLOOM_ASSIGN_OR_RETURN(std::optional<bool> stream, r.Bool("stream"));
    req.stream = stream.value_or(false);
    if (!unresolved && config.contains(kAgentToolsKey)) {
      RUNLOOM_ASSIGN_OR_RETURN(req.tools, AgentToolsFromJson(config[kAgentToolsKey]));
    }
    if (!unresolved && config.contains(kAgentHistoryKey)) {
      RUNLOOM_ASSIGN_OR_RETURN(req.history, AgentHistoryFromJson(config[kAgentHistoryKey]));
    }
    return call;
  }

  const std::shared_ptr<LlmProviderRegistry> providers_;
  const std::shared_ptr<LlmConcurrency> concurrency_;  // null: no caps
};

}  // namespace

std::shared_ptr<StepKind> NewLlmStep(std::shared_ptr<LlmProviderRegistry> providers,
                                     std::shared_ptr<LlmConcurrency> concurrency) {
  return std::make_shared<LlmStep>(std::move(providers), std::move(concurrency));
}

LlmConcurrency* LlmConcurrencyOf(const StepRegistry& registry) {
  const auto* llm = dynamic_cast<const LlmStep*>(registry.Find("llm").get());
  return llm != nullptr ? llm->concurrency() : nullptr;
}

}  // namespace runloom
