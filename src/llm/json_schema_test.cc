#include "llm/json_schema.h"

#include "testing/status_matchers.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <string>

namespace runloom {
namespace {

using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;
using json = nlohmann::json;

const json kSchema = json::parse(R"({
  "type": "object",
  "required": ["summary", "score"],
  "additionalProperties": false,
  "properties": {
    "summary": {"type": "string", "minLength": 1},
    "score": {"type": "integer", "minimum": 0, "maximum": 100},
    "tags": {"type": "array", "items": {"type": "string"}}
  }
})");

TEST(JsonSchemaTest, AcceptsAMatchingValue) {
  absl::StatusOr<std::unique_ptr<JsonSchema>> schema = JsonSchema::Compile(kSchema);
  ASSERT_OK(schema);
  EXPECT_OK((*schema)->Validate({{"summary", "ok"}, {"score", 7}, {"tags", {"a", "b"}}}));
}

TEST(JsonSchemaTest, AMismatchIsInvalidAndSaysWhere) {
  absl::StatusOr<std::unique_ptr<JsonSchema>> schema = JsonSchema::Compile(kSchema);
  ASSERT_OK(schema);
  absl::Status s = (*schema)->Validate({{"summary", "ok"}, {"score", "high"}});
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(s.message()), HasSubstr("reply does not match response_schema"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("at /score"));
  s = (*schema)->Validate({{"summary", "ok"}, {"score", 1}, {"tags", {"a", 3}}});
  EXPECT_THAT(std::string(s.message()), HasSubstr("at /tags/1"));
  s = (*schema)->Validate({{"score", 1}});
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  s = (*schema)->Validate({{"summary", "ok"}, {"score", 1}, {"extra", true}});
  EXPECT_THAT(std::string(s.message()), HasSubstr("extra"));
}

TEST(JsonSchemaTest, ABadSchemaIsRefusedWithoutAborting) {
  EXPECT_THAT(JsonSchema::Compile(json::array()), StatusIs(absl::StatusCode::kInvalidArgument));
  absl::Status s = JsonSchema::Compile({{"type", 5}}).status();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(s.message()), HasSubstr("not a valid JSON Schema"));
  // Nothing is fetched.
  s = JsonSchema::Compile({{"$ref", "http://127.0.0.1:1/schema.json"}}).status();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace runloom
