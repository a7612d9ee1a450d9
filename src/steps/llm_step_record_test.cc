// The llm step's bookkeeping: routes with prices, response_schema checks,
// and the llm.call event every call records (success, invalid, error).
#include "runloom/clock.h"
#include "runloom/events.h"
#include "runloom/step.h"

#include "llm/fake_provider.h"
#include "llm/provider.h"
#include "steps/builtin_steps.h"
#include "testing/status_matchers.h"
#include "testing/step_test_util.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <memory>
#include <string>

namespace runloom {
namespace {

using ::runloom::steps_testing::MakeDef;
using ::runloom::steps_testing::TestStepContext;
using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;
using json = nlohmann::json;

const json kSchema = {{"type", "object"},
                      {"required", {"score"}},
                      {"properties", {{"score", {{"type", "integer"}, {"maximum", 10}}}}}};

class LlmStepRecordTest : public ::testing::Test {
 protected:
  LlmStepRecordTest() {
    auto providers = LlmProviderRegistry::WithFake();
    providers->RegisterModel("priced", {.provider = NewFakeLlmProvider(),
                                        .provider_name = "offline",
                                        .model = "fake-large",
                                        .input_micros_per_1k = 2'000'000,
                                        .output_micros_per_1k = 6'000'000,
                                        .max_tokens = 8});
    llm_ = NewLlmStep(providers);
  }

  absl::StatusOr<StepOutput> Run(const json& config) {
    EXPECT_OK(llm_->Validate(MakeDef("llm", config)));
    return llm_->Execute(ctx_, config);
  }

  Event LastEvent() {
    std::vector<Event> events = ctx_.events();
    EXPECT_FALSE(events.empty());
    return events.empty() ? Event{} : events.back();
  }

  SimulatedClock clock_;
  TestStepContext ctx_{&clock_};
  std::shared_ptr<StepKind> llm_;
};

TEST_F(LlmStepRecordTest, AConfiguredAliasUsesItsModelPricesAndMaxTokens) {
  absl::StatusOr<StepOutput> out = Run({{"model", "priced"}, {"prompt", "a b c d e f g h i"}});
  ASSERT_OK(out);
  EXPECT_EQ(out->output["model"], "fake-large");  // the provider's name, not the alias
  EXPECT_EQ(out->output["provider"], "offline");
  const int64_t in = out->output["usage"]["prompt_tokens"];
  const int64_t done = out->output["usage"]["completion_tokens"];
  EXPECT_LE(done, 8);  // the alias's max_tokens
  const int64_t cost = (in * 2'000'000 + 999) / 1000 + (done * 6'000'000 + 999) / 1000;
  EXPECT_EQ(out->output["usage"]["cost_micros"], cost);

  Event e = LastEvent();
  EXPECT_EQ(e.type, "llm.call");
  EXPECT_OK(ValidateEvent(e));
  EXPECT_EQ(e.data["model"], "priced");
  EXPECT_EQ(e.data["provider"], "offline");
  EXPECT_EQ(e.data["provider_model"], "fake-large");
  EXPECT_EQ(e.data["outcome"], "ok");
  EXPECT_EQ(e.data["input_tokens"], in);
  EXPECT_EQ(e.data["output_tokens"], done);
  EXPECT_EQ(e.data["cost_micros"], cost);
  EXPECT_EQ(e.data["requests"], 1);
  EXPECT_FALSE(e.data.contains("error_class"));
}

TEST_F(LlmStepRecordTest, TheUnconfiguredFakeCostsNothing) {
  ASSERT_OK(Run({{"prompt", "x"}}));
  Event e = LastEvent();
  EXPECT_EQ(e.data["provider"], "fake");
  EXPECT_EQ(e.data["cost_micros"], 0);
  EXPECT_FALSE(e.data.contains("provider_model"));
}

TEST_F(LlmStepRecordTest, AReplyMatchingTheSchemaIsAccepted) {
  absl::StatusOr<StepOutput> out = Run({{"prompt", "x"},
                                        {"response_format", "json"},
                                        {"response_schema", kSchema},
                                        {"fake", {{"response", {{"score", 7}}}}}});
  ASSERT_OK(out);
  EXPECT_EQ(out->output["json"], json({{"score", 7}}));
  EXPECT_EQ(LastEvent().data["outcome"], "ok");
}

TEST_F(LlmStepRecordTest, AReplyNotMatchingTheSchemaIsInvalidAndStillCounted) {
  absl::StatusOr<StepOutput> out = Run({{"model", "priced"},
                                        {"prompt", "x"},
                                        {"response_format", "json"},
                                        {"response_schema", kSchema},
                                        {"fake", {{"response", {{"score", 70}}}}}});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("reply does not match response_schema: at /score"));
  Event e = LastEvent();
  EXPECT_OK(ValidateEvent(e));
  EXPECT_EQ(e.data["outcome"], "invalid");
  EXPECT_EQ(e.data["error_class"], "invalid");
  EXPECT_GT(e.data["output_tokens"].get<int64_t>(), 0);
  EXPECT_GT(e.data["cost_micros"].get<int64_t>(), 0);  // the tokens were paid for

