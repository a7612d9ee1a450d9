// The openai and anthropic providers, driven through the llm step kind
// against a scripted HTTP server on loopback: success, JSON mode with a
// schema, 429 with Retry-After, 5xx, timeout, a dropped connection; usage,
// cost and the llm.call event; the API key only in its header. Streamed
// replies (SSE) through the provider itself; the fake provider's stream.
//
// Waits run on a simulated clock that a retry's SleepUntil moves at once,
// so the backoffs cost no real time and their lengths are exact.
#include "runloom/clock.h"
#include "runloom/events.h"
#include "runloom/step.h"

#include "llm/config.h"
#include "llm/configured_registry.h"
#include "llm/fake_provider.h"
#include "llm/llm_concurrency.h"
#include "llm/rate_limit.h"
#include "steps/builtin_steps.h"
#include "testing/scripted_http_server.h"
#include "testing/status_matchers.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace runloom {
namespace {

using ::runloom::testing::ScriptedHttpServer;
using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;
using Reply = ScriptedHttpServer::Reply;

constexpr char kKey[] = "sk-test-9f8e7d6c5b4a";

// A StepContext whose SleepUntil moves the simulated clock to the wake-up
// time at once and remembers each wait.
class AutoClockContext final : public StepContext {
 public:
  const std::string& run_id() const override { return run_id_; }
  const std::string& step_path() const override { return path_; }
  int attempt() const override { return 1; }
  const std::string& working_dir() const override { return dir_; }
  Clock* clock() override { return &clock_; }
  absl::Time deadline() const override { return deadline_; }
  bool Stopping() override { return stopped_; }
  bool SleepUntil(absl::Time until) override {
    if (stopped_) return false;
    waits.push_back(until - clock_.Now());
    clock_.SetTime(until);
    return true;
  }
  void OnStop(std::function<void()>) override {}
  void RecordEvent(Event event) override { events.push_back(std::move(event)); }
  std::optional<TraceContext> trace() const override { return trace_; }
  void RecordSpan(TraceSpan span) override { spans.push_back(std::move(span)); }

  void set_deadline(absl::Time t) { deadline_ = t; }
  void set_trace(TraceContext t) { trace_ = std::move(t); }
  void Stop() { stopped_ = true; }
  absl::Time Now() { return clock_.Now(); }

  std::vector<absl::Duration> waits;
  std::vector<Event> events;
  std::vector<TraceSpan> spans;

 private:
  const std::string run_id_ = "r_0123456789abcdefghjkmn";
  const std::string path_ = "ask";
  const std::string dir_;
  SimulatedClock clock_;
  absl::Time deadline_ = absl::InfiniteFuture();
  std::atomic<bool> stopped_{false};
  std::optional<TraceContext> trace_;
};

struct Api {
  std::string kind;  // openai | anthropic
  std::string path;  // what the provider posts to
};
void PrintTo(const Api& api, std::ostream* os) { *os << api.kind; }

std::string OkBody(const Api& api, const std::string& text, int in, int out) {
  if (api.kind == "openai") {
    return json{{"model", "served-model"},
                {"choices", {{{"message", {{"role", "assistant"}, {"content", text}}}}}},
                {"usage", {{"prompt_tokens", in}, {"completion_tokens", out}}}}
        .dump();
  }
  return json{{"type", "message"},
              {"model", "served-model"},
              {"content", {{{"type", "text"}, {"text", text}}}},
              {"usage", {{"input_tokens", in}, {"output_tokens", out}}}}
      .dump();
}

class HttpProviderTest : public ::testing::TestWithParam<Api> {
 protected:
  void SetUp() override {
    auto server = ScriptedHttpServer::Start([this](const ScriptedHttpServer::Request&) {
      runloom::MutexLock l(&mu_);
      Reply r = script_.empty() ? Reply{.status = 500, .body = "unscripted"} : script_.front();
      if (script_.size() > 1) script_.erase(script_.begin());
      return r;
    });
    ASSERT_OK(server);
    server_ = *std::move(server);
  }

  void Script(std::vector<Reply> replies) {
    runloom::MutexLock l(&mu_);
    script_ = std::move(replies);
  }

  // The llm step over a config with one provider of the test's kind.
  std::shared_ptr<StepKind> Step(const std::string& timeout) {
    return NewLlmStep(Registry(timeout));
  }

  // The registry of that config: alias "smart" on provider "remote".
  std::shared_ptr<LlmProviderRegistry> Registry(const std::string& timeout) {
    const std::string yaml = absl::StrCat(
        "providers:\n  remote:\n    kind: ", GetParam().kind, "\n    base_url: ", server_->url(),
        "/v1\n    api_key: secret://TEST_KEY\n    timeout: ", timeout,
        "\n    connect_timeout: 1s\n",
        "    retry: {max_attempts: 3, initial_delay: 1s, max_delay: 10s}\n",
        "models:\n  smart:\n    provider: remote\n    model: big-model-v2\n",
        "    input_price_per_1k: 0.5\n    output_price_per_1k: 1.5\n    max_tokens: 77\n");
    absl::StatusOr<LlmConfig> config = ParseLlmConfig(yaml, "test.yaml");
    EXPECT_OK(config);
    auto registry = NewConfiguredRegistry(*config, [](const std::string& name) {
      return name == "TEST_KEY" ? absl::StatusOr<std::string>(kKey)
                                : absl::NotFoundError("no such secret");
    });
    EXPECT_OK(registry);
    return *registry;
  }

