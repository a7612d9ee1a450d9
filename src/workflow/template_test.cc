// Templates, references and conditions.
#include "workflow/template.h"

#include "testing/status_matchers.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <map>

namespace runloom {
namespace {

using ::runloom::testing::IsOkAndHolds;
using ::runloom::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

// Resolves from a fixed table; anything else is kNotFound.
RefResolver Table(std::map<std::string, json> values) {
  return [values = std::move(values)](const std::string& ref) -> absl::StatusOr<json> {
    auto it = values.find(ref);
    if (it == values.end()) {
      return absl::NotFoundError("no record for " + ref);
    }
    return it->second;
  };
}

TEST(Ref, ParsesEveryForm) {
  absl::StatusOr<Ref> r = ParseRef("steps.a.output.b.c");
  ASSERT_OK(r);
  EXPECT_EQ(r->root, "steps");
  EXPECT_EQ(r->step_id, "a");
  EXPECT_EQ(r->attr, "output");
  EXPECT_THAT(r->path, ElementsAre("b", "c"));
  r = ParseRef("inputs.x.y");
  ASSERT_OK(r);
  EXPECT_EQ(r->root, "inputs");
  EXPECT_THAT(r->path, ElementsAre("x", "y"));
  r = ParseRef("run.revision");
  ASSERT_OK(r);
  EXPECT_EQ(r->root, "run");
  EXPECT_THAT(r->path, ElementsAre("revision"));
  EXPECT_OK(ParseRef("steps.a.status"));
  EXPECT_OK(ParseRef("steps.a.output"));
  EXPECT_OK(ParseRef("loop.iteration"));
  EXPECT_OK(ParseRef("run.feedback.comment"));
}

TEST(Ref, RejectsBadShapes) {
  for (const char* bad :
       {"", "inputs", "inputs..x", "steps.a", "steps.a.stdout", "steps.a.status.x", "run.owner",
        "run.id.x", "loop.index", "env.HOME", "inputs.a b"}) {
    absl::StatusOr<Ref> r = ParseRef(bad);
    EXPECT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("bad reference")) << bad;
  }
}

TEST(Template, RefsAreCollectedFromValuesNotKeys) {
  const json v = json::parse(R"({
    "{{ inputs.key }}": "x {{ inputs.a }} y {{steps.s.output.t}}",
    "list": ["{{ inputs.a }}", {"deep": "{{ run.id }}"}, 3],
    "broken": "{{ inputs.unclosed"
  })");
  // Object members are visited in key order ("broken" < "list" < "{{...").
  EXPECT_THAT(TemplateRefs(v), ElementsAre("inputs.a", "run.id", "steps.s.output.t"));
  EXPECT_TRUE(TemplateRefs(json("no templates")).empty());
}

TEST(Template, WholeStringKeepsType) {
  const RefResolver r =
      Table({{"inputs.n", 42}, {"inputs.o", json::parse(R"({"k":[1,2]})")}, {"inputs.b", false}});
  EXPECT_THAT(ResolveTemplates(json("{{ inputs.n }}"), r), IsOkAndHolds(json(42)));
  EXPECT_THAT(ResolveTemplates(json("  {{inputs.o}}\n"), r),
              IsOkAndHolds(json::parse(R"({"k":[1,2]})")));
  EXPECT_THAT(ResolveTemplates(json("{{ inputs.b }}"), r), IsOkAndHolds(json(false)));
}

TEST(Template, EmbeddedRefsBecomeText) {
  const RefResolver r = Table({{"inputs.s", "doc"},
                               {"inputs.n", 7},
                               {"inputs.o", json::parse(R"({"a":1})")},
                               {"inputs.z", nullptr}});
  EXPECT_THAT(ResolveTemplates(json("id={{ inputs.s }}, n={{ inputs.n }}"), r),
              IsOkAndHolds(json("id=doc, n=7")));
  EXPECT_THAT(ResolveTemplates(json("o={{ inputs.o }} z={{ inputs.z }}"), r),
              IsOkAndHolds(json(R"(o={"a":1} z=null)")));
  EXPECT_THAT(ResolveTemplates(json("{{ inputs.s }}{{ inputs.n }}"), r),
              IsOkAndHolds(json("doc7")));
  EXPECT_THAT(ResolveTemplates(json("plain"), r), IsOkAndHolds(json("plain")));
}

TEST(Template, NestedValuesRecurseAndKeysStay) {
  const RefResolver r = Table({{"inputs.n", 5}, {"steps.a.output.list", json::array({1, 2})}});
  const json in =
      json::parse(R"({"{{ inputs.n }}": ["{{ inputs.n }}", {"l": "{{ steps.a.output.list }}"}],
                                  "num": 1.5, "flag": true, "nothing": null})");
  const json want = json::parse(R"({"{{ inputs.n }}": [5, {"l": [1, 2]}],
                                    "num": 1.5, "flag": true, "nothing": null})");
  EXPECT_THAT(ResolveTemplates(in, r), IsOkAndHolds(want));
}

