#include "runloom/clock.h"
#include "runloom/step.h"

#include "llm/fake_provider.h"
#include "llm/provider.h"
#include "steps/builtin_steps.h"
#include "testing/status_matchers.h"
#include "testing/step_test_util.h"

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <memory>
#include <string>
#include <thread>

namespace runloom {
namespace {

using ::runloom::steps_testing::MakeDef;
using ::runloom::steps_testing::TestStepContext;
using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using json = nlohmann::json;

TEST(CountTokensTest, WordsTimesFourThirdsRounded) {
  EXPECT_EQ(CountTokens(""), 0);
  EXPECT_EQ(CountTokens("  "), 0);
  EXPECT_EQ(CountTokens("one"), 1);        // 1.33
  EXPECT_EQ(CountTokens("one two"), 3);    // 2.67
  EXPECT_EQ(CountTokens("a b\tc\nd"), 5);  // 5.33
  EXPECT_EQ(CountTokens(" a  b c "), 4);   // 4
}

TEST(LlmProviderRegistryTest, RoutesByLongestPrefix) {
  LlmProviderRegistry registry;
  std::shared_ptr<LlmProvider> a = NewFakeLlmProvider();
  std::shared_ptr<LlmProvider> b = NewFakeLlmProvider();
  registry.Register("fake", a);
  registry.Register("fake-big", b);
  EXPECT_EQ(*registry.Resolve("fake"), a);
  EXPECT_EQ(*registry.Resolve("fake-small"), a);
  EXPECT_EQ(*registry.Resolve("fake-big-2"), b);
  absl::StatusOr<std::shared_ptr<LlmProvider>> gpt = registry.Resolve("gpt-4o");
  EXPECT_THAT(gpt, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(gpt.status().message()), HasSubstr("model 'gpt-4o' is not configured"));
}

class LlmStepTest : public ::testing::Test {
 protected:
  absl::StatusOr<StepOutput> Run(const json& config) {
    EXPECT_OK(llm_->Validate(MakeDef("llm", config)));
    return llm_->Execute(ctx_, config);
  }

