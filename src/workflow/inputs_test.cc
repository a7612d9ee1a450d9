// FreezeInputs: declared, required, typed, enum-checked, defaulted, secrets dropped.
#include "workflow/inputs.h"

#include "testing/status_matchers.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace runloom {
namespace {

using ::runloom::testing::IsOkAndHolds;
using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;
using json = nlohmann::json;

Workflow Declared() {
  absl::StatusOr<Workflow> wf = LoadWorkflowYaml(R"(name: t
inputs:
  document_id: {type: string, required: true}
  format: {type: string, enum: [pdf, txt], default: txt}
  pages: {type: integer}
  ratio: {type: number}
  dry_run: {type: boolean, default: false}
  opts: {type: object}
  tags: {type: array}
  api_key: {type: string, secret: true, required: true}
steps:
  - {id: a, kind: noop}
)",
                                                 "inputs.yaml");
  EXPECT_TRUE(wf.ok()) << wf.status();
  return wf.ok() ? *std::move(wf) : Workflow{};
}

std::string ErrorOf(const json& given) {
  absl::StatusOr<json> v = FreezeInputs(Declared(), given);
  EXPECT_THAT(v, StatusIs(absl::StatusCode::kInvalidArgument));
  return std::string(v.status().message());
}

TEST(FreezeInputs, AppliesDefaultsAndDropsSecrets) {
  EXPECT_THAT(FreezeInputs(Declared(), {{"document_id", "d1"}, {"api_key", "sk-1"}}),
              IsOkAndHolds(json::parse(R"({"document_id":"d1","format":"txt","dry_run":false})")));
}

// Issue 8, finding 4: a reference is stored, so any worker can resolve it; a
// bad one is refused; a value stays out of the result.
TEST(FreezeInputs, KeepsSecretReferencesAndRefusesBadOnes) {
  EXPECT_THAT(
      FreezeInputs(Declared(), {{"document_id", "d1"}, {"api_key", "secret://API_KEY"}}),
      IsOkAndHolds(json::parse(
          R"({"document_id":"d1","format":"txt","dry_run":false,"api_key":"secret://API_KEY"})")));
  EXPECT_THAT(ErrorOf({{"document_id", "d1"}, {"api_key", "secret://9bad-name"}}),
              HasSubstr("secret://NAME"));
  EXPECT_EQ(SecretRefName(json("secret://A_1")), "A_1");
  EXPECT_EQ(SecretRefName(json("secret://")), std::nullopt);
  EXPECT_EQ(SecretRefName(json("plain")), std::nullopt);
}

TEST(FreezeInputs, ConvertsCliStrings) {
  const json given = {{"document_id", "d1"}, {"api_key", "k"},    {"pages", "42"},
                      {"ratio", "1.5"},      {"dry_run", "true"}, {"opts", R"({"a":1})"},
                      {"tags", "[1, 2]"},    {"format", "pdf"}};
  EXPECT_THAT(FreezeInputs(Declared(), given),
              IsOkAndHolds(json::parse(R"({"document_id":"d1","pages":42,"ratio":1.5,
                  "dry_run":true,"opts":{"a":1},"tags":[1,2],"format":"pdf"})")));
  absl::StatusOr<json> whole = FreezeInputs(
      Declared(), {{"document_id", "d"}, {"api_key", "k"}, {"ratio", "3"}, {"pages", 4.0}});
  ASSERT_OK(whole);
  EXPECT_TRUE((*whole)["ratio"].is_number_integer());
  EXPECT_EQ((*whole)["pages"], 4);
}

TEST(FreezeInputs, UnknownInputListsDeclaredOnes) {
  EXPECT_THAT(ErrorOf({{"document_id", "d"}, {"api_key", "k"}, {"colour", "red"}}),
              HasSubstr("input 'colour': not declared by workflow 't'; declared inputs: "
                        "document_id, format, pages, ratio, dry_run, opts, tags, api_key"));
}

TEST(FreezeInputs, RequiredInputsMustBeGiven) {
  EXPECT_THAT(ErrorOf({{"api_key", "k"}}),
              HasSubstr("input 'document_id': required but not given"));
  EXPECT_THAT(ErrorOf({{"document_id", "d"}}), HasSubstr("input 'api_key': required"));
  EXPECT_THAT(ErrorOf({{"document_id", nullptr}, {"api_key", "k"}}),
              HasSubstr("input 'document_id': required"));
}

TEST(FreezeInputs, TypesAreChecked) {
  const json base = {{"document_id", "d"}, {"api_key", "k"}};
  const auto with = [&](const std::string& k, const json& v) {
    json g = base;
    g[k] = v;
    return ErrorOf(g);
  };
  EXPECT_THAT(with("pages", "many"), HasSubstr("input 'pages': got \"many\", expected integer"));
  EXPECT_THAT(with("pages", 2.5), HasSubstr("expected integer"));
  EXPECT_THAT(with("ratio", "fast"), HasSubstr("expected number"));
  EXPECT_THAT(with("dry_run", "yes"), HasSubstr("expected boolean; pass true or false"));
  EXPECT_THAT(with("opts", "[1]"), HasSubstr("expected object"));
  EXPECT_THAT(with("tags", "{"), HasSubstr("expected array"));
  EXPECT_THAT(with("document_id", 5), HasSubstr("input 'document_id': got 5, expected string"));
  EXPECT_THAT(with("api_key", 5), HasSubstr("input 'api_key'"));
}

TEST(FreezeInputs, InvalidUtf8IsReportedNotThrown) {
  EXPECT_THAT(ErrorOf({{"document_id", "d"}, {"api_key", "k"}, {"pages", "\xff\xfe"}}),
              HasSubstr("input 'pages': got"));
}

TEST(FreezeInputs, EnumIsChecked) {
  EXPECT_THAT(ErrorOf({{"document_id", "d"}, {"api_key", "k"}, {"format", "docx"}}),
              HasSubstr("input 'format': docx is not allowed; use one of pdf, txt"));
}

TEST(FreezeInputs, NullOrNonObjectGiven) {
  Workflow wf = Declared();
  wf.inputs.erase(wf.inputs.begin());
  wf.inputs.pop_back();
  EXPECT_THAT(FreezeInputs(wf, nullptr),
              IsOkAndHolds(json::parse(R"({"format":"txt","dry_run":false})")));
  EXPECT_THAT(FreezeInputs(wf, json::array()), StatusIs(absl::StatusCode::kInvalidArgument));
  Workflow none;
  none.name = "empty";
  EXPECT_THAT(FreezeInputs(none, {{"x", 1}}).status().message(),
              HasSubstr("it declares no inputs"));
}

}  // namespace
}  // namespace runloom