  absl::StatusOr<StepOutput> Call(const json& config, const std::string& timeout = "2s") {
    std::shared_ptr<StepKind> step = Step(timeout);
    StepDef def;
    def.id = "ask";
    def.kind = "llm";
    def.config = config;
    EXPECT_OK(step->Validate(def));
    return step->Execute(ctx_, config);
  }

  const json& LastCall() {
    static const json kNone;
    return ctx_.events.empty() ? kNone : ctx_.events.back().data;
  }

  // Nothing the step returned or recorded holds the key.
  void ExpectKeyNowhere(const absl::StatusOr<StepOutput>& out) {
    std::string all = out.ok() ? out->output.dump() : std::string(out.status().message());
    for (const Event& e : ctx_.events) all += e.data.dump();
    EXPECT_THAT(all, Not(HasSubstr(kKey)));
  }

  AutoClockContext ctx_;
  std::unique_ptr<ScriptedHttpServer> server_;
  runloom::Mutex mu_;
  std::vector<Reply> script_ ABSL_GUARDED_BY(mu_);
};

TEST_P(HttpProviderTest, SuccessSendsTheRequestAndRecordsUsageAndCost) {
  const Api& api = GetParam();
  Script({{.body = OkBody(api, "Rivers flow.", 1000, 2000)}});
  absl::StatusOr<StepOutput> out =
      Call({{"model", "smart"}, {"system", "Be terse."}, {"prompt", "Summarize rivers"}});
  ASSERT_OK(out);
  EXPECT_EQ(out->output["text"], "Rivers flow.");
  EXPECT_EQ(out->output["model"], "served-model");
  EXPECT_EQ(out->output["provider"], "remote");
  EXPECT_EQ(
      out->output["usage"],
      json({{"prompt_tokens", 1000}, {"completion_tokens", 2000}, {"cost_micros", 3'500'000}}));

  std::vector<ScriptedHttpServer::Request> requests = server_->requests();
  ASSERT_EQ(requests.size(), 1u);
  const ScriptedHttpServer::Request& r = requests[0];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, api.path);
  const json body = json::parse(r.body);
  EXPECT_EQ(body["model"], "big-model-v2");
  EXPECT_EQ(body["max_tokens"], 77);  // the alias's default
  if (api.kind == "openai") {
    EXPECT_EQ(r.headers.at("authorization"), absl::StrCat("Bearer ", kKey));
    EXPECT_EQ(body["messages"][0]["content"], "Be terse.");
  } else {
    EXPECT_EQ(r.headers.at("x-api-key"), kKey);
    EXPECT_EQ(r.headers.at("anthropic-version"), "2023-06-01");
    EXPECT_EQ(body["system"], "Be terse.");
  }
  EXPECT_THAT(r.body, Not(HasSubstr(kKey)));

  const json& call = LastCall();
  EXPECT_OK(ValidateEvent(ctx_.events.back()));
  EXPECT_EQ(call["outcome"], "ok");
  EXPECT_EQ(call["model"], "smart");
  EXPECT_EQ(call["provider"], "remote");
  EXPECT_EQ(call["provider_model"], "big-model-v2");
  EXPECT_EQ(call["input_tokens"], 1000);
  EXPECT_EQ(call["output_tokens"], 2000);
  EXPECT_EQ(call["cost_micros"], 3'500'000);
  EXPECT_EQ(call["requests"], 1);
  ExpectKeyNowhere(out);
}

const json kSchema = {{"type", "object"},
                      {"required", {"score"}},
                      {"properties", {{"score", {{"type", "integer"}, {"maximum", 10}}}}}};

TEST_P(HttpProviderTest, JsonModeWithASchemaAcceptsAMatch) {
  const Api& api = GetParam();
  Script({{.body = OkBody(api, "```json\n{\"score\": 8}\n```", 10, 5)}});
  absl::StatusOr<StepOutput> out = Call({{"model", "smart"},
                                         {"prompt", "grade"},
                                         {"response_format", "json"},
                                         {"response_schema", kSchema}});
  ASSERT_OK(out);
  EXPECT_EQ(out->output["json"], json({{"score", 8}}));
  const json body = json::parse(server_->requests().at(0).body);
  if (api.kind == "openai") {
    EXPECT_EQ(body["response_format"]["type"], "json_schema");
    EXPECT_EQ(body["response_format"]["json_schema"]["schema"], kSchema);
  } else {
    EXPECT_THAT(body["system"].get<std::string>(), HasSubstr("exactly one JSON object"));
  }
}

TEST_P(HttpProviderTest, JsonModeWithASchemaRefusesAMismatchAsInvalid) {
  Script({{.body = OkBody(GetParam(), "{\"score\": 11}", 10, 5)}});
  absl::StatusOr<StepOutput> out = Call({{"model", "smart"},
                                         {"prompt", "grade"},
                                         {"response_format", "json"},
                                         {"response_schema", kSchema}});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("does not match response_schema"));
  EXPECT_EQ(LastCall()["outcome"], "invalid");
  EXPECT_EQ(LastCall()["error_class"], "invalid");
  // Paid for: 10 tokens at 0.5 and 5 at 1.5 per 1,000 = 0.0125 units.
  EXPECT_EQ(LastCall()["cost_micros"], 12'500);
}