TEST(Template, ErrorsPropagate) {
  const RefResolver r = Table({{"inputs.a", 1}});
  absl::StatusOr<json> v = ResolveTemplates(json::array({"ok", "{{ steps.x.output }}"}), r);
  EXPECT_THAT(v, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(v.status().message(), HasSubstr("no record for steps.x.output"));
  EXPECT_THAT(ResolveTemplates(json("a {{ inputs.a"), r),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ResolveTemplates(json("a {{  }} b"), r),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(Condition, ParsesForms) {
  absl::StatusOr<Condition> c = ParseCondition("steps.edit.output.approved");
  ASSERT_OK(c);
  EXPECT_EQ(c->ref, "steps.edit.output.approved");
  EXPECT_EQ(c->op, "");
  c = ParseCondition(R"(  inputs.format == "pdf" )");
  ASSERT_OK(c);
  EXPECT_EQ(c->ref, "inputs.format");
  EXPECT_EQ(c->op, "==");
  EXPECT_EQ(c->value, "pdf");
  EXPECT_EQ(c->text, R"(  inputs.format == "pdf" )");
  c = ParseCondition("inputs.n!=3");
  ASSERT_OK(c);
  EXPECT_EQ(c->op, "!=");
  EXPECT_EQ(c->value, 3);
  c = ParseCondition("{{ steps.a.status }} == \"succeeded\"");
  ASSERT_OK(c);
  EXPECT_EQ(c->ref, "steps.a.status");
  c = ParseCondition(R"(steps.a.output.tags == ["x", 1])");
  ASSERT_OK(c);
  EXPECT_EQ(c->value, json::parse(R"(["x",1])"));
}

TEST(Condition, RejectsBadSyntax) {
  EXPECT_THAT(ParseCondition("").status().message(), HasSubstr("empty condition"));
  EXPECT_THAT(ParseCondition("inputs.x == approve").status().message(),
              HasSubstr("is not a JSON literal; write true, false, null"));
  EXPECT_THAT(ParseCondition("inputs.x > 3").status().message(), HasSubstr("expected == or !="));
  EXPECT_THAT(ParseCondition("inputs.x ==").status().message(), HasSubstr("nothing after =="));
  EXPECT_THAT(ParseCondition("bogus.ref").status().message(), HasSubstr("unknown root 'bogus'"));
  EXPECT_THAT(ParseCondition("{{ inputs.x == 1").status().message(), HasSubstr("unclosed"));
}

TEST(Condition, EvaluatesTruthinessAndComparisons) {
  const RefResolver r = Table({{"inputs.null", nullptr},
                               {"inputs.f", false},
                               {"inputs.zero", 0},
                               {"inputs.zerof", 0.0},
                               {"inputs.empty", ""},
                               {"inputs.arr", json::array()},
                               {"inputs.obj", json::object()},
                               {"inputs.t", true},
                               {"inputs.one", 1},
                               {"inputs.s", "x"},
                               {"inputs.full", json::array({0})}});
  const auto eval = [&](const std::string& text) {
    absl::StatusOr<Condition> c = ParseCondition(text);
    EXPECT_TRUE(c.ok()) << c.status();
    absl::StatusOr<bool> v = EvaluateCondition(*c, r);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() && *v;
  };
  for (const char* falsy : {"inputs.null", "inputs.f", "inputs.zero", "inputs.zerof",
                            "inputs.empty", "inputs.arr", "inputs.obj"}) {
    EXPECT_FALSE(eval(falsy)) << falsy;
  }
  for (const char* truthy : {"inputs.t", "inputs.one", "inputs.s", "inputs.full"}) {
    EXPECT_TRUE(eval(truthy)) << truthy;
  }
  EXPECT_TRUE(eval(R"(inputs.s == "x")"));
  EXPECT_FALSE(eval(R"(inputs.s != "x")"));
  EXPECT_TRUE(eval("inputs.one == 1.0"));
  EXPECT_FALSE(eval(R"(inputs.one == "1")"));
  EXPECT_TRUE(eval("inputs.null == null"));
}

TEST(Condition, ResolverErrorPropagates) {
  absl::StatusOr<Condition> c = ParseCondition("steps.never.status == \"ok\"");
  ASSERT_OK(c);
  EXPECT_THAT(EvaluateCondition(*c, Table({})), StatusIs(absl::StatusCode::kNotFound));
}

TEST(JsonPath, WalksKeysAndIndexes) {
  const json v = json::parse(R"({"a": {"b": [10, {"c": "x"}], "7": "seven"}})");
  EXPECT_EQ(JsonAtPath(v, {}), v);
  EXPECT_EQ(JsonAtPath(v, {"a", "b", "0"}), json(10));
  EXPECT_EQ(JsonAtPath(v, {"a", "b", "1", "c"}), json("x"));
  EXPECT_EQ(JsonAtPath(v, {"a", "7"}), json("seven"));
  EXPECT_EQ(JsonAtPath(v, {"a", "b", "2"}), std::nullopt);
  EXPECT_EQ(JsonAtPath(v, {"a", "b", "x"}), std::nullopt);
  EXPECT_EQ(JsonAtPath(v, {"a", "b", "-1"}), std::nullopt);
  EXPECT_EQ(JsonAtPath(v, {"a", "missing"}), std::nullopt);
  EXPECT_EQ(JsonAtPath(v, {"a", "b", "1", "c", "d"}), std::nullopt);
}

}  // namespace
}  // namespace runloom
