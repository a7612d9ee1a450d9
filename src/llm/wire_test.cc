#include "llm/internal/wire.h"

#include "testing/status_matchers.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <string>

namespace runloom::llm_internal {
namespace {

using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;
using json = nlohmann::json;

LlmRequest Request() {
  LlmRequest r;
  r.model = "qwen2.5-7b-instruct";
  r.system = "You are terse.";
  r.prompt = "Summarize rivers";
  return r;
}

TEST(OpenAiWireTest, RequestCarriesMessagesMaxTokensAndJsonMode) {
  LlmRequest r = Request();
  json body = OpenAiRequestBody(r);
  EXPECT_EQ(body["model"], "qwen2.5-7b-instruct");
  EXPECT_EQ(body["messages"], json::parse(R"([{"role":"system","content":"You are terse."},
                                              {"role":"user","content":"Summarize rivers"}])"));
  EXPECT_FALSE(body.contains("max_tokens"));
  EXPECT_FALSE(body.contains("response_format"));
  r.max_tokens = 64;
  r.json_mode = true;
  body = OpenAiRequestBody(r);
  EXPECT_EQ(body["max_tokens"], 64);
  EXPECT_EQ(body["response_format"], json({{"type", "json_object"}}));
  r.json_schema = json{{"type", "object"}};
  body = OpenAiRequestBody(r);
  EXPECT_EQ(body["response_format"]["type"], "json_schema");
  EXPECT_EQ(body["response_format"]["json_schema"]["schema"], json({{"type", "object"}}));
  r.system.clear();
  EXPECT_EQ(OpenAiRequestBody(r)["messages"].size(), 1u);
}

TEST(OpenAiWireTest, ParsesTextModelAndUsage) {
  absl::StatusOr<LlmResponse> r = ParseOpenAiResponse(R"({
    "id": "chatcmpl-1", "object": "chat.completion", "model": "qwen2.5-7b-instruct-q4",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Rivers flow."},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}})");
  ASSERT_OK(r);
  EXPECT_EQ(r->text, "Rivers flow.");
  EXPECT_EQ(r->model, "qwen2.5-7b-instruct-q4");
  EXPECT_EQ(r->usage.prompt_tokens, 12);
  EXPECT_EQ(r->usage.completion_tokens, 3);
}

TEST(OpenAiWireTest, MalformedRepliesAreErrors) {
  EXPECT_THAT(ParseOpenAiResponse("<html>bad gateway</html>"),
              StatusIs(absl::StatusCode::kUnknown));
  EXPECT_THAT(ParseOpenAiResponse(R"({"choices": []})"), StatusIs(absl::StatusCode::kUnknown));
  absl::Status s = ParseOpenAiResponse(
                       R"({"choices": [{"message": {"content": "x"}}],
                           "usage": {"prompt_tokens": -4}})")
                       .status();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kUnknown));
  EXPECT_THAT(std::string(s.message()), HasSubstr("usage.prompt_tokens"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("base_url"));
}

TEST(AnthropicWireTest, RequestHasSystemMaxTokensAndJsonInstruction) {
  LlmRequest r = Request();
  json body = AnthropicRequestBody(r);
  EXPECT_EQ(body["model"], "qwen2.5-7b-instruct");
  EXPECT_EQ(body["system"], "You are terse.");
  EXPECT_EQ(body["max_tokens"], kAnthropicDefaultMaxTokens);
  EXPECT_EQ(body["messages"], json::parse(R"([{"role":"user","content":"Summarize rivers"}])"));
  r.json_mode = true;
  r.json_schema = json{{"required", {"summary"}}};
  r.max_tokens = 10;
  body = AnthropicRequestBody(r);
  EXPECT_EQ(body["max_tokens"], 10);
  const std::string system = body["system"];
  EXPECT_THAT(system, HasSubstr("You are terse."));
  EXPECT_THAT(system, HasSubstr("exactly one JSON object"));
  EXPECT_THAT(system, HasSubstr(R"({"required":["summary"]})"));
}

TEST(AnthropicWireTest, ParsesTextBlocksAndUsage) {
  absl::StatusOr<LlmResponse> r = ParseAnthropicResponse(R"({
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-3-5-haiku",
    "content": [{"type": "text", "text": "Rivers "}, {"type": "text", "text": "flow."}],
    "stop_reason": "end_turn", "usage": {"input_tokens": 20, "output_tokens": 4}})");
  ASSERT_OK(r);
  EXPECT_EQ(r->text, "Rivers flow.");
  EXPECT_EQ(r->model, "claude-3-5-haiku");
  EXPECT_EQ(r->usage.prompt_tokens, 20);
  EXPECT_EQ(r->usage.completion_tokens, 4);
  EXPECT_THAT(ParseAnthropicResponse(R"({"type": "message"})"),
              StatusIs(absl::StatusCode::kUnknown));
}

TEST(WireTest, ErrorBodyMessageReadsBothShapes) {
  EXPECT_EQ(ErrorBodyMessage(R"({"error": {"message": "Rate limit reached", "type": "x"}})"),
            "Rate limit reached");
  EXPECT_EQ(
      ErrorBodyMessage(
          R"({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})"),
      "Overloaded");
  EXPECT_EQ(ErrorBodyMessage("upstream connect error"), "upstream connect error");
  EXPECT_EQ(ErrorBodyMessage(std::string(1000, 'x')).size(), 303u);
}

}  // namespace
}  // namespace runloom::llm_internal
