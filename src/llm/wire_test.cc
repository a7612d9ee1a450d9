#include "llm/internal/wire.h"

#include "llm/internal/stream.h"
#include "testing/status_matchers.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <string>
#include <string_view>
#include <vector>

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

// An agent's second turn: the tools, the model's first turn with two
// calls, and the answers to them.
LlmRequest AgentRequest() {
  LlmRequest r = Request();
  r.tools = {{.name = "search",
              .description = "Search the docs.",
              .parameters = json{{"type", "object"}}}};
  r.history = {
      {.role = "assistant",
       .text = "",
       .tool_calls = {{.id = "c1", .name = "search", .arguments = R"({"q":"a"})"},
                      {.id = "c2", .name = "search", .arguments = "{not json"}}},
      {.role = "tool", .text = R"({"hits":1})", .tool_call_id = "c1", .tool_name = "search"},
      {.role = "tool",
       .text = "error: refused",
       .tool_call_id = "c2",
       .tool_name = "search",
       .is_error = true}};
  return r;
}

TEST(OpenAiWireTest, AnAgentTurnSendsToolsAndTheConversation) {
  json body = OpenAiRequestBody(AgentRequest());
  EXPECT_EQ(body["tools"][0]["type"], "function");
  EXPECT_EQ(body["tools"][0]["function"]["name"], "search");
  EXPECT_EQ(body["tools"][0]["function"]["parameters"], json({{"type", "object"}}));
  const json& m = body["messages"];
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[2]["role"], "assistant");
  EXPECT_TRUE(m[2]["content"].is_null());
  EXPECT_EQ(m[2]["tool_calls"][0]["id"], "c1");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"], R"({"q":"a"})");
  EXPECT_EQ(m[3], json({{"role", "tool"}, {"tool_call_id", "c1"}, {"content", R"({"hits":1})"}}));
  EXPECT_EQ(m[4]["tool_call_id"], "c2");
}

TEST(OpenAiWireTest, ParsesToolCalls) {
  absl::StatusOr<LlmResponse> r = ParseOpenAiResponse(R"({
    "choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": "{\"q\":\"x\"}"}},
      {"id": "call_2", "type": "function", "function": {"name": "rm", "arguments": "oops"}}]}}]})");
  ASSERT_OK(r);
  ASSERT_EQ(r->tool_calls.size(), 2u);
  EXPECT_EQ(r->tool_calls[0].id, "call_1");
  EXPECT_EQ(r->tool_calls[0].name, "search");
  EXPECT_EQ(r->tool_calls[0].arguments, R"({"q":"x"})");
  EXPECT_EQ(r->tool_calls[1].arguments, "oops");  // the agent refuses it, not the parser
  EXPECT_THAT(ParseOpenAiResponse(R"({"choices": [{"message": {"content": null,
                                      "tool_calls": [{"id": "x"}]}}]})"),
              StatusIs(absl::StatusCode::kUnknown, HasSubstr("no function")));
}

TEST(AnthropicWireTest, AnAgentTurnSendsToolUseAndToolResultBlocks) {
  json body = AnthropicRequestBody(AgentRequest());
  EXPECT_EQ(body["tools"][0], json({{"name", "search"},
                                    {"description", "Search the docs."},
                                    {"input_schema", {{"type", "object"}}}}));
  const json& m = body["messages"];
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[1]["role"], "assistant");
  EXPECT_EQ(m[1]["content"][0],
            json({{"type", "tool_use"}, {"id", "c1"}, {"name", "search"}, {"input", {{"q", "a"}}}}));
  // Arguments that were not a JSON object go as {} (that call was refused).
  EXPECT_EQ(m[1]["content"][1]["input"], json::object());
  EXPECT_EQ(m[2]["role"], "user");
  ASSERT_EQ(m[2]["content"].size(), 2u);
  EXPECT_EQ(m[2]["content"][0]["type"], "tool_result");
  EXPECT_EQ(m[2]["content"][0]["tool_use_id"], "c1");
  EXPECT_FALSE(m[2]["content"][0].contains("is_error"));
  EXPECT_EQ(m[2]["content"][1]["is_error"], true);
}

TEST(AnthropicWireTest, ParsesToolUseBlocks) {
  absl::StatusOr<LlmResponse> r = ParseAnthropicResponse(R"({
    "model": "claude", "content": [
      {"type": "text", "text": "Let me look."},
      {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "rivers"}}],
    "usage": {"input_tokens": 10, "output_tokens": 5}})");
  ASSERT_OK(r);
  EXPECT_EQ(r->text, "Let me look.");
  ASSERT_EQ(r->tool_calls.size(), 1u);
  EXPECT_EQ(r->tool_calls[0].id, "toolu_1");
  EXPECT_EQ(json::parse(r->tool_calls[0].arguments), json({{"q", "rivers"}}));
}

// The stream reader fed byte by byte: events split anywhere still parse.
absl::StatusOr<LlmResponse> ReadStream(ProviderKind kind, const std::string& body,
                                       std::string* deltas) {
  StreamReader reader(kind, [deltas](std::string_view t) { deltas->append(t); });
  for (char c : body) reader.Feed(std::string_view(&c, 1));
  return reader.Finish();
}

TEST(StreamWireTest, OpenAiChunksSplitAnywhere) {
  std::string deltas;
  absl::StatusOr<LlmResponse> r = ReadStream(
      ProviderKind::kOpenAi,
      "data: {\"model\":\"m1\",\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\r\n\r\n"
      ": keep-alive\n\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n"
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\n"
      "data: [DONE]",  // the body's end ends the event
      &deltas);
  ASSERT_OK(r);
  EXPECT_EQ(deltas, "Hello");
  EXPECT_EQ(r->text, "Hello");
  EXPECT_EQ(r->model, "m1");
  EXPECT_EQ(r->usage.prompt_tokens, 3);
  EXPECT_EQ(r->usage.completion_tokens, 2);
}

// Error events name their code; malformed streams are kUnknown; a stream
// without its end is kUnavailable. No delta goes out from any of them.
TEST(StreamWireTest, BadStreamsFailWithTheRightCode) {
  struct Case {
    ProviderKind kind;
    std::string body;
    absl::StatusCode code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {ProviderKind::kAnthropic,
       "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
       "\"message\":\"Overloaded\"}}\n\n",
       absl::StatusCode::kUnavailable, "Overloaded"},
      {ProviderKind::kAnthropic,
       "data: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\"}}\n\n",
       absl::StatusCode::kInvalidArgument, "invalid_request_error"},
      {ProviderKind::kOpenAi, "data: [1, 2]\n\n", absl::StatusCode::kUnknown, "not a JSON object"},
      {ProviderKind::kOpenAi,
       "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":-1}]}}]}\n\n",
       absl::StatusCode::kUnknown, "index"},
      {ProviderKind::kOpenAi,
       "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,"
       "\"function\":{\"arguments\":\"{}\"}}]}}]}\n\ndata: [DONE]\n\n",
       absl::StatusCode::kUnknown, "no name"},
      {ProviderKind::kAnthropic, absl::StrCat("data: ", std::string(kMaxStreamLine, 'x')),
       absl::StatusCode::kUnknown, "longer than"},
      {ProviderKind::kAnthropic, "", absl::StatusCode::kUnavailable, "cut after 0 bytes"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.substr(0, 80));
    std::string deltas;
    EXPECT_THAT(ReadStream(c.kind, c.body, &deltas), StatusIs(c.code, HasSubstr(c.says)));
    EXPECT_EQ(deltas, "");
  }
}

}  // namespace
}  // namespace runloom::llm_internal