TEST_P(HttpProviderTest, RateLimitedHonoursRetryAfter) {
  const Api& api = GetParam();
  Script({{.status = 429,
           .headers = {{"retry-after", "2"}},
           .body = R"({"error": {"message": "slow down"}})"},
          {.status = 429, .headers = {{"retry-after-ms", "1500"}}, .body = "{}"},
          {.body = OkBody(api, "done", 3, 4)}});
  const absl::Time start = ctx_.Now();
  absl::StatusOr<StepOutput> out = Call({{"model", "smart"}, {"prompt", "x"}});
  ASSERT_OK(out);
  EXPECT_EQ(ctx_.waits, (std::vector<absl::Duration>{absl::Seconds(2), absl::Milliseconds(1500)}));
  EXPECT_EQ(server_->requests().size(), 3u);
  EXPECT_EQ(LastCall()["requests"], 3);
  EXPECT_EQ(LastCall()["latency_ms"], absl::ToInt64Milliseconds(ctx_.Now() - start));
  EXPECT_GE(LastCall()["latency_ms"].get<int64_t>(), 3500);
}

// Each answer the provider retries is told to the request's on_retry (the
// concurrency controller, through the llm step's slot) as it happens; the
// last answer is the call's own result.
TEST_P(HttpProviderTest, EachRetriedAnswerIsToldToOnRetry) {
  const Api& api = GetParam();
  Script({{.status = 429,
           .headers = {{"retry-after", "2"}, {"x-ratelimit-remaining-requests", "0"}},
           .body = "{}"},
          {.status = 503, .body = "{}"},
          {.body = OkBody(api, "done", 3, 4)}});
  absl::StatusOr<ModelRoute> route = Registry("2s")->Route("smart");
  ASSERT_OK(route);
  std::vector<std::pair<absl::StatusCode, RateLimitTelemetry>> told;
  LlmRequest request{.model = route->model, .prompt = "x"};
  request.on_retry = [&told](const absl::Status& s, const RateLimitTelemetry& t) {
    told.emplace_back(s.code(), t);
  };
  absl::StatusOr<LlmResponse> out = route->provider->Complete(ctx_, request);
  ASSERT_OK(out);
  ASSERT_EQ(told.size(), 2u);
  EXPECT_EQ(told[0].first, absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(told[0].second.retry_after, absl::Seconds(2));
  EXPECT_EQ(told[1].first, absl::StatusCode::kUnavailable);
  EXPECT_EQ(out->requests, 3);
}

// Through the llm step: a 429 the provider waits out, the retry answered,
// still cuts the provider's cap at once (without on_retry the controller
// saw only the final success and kept the cap at 6).
TEST_P(HttpProviderTest, ARetriedRateLimitCutsTheCapThroughTheLlmStep) {
  const Api& api = GetParam();
  std::shared_ptr<LlmProviderRegistry> registry = Registry("2s");
  absl::StatusOr<ModelRoute> route = registry->Route("smart");
  ASSERT_OK(route);
  auto concurrency = std::make_shared<LlmConcurrency>();
  concurrency->Add("remote", route->provider.get(),
                   ConcurrencyOptions{.static_cap = 6, .ttl = absl::Hours(1)});
  std::unique_ptr<LlmConcurrency::Running> running =
      concurrency->Start(nullptr, ControllerDeps{.clock = ctx_.clock()});
  ASSERT_NE(running, nullptr);
  Script({{.status = 429, .headers = {{"retry-after", "1"}}, .body = "{}"},
          {.body = OkBody(api, "done", 1, 1)}});
  std::shared_ptr<StepKind> step = NewLlmStep(registry, concurrency);
  const json config = {{"model", "smart"}, {"prompt", "x"}};
  StepDef def;
  def.id = "ask";
  def.kind = "llm";
  def.config = config;
  ASSERT_OK(step->Validate(def));
  ASSERT_OK(step->Execute(ctx_, config));
  EXPECT_EQ(server_->requests().size(), 2u);
  std::vector<LlmConcurrency::CapState> caps = concurrency->Caps(ctx_.clock());
  ASSERT_EQ(caps.size(), 1u);
  EXPECT_EQ(caps[0].cap, 3);
  EXPECT_EQ(caps[0].in_flight, 0);
}

TEST_P(HttpProviderTest, RateLimitedToTheEndIsRateLimited) {
  Script({{.status = 429,
           .headers = {{"retry-after", "1"}},
           .body = R"({"error": {"message": "quota"}})"}});
  absl::StatusOr<StepOutput> out = Call({{"model", "smart"}, {"prompt", "x"}});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("HTTP 429: quota (after 3 requests)"));
  EXPECT_EQ(LastCall()["error_class"], "rate_limited");
  EXPECT_EQ(LastCall()["requests"], 3);
  EXPECT_EQ(LastCall()["cost_micros"], 0);
}

