// Bounded loading (issue 8, finding 1 and 2): hostile YAML and JSON are
// refused after bounded work, with the limit and the source named.
#include "runloom/limits.h"

#include "runloom/workflow.h"

#include "core/bounded_json.h"
#include "testing/status_matchers.h"
#include "workflow/inputs.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace runloom {
namespace {

using ::runloom::testing::IsOk;
using ::runloom::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// `levels` anchors, each a list of nine aliases of the one before: 9^levels
// values once expanded, in a file of a few hundred bytes.
std::string AliasBomb(int levels, const std::string& at_key = "output") {
  std::string yaml = "name: bomb\nsteps:\n  - id: a\n    kind: noop\n    " + at_key + ":\n";
  yaml += "      a0: &a0 [x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= levels; ++i) {
    const std::string prev = absl::StrCat("*a", i - 1);
    yaml += absl::StrCat("      a", i, ": &a", i, " [", prev);
    for (int k = 1; k < 9; ++k) yaml += absl::StrCat(", ", prev);
    yaml += "]\n";
  }
  return yaml;
}

TEST(LoadLimits, AliasBombInAStepConfigIsRefusedNamingTheLimit) {
  for (int levels : {6, 9}) {
    EXPECT_THAT(LoadWorkflowYaml(AliasBomb(levels), "bomb.yaml"),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("bomb.yaml:"), HasSubstr("max_nodes = 100000"),
                               HasSubstr("aliases expanded"))))
        << levels << " levels";
  }
}

TEST(LoadLimits, AliasBombUnderAnyKeyIsRefused) {
  EXPECT_THAT(LoadWorkflowYaml(AliasBomb(9, "input"), "bomb.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_nodes")));
}

TEST(LoadLimits, AFewAliasesUnderTheLimitStillLoad) {
  EXPECT_THAT(LoadWorkflowYaml(AliasBomb(2), "small.yaml"), IsOk());
}