  SimulatedClock clock_;
  TestStepContext ctx_{&clock_};
  std::shared_ptr<StepKind> llm_ = StepRegistry::WithBuiltins()->Find("llm");
};

TEST_F(LlmStepTest, SamePromptSameReply) {
  const json config = {{"prompt", "Write a haiku about rivers"}};
  absl::StatusOr<StepOutput> a = Run(config);
  absl::StatusOr<StepOutput> b = Run(config);
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_EQ(a->output, b->output);
  const std::string text = a->output["text"];
  EXPECT_THAT(text, StartsWith("[fake] Write a haiku about rivers -> "));
  EXPECT_EQ(a->output["model"], "fake");
  EXPECT_FALSE(a->output.contains("json"));
  EXPECT_EQ(a->output["usage"]["prompt_tokens"], CountTokens("Write a haiku about rivers"));
  EXPECT_EQ(a->output["usage"]["completion_tokens"], CountTokens(text));

  absl::StatusOr<StepOutput> other = Run({{"prompt", "Write a haiku about mountains"}});
  ASSERT_OK(other);
  EXPECT_NE(other->output["text"], a->output["text"]);
  absl::StatusOr<StepOutput> with_system =
      Run({{"prompt", "Write a haiku about rivers"}, {"system", "You are terse."}});
  ASSERT_OK(with_system);
  EXPECT_NE(with_system->output["text"], a->output["text"]);
  EXPECT_EQ(with_system->output["usage"]["prompt_tokens"],
            CountTokens("You are terse. Write a haiku about rivers"));
}

TEST_F(LlmStepTest, EchoIsLimitedToTheFirstWords) {
  absl::StatusOr<StepOutput> out = Run({{"prompt", "one two three four five six seven"}});
  ASSERT_OK(out);
  EXPECT_THAT(out->output["text"].get<std::string>(),
              StartsWith("[fake] one two three four five -> "));
}

TEST_F(LlmStepTest, JsonModeReturnsADeterministicObject) {
  const json config = {
      {"prompt", "Review this draft"}, {"response_format", "json"}, {"model", "fake-editor"}};
  absl::StatusOr<StepOutput> out = Run(config);
  ASSERT_OK(out);
  const json& obj = out->output["json"];
  ASSERT_TRUE(obj.is_object());
  EXPECT_TRUE(obj["summary"].is_string());
  EXPECT_THAT(obj["summary"].get<std::string>(), StartsWith("[fake] Review this draft"));
  EXPECT_TRUE(obj["approved"].is_boolean());
  ASSERT_TRUE(obj["score"].is_number_integer());
  EXPECT_GE(obj["score"].get<int>(), 0);
  EXPECT_LE(obj["score"].get<int>(), 100);
  EXPECT_EQ(json::parse(out->output["text"].get<std::string>()), obj);
  EXPECT_EQ(out->output["model"], "fake-editor");
  absl::StatusOr<StepOutput> again = Run(config);
  ASSERT_OK(again);
  EXPECT_EQ(again->output, out->output);
}

TEST_F(LlmStepTest, CannedResponseIsReturnedVerbatim) {
  const json response = {{"approved", true}, {"notes", {"a", "b"}}};
  absl::StatusOr<StepOutput> out =
      Run({{"prompt", "x"}, {"response_format", "json"}, {"fake", {{"response", response}}}});
  ASSERT_OK(out);
  EXPECT_EQ(out->output["json"], response);

  out = Run({{"prompt", "x"}, {"fake", {{"response", "plain words here"}}}});
  ASSERT_OK(out);
  EXPECT_EQ(out->output["text"], "plain words here");
  EXPECT_EQ(out->output["usage"]["completion_tokens"], 4);

  out = Run({{"prompt", "x"},
             {"response_format", "json"},
             {"fake", {{"response", "```json\n{\"a\": 1}\n```"}}}});
  ASSERT_OK(out);
  EXPECT_EQ(out->output["json"], json({{"a", 1}}));
}

TEST_F(LlmStepTest, JsonModeRefusesAReplyThatIsNotAnObject) {
  absl::StatusOr<StepOutput> out =
      Run({{"prompt", "x"}, {"response_format", "json"}, {"fake", {{"response", "sure!"}}}});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(out.status().message()), StartsWith("llm reply is not a JSON object"));
  out = Run({{"prompt", "x"}, {"response_format", "json"}, {"fake", {{"response", {1, 2}}}}});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(LlmStepTest, FailTimesFailsTheFirstAttemptsAsUnavailable) {
  const json config = {{"prompt", "x"}, {"fake", {{"fail_times", 2}}}};
  ctx_.set_attempt(1);
  EXPECT_THAT(Run(config), StatusIs(absl::StatusCode::kUnavailable));
  ctx_.set_attempt(2);
  EXPECT_THAT(Run(config), StatusIs(absl::StatusCode::kUnavailable));
  ctx_.set_attempt(3);
  EXPECT_OK(Run(config));
}

TEST_F(LlmStepTest, RateLimitTimesFailsWith429AfterTheFailTimes) {
  const json config = {{"prompt", "x"}, {"fake", {{"fail_times", 1}, {"rate_limit_times", 2}}}};
  ctx_.set_attempt(1);
  EXPECT_THAT(Run(config), StatusIs(absl::StatusCode::kUnavailable));
  for (int attempt : {2, 3}) {
    ctx_.set_attempt(attempt);
    absl::StatusOr<StepOutput> out = Run(config);
    EXPECT_THAT(out, StatusIs(absl::StatusCode::kResourceExhausted));
    EXPECT_THAT(std::string(out.status().message()), HasSubstr("429"));
  }
  ctx_.set_attempt(4);
  EXPECT_OK(Run(config));
}

TEST_F(LlmStepTest, LatencyWaitsOnTheStepClock) {
  const absl::Time start = clock_.Now();
  absl::StatusOr<StepOutput> out;
  std::thread runner([&] {
    out = llm_->Execute(ctx_, {{"prompt", "x"}, {"fake", {{"latency", "3s"}}}});
  });
  EXPECT_EQ(ctx_.AwaitSleeping(), start + absl::Seconds(3));
  clock_.Advance(absl::Seconds(3));
  runner.join();
  EXPECT_OK(out);
}

TEST_F(LlmStepTest, StopDuringLatencyIsCancelled) {
  absl::StatusOr<StepOutput> out;
  std::thread runner([&] {
    out = llm_->Execute(ctx_, {{"prompt", "x"}, {"fake", {{"latency", "1h"}}}});
  });
  ctx_.AwaitSleeping();
  ctx_.Stop();
  runner.join();
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kCancelled));
}