// The concurrency controller hears the provider's limits (llm/rate_limit.h):
// from a success's headers, and on the status of a call that failed.
TEST_P(HttpProviderTest, RateLimitHeadersReachTheConcurrencyController) {
  const Api& api = GetParam();
  const bool anthropic = api.kind == "anthropic";  // each API's own header names
  const std::string limit =
      anthropic ? "anthropic-ratelimit-requests-limit" : "x-ratelimit-limit-requests";
  const std::string remaining =
      anthropic ? "anthropic-ratelimit-requests-remaining" : "x-ratelimit-remaining-requests";
  absl::StatusOr<ModelRoute> route = Registry("2s")->Route("smart");
  ASSERT_OK(route);
  const LlmRequest request{.model = route->model, .prompt = "x"};

  Script({{.headers = {{limit, "600"}, {remaining, "42"}}, .body = OkBody(api, "ok", 1, 1)}});
  absl::StatusOr<LlmResponse> ok = route->provider->Complete(ctx_, request);
  ASSERT_OK(ok);
  EXPECT_EQ(ok->rate_limit.limit_requests, 600);
  EXPECT_EQ(ok->rate_limit.remaining_requests, 42);

  Script({{.status = 429,
           .headers = {{"retry-after", "1"}, {limit, "600"}, {remaining, "0"}},
           .body = "{}"}});
  absl::StatusOr<LlmResponse> limited = route->provider->Complete(ctx_, request);
  ASSERT_THAT(limited, StatusIs(absl::StatusCode::kResourceExhausted));
  const RateLimitTelemetry told = RateLimitOf(limited.status());
  EXPECT_EQ(told.limit_requests, 600);
  EXPECT_EQ(told.remaining_requests, 0);
  EXPECT_EQ(told.retry_after, absl::Seconds(1));
}

TEST_P(HttpProviderTest, ARetryAfterLongerThanMaxDelayIsNotWaited) {
  Script({{.status = 429, .headers = {{"retry-after", "600"}}, .body = "{}"}});
  absl::StatusOr<StepOutput> out = Call({{"model", "smart"}, {"prompt", "x"}});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("longer than retry.max_delay"));
  EXPECT_TRUE(ctx_.waits.empty());
  EXPECT_EQ(server_->requests().size(), 1u);
}

TEST_P(HttpProviderTest, ServerErrorsAreRetriedWithJitteredBackoff) {
  const Api& api = GetParam();
  Script({{.status = 500, .body = "oops"},
          {.status = 503, .body = "{}"},
          {.body = OkBody(api, "ok", 1, 1)}});
  ASSERT_OK(Call({{"model", "smart"}, {"prompt", "x"}}));
  ASSERT_EQ(ctx_.waits.size(), 2u);
  EXPECT_GE(ctx_.waits[0], absl::Milliseconds(500));  // 1s backoff, half of it fixed
  EXPECT_LE(ctx_.waits[0], absl::Seconds(1));
  EXPECT_GE(ctx_.waits[1], absl::Seconds(1));  // doubled
  EXPECT_LE(ctx_.waits[1], absl::Seconds(2));
}

TEST_P(HttpProviderTest, ServerErrorToTheEndIsUnavailable) {
  Script({{.status = 500, .body = R"({"error": {"message": "boom"}})"}});
  absl::StatusOr<StepOutput> out = Call({{"model", "smart"}, {"prompt", "x"}});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("answered HTTP 500: boom"));
  EXPECT_EQ(LastCall()["error_class"], "unavailable");
  EXPECT_EQ(server_->requests().size(), 3u);
}

TEST_P(HttpProviderTest, ATimeoutIsRetriedThenTimesOut) {
  Script({{.body = OkBody(GetParam(), "late", 1, 1), .delay = absl::Seconds(2)}});
  absl::StatusOr<StepOutput> out = Call({{"model", "smart"}, {"prompt", "x"}}, "300ms");
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(LastCall()["error_class"], "timeout");
  EXPECT_EQ(LastCall()["requests"], 3);
}

TEST_P(HttpProviderTest, ADroppedConnectionIsRetried) {
  const Api& api = GetParam();
  Script({{.drop = true}, {.body = OkBody(api, "second time", 2, 2)}});
  absl::StatusOr<StepOutput> out = Call({{"model", "smart"}, {"prompt", "x"}});
  ASSERT_OK(out);
  EXPECT_EQ(out->output["text"], "second time");
  EXPECT_EQ(LastCall()["requests"], 2);
  Script({{.drop = true}});
  out = Call({{"model", "smart"}, {"prompt", "x"}});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kUnavailable));
}

TEST_P(HttpProviderTest, AnEchoedKeyIsScrubbedAndABadKeyIsNotRetried) {
  Script(
      {{.status = 401,
        .body = json{{"error", {{"message", absl::StrCat("Incorrect API key provided: ", kKey)}}}}
                    .dump()}});
  absl::StatusOr<StepOutput> out = Call({{"model", "smart"}, {"prompt", "x"}});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("Incorrect API key provided: [secret]"));
  EXPECT_EQ(server_->requests().size(), 1u);
  ExpectKeyNowhere(out);
}

TEST_P(HttpProviderTest, AStopEndsARequestInFlight) {
  Script({{.body = OkBody(GetParam(), "late", 1, 1), .delay = absl::Seconds(30)}});
  std::thread stopper([this] {
    while (server_->requests().empty()) RealClock()->SleepFor(absl::Milliseconds(5));
    ctx_.Stop();
  });
  const absl::Time start = RealClock()->Now();
  absl::StatusOr<StepOutput> out = Call({{"model", "smart"}, {"prompt", "x"}}, "60s");
  stopper.join();
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_LT(RealClock()->Now() - start, absl::Seconds(5));
  EXPECT_EQ(server_->requests().size(), 1u);
}