  out = Run({{"prompt", "x"}, {"response_format", "json"}, {"fake", {{"response", "no json"}}}});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(LastEvent().data["outcome"], "invalid");
}

TEST_F(LlmStepRecordTest, AFailedCallRecordsItsClass) {
  absl::StatusOr<StepOutput> out =
      Run({{"prompt", "x"}, {"fake", {{"fail_times", 0}, {"rate_limit_times", 1}}}});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kResourceExhausted));
  Event e = LastEvent();
  EXPECT_OK(ValidateEvent(e));
  EXPECT_EQ(e.data["outcome"], "error");
  EXPECT_EQ(e.data["error_class"], "rate_limited");
  EXPECT_EQ(e.data["input_tokens"], 0);
}

TEST_F(LlmStepRecordTest, ABadSchemaIsRefusedAtValidate) {
  absl::Status s = llm_->Validate(MakeDef(
      "llm", {{"prompt", "x"}, {"response_format", "json"}, {"response_schema", {{"type", 5}}}}));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(s.message()), HasSubstr("response_schema is not a valid JSON Schema"));
  s = llm_->Validate(MakeDef("llm", {{"prompt", "x"}, {"response_schema", kSchema}}));
  EXPECT_THAT(std::string(s.message()), HasSubstr("needs response_format: json"));
}

// Issue 25's model-call inspector: the output keeps the prompt as sent,
// each part at most 16 KiB, cut before a character that would not fit.
TEST_F(LlmStepRecordTest, TheOutputRecordsThePromptCutAtACharacterBoundary) {
  absl::StatusOr<StepOutput> out = Run({{"prompt", "hi"}, {"system", "be brief"}});
  ASSERT_OK(out);
  EXPECT_EQ(out->output["prompt"], json({{"user", "hi"}, {"system", "be brief"}}));

  out = Run({{"prompt", "hi"}});
  ASSERT_OK(out);
  EXPECT_EQ(out->output["prompt"], json({{"user", "hi"}}));

  constexpr size_t kLimit = 16 * 1024;
  // "é" is two bytes: an odd prefix puts one across the limit.
  std::string long_prompt = "a";
  while (long_prompt.size() <= kLimit) long_prompt += "\xc3\xa9";
  out = Run({{"prompt", long_prompt}});
  ASSERT_OK(out);
  const std::string user = out->output["prompt"]["user"];
  EXPECT_EQ(user.size(), kLimit - 1);
  EXPECT_EQ(user, long_prompt.substr(0, kLimit - 1));
  EXPECT_EQ(out->output["prompt"]["truncated"], true);
}

}  // namespace
}  // namespace runloom