TEST_F(LlmStepTest, LatencyPastTheDeadlineIsDeadlineExceeded) {
  ctx_.set_deadline(clock_.Now() + absl::Seconds(1));
  absl::StatusOr<StepOutput> out;
  std::thread runner([&] {
    out = llm_->Execute(ctx_, {{"prompt", "x"}, {"fake", {{"latency", "10s"}}}});
  });
  EXPECT_EQ(ctx_.AwaitSleeping(), ctx_.deadline());
  clock_.Advance(absl::Seconds(1));
  runner.join();
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kDeadlineExceeded));
}

TEST_F(LlmStepTest, MaxTokensCapsTheReply) {
  absl::StatusOr<StepOutput> out = Run({{"prompt", "a b c d e f g"}, {"max_tokens", 4}});
  ASSERT_OK(out);
  EXPECT_EQ(out->output["text"], "[fake] a b");
  EXPECT_LE(out->output["usage"]["completion_tokens"].get<int>(), 4);
}

TEST_F(LlmStepTest, UnknownModelIsRefusedAtValidate) {
  absl::Status s = llm_->Validate(MakeDef("llm", {{"model", "gpt-4o"}, {"prompt", "x"}}));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("model 'gpt-4o' is not configured; no model aliases are configured "
                        "(declare it under `models:` in the --config file), or use model: fake"));
  EXPECT_THAT(llm_->Execute(ctx_, {{"model", "gpt-4o"}, {"prompt", "x"}}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // A templated model is checked when it is resolved.
  EXPECT_OK(llm_->Validate(MakeDef("llm", {{"model", "{{ inputs.model }}"}, {"prompt", "x"}})));
}

TEST_F(LlmStepTest, ValidateNamesTheBadKey) {
  absl::Status s = llm_->Validate(MakeDef("llm", {{"promt", "x"}}));
  EXPECT_EQ(s.message(),
            "llm step: unknown key 'promt'; allowed keys: fake, max_tokens, model, prompt, "
            "response_format, response_schema, stream, system");
  s = llm_->Validate(MakeDef("llm", json::object()));
  EXPECT_THAT(std::string(s.message()), HasSubstr("missing required key 'prompt'"));
  s = llm_->Validate(MakeDef("llm", {{"prompt", "x"}, {"response_format", "yaml"}}));
  EXPECT_THAT(std::string(s.message()), HasSubstr("allowed: text, json"));
  s = llm_->Validate(MakeDef("llm", {{"prompt", "x"}, {"fake", {{"latncy", "1s"}}}}));
  EXPECT_THAT(std::string(s.message()), HasSubstr("unknown key 'fake.latncy'"));
  EXPECT_THAT(llm_->Validate(MakeDef("llm", {{"prompt", "x"}, {"fake", {{"latency", "soon"}}}})),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(llm_->Validate(MakeDef("llm", {{"prompt", "x"}, {"fake", {{"fail_times", -1}}}})),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(llm_->Validate(MakeDef("llm", {{"prompt", "x"}, {"max_tokens", 0}})),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(llm_->Validate(MakeDef("llm", {{"prompt", 1}})),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_OK(llm_->Validate(MakeDef("llm", {{"prompt", "{{ steps.a.output.text }}"},
                                           {"fake", {{"fail_times", "{{ inputs.n }}"}}}})));
}

}  // namespace
}  // namespace runloom