// What a failed call books: a request answered with an HTTP error reports
// no usage and costs nothing; one whose answer was lost after it was sent
// (stopped mid-flight, timed out, dropped) may have been billed, so it is
// booked at its worst case (the kill campaign's seed 1007182660: a stopped
// worker's call, answered by the provider, settled at 0 after recovery had
// charged it). The worst case of prompt "x": 1 token and max_tokens 77.
TEST_P(HttpProviderTest, ALostAnswerIsBookedAtItsWorstCaseAndAnErrorAnswerAtNothing) {
  const int64_t worst = CallCostMicros(500'000, 1'500'000, 1, 77);
  ASSERT_GT(worst, 0);

  Script({{.body = OkBody(GetParam(), "late", 1, 1), .delay = absl::Seconds(30)}});
  std::thread stopper([this] {
    while (server_->requests().empty()) RealClock()->SleepFor(absl::Milliseconds(5));
    ctx_.Stop();
  });
  absl::StatusOr<StepOutput> out = Call({{"model", "smart"}, {"prompt", "x"}}, "60s");
  stopper.join();
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(LastCall()["cost_micros"], worst) << "stopped after the request was sent";

  AutoClockContext fresh;
  Script({{.body = OkBody(GetParam(), "late", 1, 1), .delay = absl::Seconds(2)}});
  std::shared_ptr<StepKind> step = Step("300ms");
  out = step->Execute(fresh, {{"model", "smart"}, {"prompt", "x"}});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kDeadlineExceeded));
  ASSERT_FALSE(fresh.events.empty());
  EXPECT_EQ(fresh.events.back().data["requests"], 3);
  EXPECT_EQ(fresh.events.back().data["cost_micros"], 3 * worst) << "three requests timed out";

  AutoClockContext errors;
  Script({{.status = 500, .body = "oops"}});
  out = Step("2s")->Execute(errors, {{"model", "smart"}, {"prompt", "x"}});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kUnavailable));
  ASSERT_FALSE(errors.events.empty());
  EXPECT_EQ(errors.events.back().data["cost_micros"], 0) << "answered 500 three times";

  // Dropped once, then answered: the answer's cost and the lost one's worst case.
  AutoClockContext dropped;
  Script({{.drop = true}, {.body = OkBody(GetParam(), "second time", 2, 2)}});
  out = Step("2s")->Execute(dropped, {{"model", "smart"}, {"prompt", "x"}});
  ASSERT_OK(out);
  const int64_t answer = CallCostMicros(500'000, 1'500'000, 2, 2);
  EXPECT_EQ(out->output["usage"]["cost_micros"], answer + worst);
  EXPECT_EQ(dropped.events.back().data["cost_micros"], answer + worst);
}

// A traced step's model call (issue 25): the request carries the call
// span's traceparent, and the span (a child of the step's, a client span)
// holds the model, the usage and the booked cost.
TEST_P(HttpProviderTest, ATracedCallSendsItsTraceparentAndRecordsItsSpan) {
  const TraceContext step{.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736",
                          .span_id = "00f067aa0ba902b7"};
  ctx_.set_trace(step);
  Script({{.body = OkBody(GetParam(), "ok", 10, 20)}});
  ASSERT_OK(Call({{"model", "smart"}, {"prompt", "x"}}));
  const std::string call_span = SpanIdOf(step.span_id + " llm");
  std::vector<ScriptedHttpServer::Request> requests = server_->requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].headers.at("traceparent"),
            TraceParentOf({.trace_id = step.trace_id, .span_id = call_span}));
  ASSERT_EQ(ctx_.spans.size(), 1u);
  const TraceSpan& span = ctx_.spans[0];
  EXPECT_EQ(span.span_id, call_span);
  EXPECT_EQ(span.parent_span_id, "");  // the context fills in the step's
  EXPECT_EQ(span.name, "llm smart");
  EXPECT_EQ(span.kind, SpanKind::kClient);
  EXPECT_FALSE(span.error);
  EXPECT_EQ(span.attributes["gen_ai.request.model"], "big-model-v2");
  EXPECT_EQ(span.attributes["gen_ai.usage.input_tokens"], 10);
  EXPECT_EQ(span.attributes["gen_ai.usage.output_tokens"], 20);
  EXPECT_EQ(span.attributes["runloom.cost_micros"], CallCostMicros(500'000, 1'500'000, 10, 20));
}

// Nothing reached a server that is not there: nothing is booked.
TEST_P(HttpProviderTest, ARequestThatNeverConnectedIsBookedAtNothing) {
  const std::string yaml = absl::StrCat(
      "providers:\n  remote:\n    kind: ", GetParam().kind,
      "\n    base_url: http://127.0.0.1:1/v1\n    timeout: 2s\n    connect_timeout: 1s\n",
      "    retry: {max_attempts: 2, initial_delay: 10ms, max_delay: 10ms}\n",
      "models:\n  smart:\n    provider: remote\n    model: m\n",
      "    input_price_per_1k: 0.5\n    output_price_per_1k: 1.5\n    max_tokens: 77\n");
  absl::StatusOr<LlmConfig> config = ParseLlmConfig(yaml, "test.yaml");
  ASSERT_OK(config);
  auto registry = NewConfiguredRegistry(
      *config, [](const std::string&) { return absl::StatusOr<std::string>("unused"); });
  ASSERT_OK(registry);
  absl::StatusOr<StepOutput> out =
      NewLlmStep(*registry)->Execute(ctx_, {{"model", "smart"}, {"prompt", "x"}});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(LastCall()["cost_micros"], 0);
}

TEST_P(HttpProviderTest, TheStepDeadlineBoundsTheWait) {
  Script({{.status = 429, .headers = {{"retry-after", "5"}}, .body = "{}"}});
  ctx_.set_deadline(ctx_.Now() + absl::Seconds(3));
  absl::StatusOr<StepOutput> out = Call({{"model", "smart"}, {"prompt", "x"}});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kResourceExhausted));  // not waited past it
  EXPECT_TRUE(ctx_.waits.empty());
}