TEST(LoadLimits, NodeLimitCountsAliasesExpanded) {
  LoadLimits tight;
  tight.max_nodes = 200;
  // Written out, the document has about 60 values; expanded, a2 alone has
  // 1 + 9 * (1 + 9 * 1 + 9) = 820.
  EXPECT_THAT(LoadWorkflowYaml(AliasBomb(2), "small.yaml", tight),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_nodes = 200")));
}

TEST(LoadLimits, DeepNestingIsRefused) {
  std::string yaml = "name: deep\nsteps:\n  - id: a\n    kind: noop\n    output: ";
  yaml += std::string(200, '[') + std::string(200, ']') + "\n";
  EXPECT_THAT(LoadWorkflowYaml(yaml, "deep.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("deep.yaml:5"), HasSubstr("max_depth = 64"))));
}

TEST(LoadLimits, DepthThroughAnAliasCounts) {
  // An anchor 40 deep used 40 deep is 80 deep once expanded.
  std::string nest = std::string(40, '[') + "x" + std::string(40, ']');
  std::string yaml = "name: deep\nsteps:\n  - id: a\n    kind: noop\n    output:\n";
  yaml += "      a: &d " + nest + "\n";
  yaml += "      b: " + std::string(40, '[') + "*d" + std::string(40, ']') + "\n";
  EXPECT_THAT(LoadWorkflowYaml(yaml, "deep.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_depth")));
}

// Found by tests/fuzz/workflow_loader_fuzz (issue 8): yaml-cpp made `&x [*x]`
// a cyclic node and the loader's key check recursed until the stack overflowed.
TEST(LoadLimits, AliasInsideItsOwnAnchorIsRefused) {
  const std::string head = "name: r\nsteps:\n  - id: a\n    kind: noop\n    output: ";
  for (const std::string value :
       {"&x [*x]", "&m {k: *m}", "&m {k: [1, {j: *m}]}", "&k {*k : 1}", "{a: &o [*o, 1]}"}) {
    absl::StatusOr<Workflow> wf = LoadWorkflowYaml(head + value + "\n", "cycle.yaml");
    EXPECT_THAT(wf, StatusIs(absl::StatusCode::kInvalidArgument,
                             AllOf(HasSubstr("cycle.yaml:5"), HasSubstr("contain itself"))))
        << value;
    EXPECT_FALSE(IsLimitError(wf.status())) << value;
  }
  // The same alias after its anchor's node closes is an ordinary alias.
  EXPECT_THAT(LoadWorkflowYaml(head + "{a: &o [1, 2], b: *o}\n", "ok.yaml"), IsOk());
}

TEST(LoadLimits, TooManyStepsIsRefused) {
  std::string yaml = "name: many\nsteps:\n";
  for (int i = 0; i < 1001; ++i) yaml += absl::StrCat("  - {id: s", i, ", kind: noop}\n");
  EXPECT_THAT(LoadWorkflowYaml(yaml, "many.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("has 1001 steps"), HasSubstr("max_steps = 1000"))));
}

TEST(LoadLimits, LargeTextIsRefusedBeforeParsing) {
  const std::string yaml = "name: big\ndescription: " + std::string(2 << 20, 'x') + "\n";
  EXPECT_THAT(LoadWorkflowYaml(yaml, "big.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_bytes = 1048576")));
}

class LimitsFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / absl::StrCat("runloom-limits-", getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(LimitsFileTest, LargeWorkflowFileIsRefusedByItsSize) {
  const std::string path =
      Write("big.yaml", "name: big\ndescription: " + std::string((1 << 20) + 10, 'x') + "\n");
  EXPECT_THAT(LoadWorkflowFile(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("workflow file '"), HasSubstr("max_bytes = 1048576"))));
}

TEST_F(LimitsFileTest, DirectoryAndMissingFileAreClearErrors) {
  EXPECT_THAT(LoadWorkflowFile(dir_.string()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a regular file")));
  EXPECT_THAT(LoadWorkflowFile((dir_ / "nope.yaml").string()),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("not found")));
}

TEST_F(LimitsFileTest, JsonFileIsReadBounded) {
  EXPECT_THAT(ReadJsonFileBounded(Write("ok.json", R"({"a": [1, 2]})"), "input file"), IsOk());
  EXPECT_THAT(ReadJsonFileBounded(Write("deep.json", std::string(100000, '[')), "input file"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("input file '"), HasSubstr("max_depth = 64"))));
}

TEST(BoundedJson, DeepNestingStopsAtTheLimitWithoutRecursing) {
  absl::StatusOr<nlohmann::json> v = ParseJsonBounded(std::string(500000, '['), "body");
  EXPECT_THAT(v, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_depth = 64")));
  EXPECT_TRUE(IsLimitError(v.status()));
}

TEST(BoundedJson, TooManyValuesAndTooManyBytes) {
  std::string many = "[";
  for (int i = 0; i < 100001; ++i) many += i == 0 ? "1" : ",1";
  many += "]";
  EXPECT_THAT(ParseJsonBounded(many, "body"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_nodes = 100000")));
  LoadLimits small;
  small.max_bytes = 10;
  EXPECT_THAT(ParseJsonBounded(R"({"key": "a longer value"})", "body", small),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_bytes = 10")));
}

TEST(BoundedJson, SyntaxErrorsAreNotLimitErrors) {
  absl::StatusOr<nlohmann::json> v = ParseJsonBounded("{\"a\": ", "body");
  EXPECT_THAT(v, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not valid JSON")));
  EXPECT_FALSE(IsLimitError(v.status()));
  EXPECT_THAT(ParseJsonBounded(R"({"a": [1, {"b": null}]})", "body"), IsOk());
}

TEST(BoundedJson, ObjectInputGivenAsTextIsParsedBounded) {
  absl::StatusOr<Workflow> wf = LoadWorkflowYaml(
      "name: t\ninputs:\n  o: {type: object}\nsteps:\n  - {id: a, kind: noop}\n", "t.yaml");
  ASSERT_THAT(wf, IsOk());
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  EXPECT_THAT(FreezeInputs(*wf, {{"o", "{\"k\": " + deep + "}"}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("input 'o'"), HasSubstr("max_depth"))));
  EXPECT_THAT(FreezeInputs(*wf, {{"o", R"({"k": [1]})"}}), IsOk());
}

}  // namespace
}  // namespace runloom