// The SSE events of a streamed reply of `text` in `pieces`, one chunk each
// (the end marker last), with usage in/out.
std::vector<std::string> StreamChunks(const Api& api, const std::vector<std::string>& pieces,
                                      int in, int out) {
  std::vector<std::string> chunks;
  auto data = [](const json& j) { return absl::StrCat("data: ", j.dump(), "\n\n"); };
  if (api.kind == "openai") {
    for (const std::string& p : pieces) {
      chunks.push_back(data({{"model", "served-model"},
                             {"choices", {{{"index", 0}, {"delta", {{"content", p}}}}}},
                             {"usage", nullptr}}));
    }
    chunks.push_back(data({{"model", "served-model"},
                           {"choices", json::array()},
                           {"usage", {{"prompt_tokens", in}, {"completion_tokens", out}}}}));
    chunks.push_back("data: [DONE]\n\n");
    return chunks;
  }
  auto event = [](const std::string& name, const json& j) {
    return absl::StrCat("event: ", name, "\ndata: ", j.dump(), "\n\n");
  };
  chunks.push_back(event(
      "message_start",
      {{"type", "message_start"},
       {"message",
        {{"model", "served-model"}, {"usage", {{"input_tokens", in}, {"output_tokens", 1}}}}}}));
  chunks.push_back(
      event("content_block_start", {{"type", "content_block_start"},
                                    {"index", 0},
                                    {"content_block", {{"type", "text"}, {"text", ""}}}}));
  chunks.push_back(": a comment\r\nevent: ping\r\ndata: {\"type\": \"ping\"}\r\n\r\n");
  for (const std::string& p : pieces) {
    chunks.push_back(
        event("content_block_delta", {{"type", "content_block_delta"},
                                      {"index", 0},
                                      {"delta", {{"type", "text_delta"}, {"text", p}}}}));
  }
  chunks.push_back(event("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}}));
  chunks.push_back(event("message_delta", {{"type", "message_delta"},
                                           {"delta", {{"stop_reason", "end_turn"}}},
                                           {"usage", {{"output_tokens", out}}}}));
  chunks.push_back(event("message_stop", {{"type", "message_stop"}}));
  return chunks;
}

// A streaming request for alias "smart", collecting its deltas and resets
// (a reset is recorded as "<reset>").
struct Streamed {
  LlmRequest request;
  std::vector<std::string> seen;
};
std::unique_ptr<Streamed> StreamRequest(const ModelRoute& route) {
  auto s = std::make_unique<Streamed>();
  s->request.model = route.model;
  s->request.prompt = "Summarize rivers";
  s->request.stream = true;
  s->request.on_delta = [p = s.get()](std::string_view t) { p->seen.emplace_back(t); };
  s->request.on_stream_reset = [p = s.get()] { p->seen.emplace_back("<reset>"); };
  return s;
}

TEST_P(HttpProviderTest, AStreamedReplyArrivesInPiecesAndEqualsTheWholeOne) {
  const Api& api = GetParam();
  const std::vector<std::string> pieces = {"Rivers", " flow", " to the", " sea."};
  Script(
      {{.chunks = StreamChunks(api, pieces, 1000, 2000), .chunk_interval = absl::Milliseconds(5)},
       {.body = OkBody(api, "Rivers flow to the sea.", 1000, 2000)}});
  absl::StatusOr<ModelRoute> route = Registry("2s")->Route("smart");
  ASSERT_OK(route);
  std::unique_ptr<Streamed> s = StreamRequest(*route);
  absl::StatusOr<LlmResponse> streamed = route->provider->Complete(ctx_, s->request);
  ASSERT_OK(streamed);
  EXPECT_EQ(s->seen, pieces);
  s->request.stream = false;
  absl::StatusOr<LlmResponse> whole = route->provider->Complete(ctx_, s->request);
  ASSERT_OK(whole);
  EXPECT_EQ(streamed->text, whole->text);
  EXPECT_EQ(streamed->model, whole->model);
  EXPECT_EQ(streamed->usage.prompt_tokens, whole->usage.prompt_tokens);
  EXPECT_EQ(streamed->usage.completion_tokens, whole->usage.completion_tokens);
  EXPECT_EQ(streamed->requests, 1);
  const std::vector<ScriptedHttpServer::Request> seen = server_->requests();
  ASSERT_EQ(seen.size(), 2u);
  const json body = json::parse(seen[0].body);
  EXPECT_EQ(body["stream"], true);
  if (api.kind == "openai") {
    EXPECT_EQ(body["stream_options"]["include_usage"], true);
  }
  EXPECT_FALSE(json::parse(seen[1].body).contains("stream"));
}

TEST_P(HttpProviderTest, StreamedToolCallFragmentsAssemble) {
  const Api& api = GetParam();
  auto data = [](const json& j) { return absl::StrCat("data: ", j.dump(), "\n\n"); };
  std::vector<std::string> chunks;
  if (api.kind == "openai") {
    auto frag = [&](const json& call) {
      return data({{"choices", {{{"index", 0}, {"delta", {{"tool_calls", {call}}}}}}}});
    };
    chunks = {frag({{"index", 0},
                    {"id", "call_a"},
                    {"function", {{"name", "search"}, {"arguments", ""}}}}),
              frag({{"index", 0}, {"function", {{"arguments", "{\"q\":"}}}}),
              frag({{"index", 1}, {"id", "call_b"}, {"function", {{"name", "fetch"}}}}),
              frag({{"index", 0}, {"function", {{"arguments", "\"x\"}"}}}}),
              frag({{"index", 1}, {"function", {{"arguments", "{}"}}}}),
              "data: [DONE]\n\n"};
  } else {
    auto tool_start = [&](int index, const std::string& id, const std::string& name) {
      return data(
          {{"type", "content_block_start"},
           {"index", index},
           {"content_block",
            {{"type", "tool_use"}, {"id", id}, {"name", name}, {"input", json::object()}}}});
    };
    auto args = [&](int index, const std::string& part) {
      return data({{"type", "content_block_delta"},
                   {"index", index},
                   {"delta", {{"type", "input_json_delta"}, {"partial_json", part}}}});
    };
    chunks = {tool_start(0, "call_a", "search"), args(0, "{\"q\": "), args(0, "\"x\"}"),
              tool_start(1, "call_b", "fetch"), data({{"type", "message_stop"}})};
  }
  Script({{.chunks = chunks}});
  absl::StatusOr<ModelRoute> route = Registry("2s")->Route("smart");
  ASSERT_OK(route);
  std::unique_ptr<Streamed> s = StreamRequest(*route);
  absl::StatusOr<LlmResponse> out = route->provider->Complete(ctx_, s->request);
  ASSERT_OK(out);
  EXPECT_TRUE(s->seen.empty());
  ASSERT_EQ(out->tool_calls.size(), 2u);
  EXPECT_EQ(out->tool_calls[0].id, "call_a");
  EXPECT_EQ(out->tool_calls[0].name, "search");
  EXPECT_EQ(out->tool_calls[0].arguments, R"({"q":"x"})");
  EXPECT_EQ(out->tool_calls[1].id, "call_b");
  EXPECT_EQ(out->tool_calls[1].name, "fetch");
  EXPECT_EQ(out->tool_calls[1].arguments, "{}");
}

// A stream cut mid-way (the connection closed before the body's end, or a
// body that ends without the end marker) is kUnavailable; the provider's
// retry resets what went out before the new deltas.
TEST_P(HttpProviderTest, ACutStreamIsRetriedAfterAReset) {
  const Api& api = GetParam();
  const std::vector<std::string> pieces = {"one", " two", " three"};
  std::vector<std::string> chunks = StreamChunks(api, pieces, 5, 6);
  std::vector<std::string> unended(chunks.begin(), chunks.end() - 1);  // no end marker
  Script({{.chunks = chunks, .cut_after = static_cast<int>(chunks.size()) - 3},
          {.chunks = unended},
          {.chunks = chunks}});
  absl::StatusOr<ModelRoute> route = Registry("2s")->Route("smart");
  ASSERT_OK(route);
  std::unique_ptr<Streamed> s = StreamRequest(*route);
  std::vector<absl::Status> retried;
  s->request.on_retry = [&retried](const absl::Status& st, const RateLimitTelemetry&) {
    retried.push_back(st);
  };
  absl::StatusOr<LlmResponse> out = route->provider->Complete(ctx_, s->request);
  ASSERT_OK(out);
  EXPECT_EQ(out->text, "one two three");
  EXPECT_EQ(out->requests, 3);
  ASSERT_EQ(retried.size(), 2u);
  EXPECT_THAT(retried[0], StatusIs(absl::StatusCode::kUnavailable, HasSubstr("cut after")));
  EXPECT_THAT(retried[1], StatusIs(absl::StatusCode::kUnavailable, HasSubstr("cut after")));
  std::vector<std::string> want;
  const size_t first = api.kind == "openai" ? 2 : 3;  // pieces before the cut
  want.insert(want.end(), pieces.begin(), pieces.begin() + first);
  want.push_back("<reset>");
  want.insert(want.end(), pieces.begin(), pieces.end());
  want.push_back("<reset>");
  want.insert(want.end(), pieces.begin(), pieces.end());
  EXPECT_EQ(s->seen, want);
}

TEST_P(HttpProviderTest, AStreamCutToTheEndIsUnavailable) {
  const Api& api = GetParam();
  std::vector<std::string> chunks = StreamChunks(api, {"a", "b"}, 1, 1);
  chunks.pop_back();
  Script({{.chunks = chunks}});
  absl::StatusOr<ModelRoute> route = Registry("2s")->Route("smart");
  ASSERT_OK(route);
  std::unique_ptr<Streamed> s = StreamRequest(*route);
  absl::StatusOr<LlmResponse> out = route->provider->Complete(ctx_, s->request);
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("stream was cut after")));
  EXPECT_EQ(RequestsOf(out.status()), 3);
}

// Hostile streams are refused cleanly (kUnknown, not retried): a line over
// the bound, a data line that is not JSON.
TEST_P(HttpProviderTest, HostileStreamsAreRefused) {
  const Api& api = GetParam();
  absl::StatusOr<ModelRoute> route = Registry("5s")->Route("smart");
  ASSERT_OK(route);
  const std::string huge(256 << 10, 'x');
  Script({{.chunks = {"data: ", huge, huge, huge, huge, huge, "\n\n"}}});
  std::unique_ptr<Streamed> s = StreamRequest(*route);
  absl::StatusOr<LlmResponse> out = route->provider->Complete(ctx_, s->request);
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kUnknown, HasSubstr("longer than")));
  EXPECT_EQ(RequestsOf(out.status()), 1);

  std::vector<std::string> chunks = StreamChunks(api, {"fine"}, 1, 1);
  chunks.insert(chunks.begin() + 1, "data: {not json\n\n");
  Script({{.chunks = chunks}});
  out = route->provider->Complete(ctx_, s->request);
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kUnknown, HasSubstr("malformed")));
  EXPECT_THAT(out.status().message(), Not(HasSubstr(kKey)));
}

// A server that ignores "stream" and answers one JSON reply: its text is
// one piece.
TEST_P(HttpProviderTest, AWholeReplyToAStreamIsOnePiece) {
  Script({{.body = OkBody(GetParam(), "Rivers flow.", 3, 4)}});
  absl::StatusOr<ModelRoute> route = Registry("2s")->Route("smart");
  ASSERT_OK(route);
  std::unique_ptr<Streamed> s = StreamRequest(*route);
  absl::StatusOr<LlmResponse> out = route->provider->Complete(ctx_, s->request);
  ASSERT_OK(out);
  EXPECT_EQ(out->text, "Rivers flow.");
  EXPECT_EQ(s->seen, std::vector<std::string>{"Rivers flow."});
}

// A non-2xx answer to a streaming request is read as before: its body is
// an error JSON.
TEST_P(HttpProviderTest, AnErrorAnswerToAStreamIsReadAsBefore) {
  Script({{.status = 401, .body = R"({"error": {"message": "bad key"}})"}});
  absl::StatusOr<ModelRoute> route = Registry("2s")->Route("smart");
  ASSERT_OK(route);
  std::unique_ptr<Streamed> s = StreamRequest(*route);
  absl::StatusOr<LlmResponse> out = route->provider->Complete(ctx_, s->request);
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("bad key")));
  EXPECT_TRUE(s->seen.empty());
}

// The fake provider streams its words, its latency spread over them; the
// pieces concatenate to the text it gives unstreamed.
TEST(FakeProviderStream, StreamsItsWordsOverItsLatency) {
  std::shared_ptr<LlmProvider> fake = NewFakeLlmProvider();
  for (const json& options :
       {json{{"latency", "2s"}}, json{{"latency", "1s"}, {"response", "canned  reply here "}},
        json{{"turns", {{{"text", "a scripted turn"}}}}, {"chunk_interval", "100ms"}}}) {
    SCOPED_TRACE(options.dump());
    LlmRequest request{.model = "fake", .prompt = "Summarize the rivers of Europe"};
    request.options = options;
    AutoClockContext whole_ctx;
    absl::StatusOr<LlmResponse> whole = fake->Complete(whole_ctx, request);
    ASSERT_OK(whole);

    AutoClockContext ctx;
    const absl::Time start = ctx.Now();
    std::vector<std::string> pieces;
    std::vector<absl::Duration> at;
    request.stream = true;
    request.on_delta = [&](std::string_view t) {
      pieces.emplace_back(t);
      at.push_back(ctx.Now() - start);
    };
    absl::StatusOr<LlmResponse> streamed = fake->Complete(ctx, request);
    ASSERT_OK(streamed);
    EXPECT_EQ(streamed->text, whole->text);
    EXPECT_EQ(streamed->usage.completion_tokens, whole->usage.completion_tokens);
    EXPECT_GT(pieces.size(), 2u);
    EXPECT_EQ(absl::StrJoin(pieces, ""), whole->text);
    const size_t n = pieces.size();
    if (options.contains("latency")) {
      const absl::Duration latency =
          options["latency"] == "2s" ? absl::Seconds(2) : absl::Seconds(1);
      EXPECT_EQ(at.front(), latency / static_cast<int64_t>(n));
      EXPECT_EQ(at.back(), latency);
    } else {
      EXPECT_EQ(at.front(), absl::ZeroDuration());
      EXPECT_EQ(at.back(), absl::Milliseconds(100) * static_cast<int64_t>(n - 1));
    }
  }
}

TEST(FakeProviderStream, AStopEndsTheStream) {
  std::shared_ptr<LlmProvider> fake = NewFakeLlmProvider();
  LlmRequest request{.model = "fake", .prompt = "Summarize the rivers of Europe"};
  request.options = {{"latency", "2s"}};
  request.stream = true;
  AutoClockContext ctx;
  int pieces = 0;
  request.on_delta = [&](std::string_view) {
    if (++pieces == 2) ctx.Stop();
  };
  EXPECT_THAT(fake->Complete(ctx, request), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(pieces, 2);
  EXPECT_OK(fake->ValidateOptions(json{{"chunk_interval", "10ms"}}));
  EXPECT_THAT(fake->ValidateOptions(json{{"chunk_interval", 3}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("chunk_interval")));
}

INSTANTIATE_TEST_SUITE_P(Providers, HttpProviderTest,
                         ::testing::Values(Api{"openai", "/v1/chat/completions"},
                                           Api{"anthropic", "/v1/messages"}),
                         [](const ::testing::TestParamInfo<Api>& info) { return info.param.kind; });

}  // namespace
}  // namespace runloom
