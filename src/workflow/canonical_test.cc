// Canonical form and digest: stable under formatting, changed by real
// changes, and invertible.
#include "runloom/workflow.h"

#include "testing/status_matchers.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace runloom {
namespace {

using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

constexpr char kBlock[] = R"(name: review
description: two steps
inputs:
  topic: {type: string, required: true}
  depth: {type: integer, default: 2, enum: [1, 2, 3]}
steps:
  - id: draft
    kind: llm
    prompt: "write about {{ inputs.topic }}"
    model: fast
    timeout: 1m
  - id: loop
    kind: loop
    max_iterations: 3
    until: steps.check.output.ok == true
    body:
      - id: check
        kind: exec
        command: [check, "{{ steps.draft.output.text }}"]
  - id: fan
    kind: parallel
    deadline: 2s
    needs: [draft, loop]
    branches:
      - steps: [{id: one, kind: noop}]
      - name: two
        steps: [{id: other, kind: noop, when: 'inputs.depth != 1'}]
)";

// The same workflow: flow style, keys reordered, inputs reordered, comments,
// durations spelled differently, condition spacing changed, needs reordered,
// explicit defaults (retry with max_attempts 1, trigger all_success, branch b0).
constexpr char kFlow[] = R"(# a comment
description: "two steps"
name: review
inputs:
  depth: {enum: [1, 2, 3], default: 2, type: integer}
  topic: {required: true, type: string, description: ""}
steps:
  - {kind: llm, id: draft, timeout: 60s, model: fast, prompt: "write about {{ inputs.topic }}",
     retry: {max_attempts: 1}, trigger: all_success, allow_failure: false}
  - id: loop
    max_iterations: 3
    kind: loop
    until: "steps.check.output.ok==true"
    body: [{id: check, command: [check, "{{ steps.draft.output.text }}"], kind: exec}]
  - kind: parallel
    id: fan
    needs: [loop, draft]
    deadline: 2000ms
    branches:
      - {name: b0, steps: [{id: one, kind: noop}]}
      - {steps: [{kind: noop, when: inputs.depth!=1, id: other}], name: two}
)";

Workflow MustLoad(const std::string& yaml, const std::string& source = "wf.yaml") {
  absl::StatusOr<Workflow> wf = LoadWorkflowYaml(yaml, source);
  EXPECT_TRUE(wf.ok()) << wf.status();
  return wf.ok() ? *std::move(wf) : Workflow{};
}

TEST(Canonical, DigestStableUnderFormattingAndKeyOrder) {
  const Workflow a = MustLoad(kBlock);
  const Workflow b = MustLoad(kFlow, "elsewhere/other.yaml");
  EXPECT_EQ(CanonicalWorkflow(a), CanonicalWorkflow(b)) << CanonicalWorkflow(a).dump(2) << "\n---\n"
                                                        << CanonicalWorkflow(b).dump(2);
  EXPECT_EQ(WorkflowDigest(a), WorkflowDigest(b));
  EXPECT_THAT(WorkflowDigest(a), MatchesRegex("sha256:[0-9a-f]{64}"));
}

TEST(Canonical, OmittedRetryEqualsDefaultRetry) {
  const Workflow a = MustLoad("name: t\nsteps:\n  - {id: a, kind: noop}\n");
  const Workflow b = MustLoad(
      "name: t\nsteps:\n  - {id: a, kind: noop, retry: {max_attempts: 1, initial_delay: 1s, "
      "multiplier: 2, max_delay: 5m, on: [rate_limited, error, timeout, unavailable]}}\n");
  EXPECT_EQ(WorkflowDigest(a), WorkflowDigest(b));
}

TEST(Canonical, RealChangesChangeTheDigest) {
  const std::string base = WorkflowDigest(MustLoad(kBlock));
  const auto changed = [&](const std::string& from, const std::string& to) {
    std::string yaml = kBlock;
    const size_t pos = yaml.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    yaml.replace(pos, from.size(), to);
    return WorkflowDigest(MustLoad(yaml));
  };
  EXPECT_NE(changed("timeout: 1m", "timeout: 2m"), base);
  EXPECT_NE(changed("model: fast", "model: slow"), base);
  EXPECT_NE(changed("max_iterations: 3", "max_iterations: 4"), base);
  EXPECT_NE(changed("needs: [draft, loop]", "needs: [loop]"), base);
  EXPECT_NE(changed("ok == true", "ok == false"), base);
  EXPECT_NE(changed("default: 2,", "default: 3,"), base);
  EXPECT_NE(changed("deadline: 2s", "deadline: 3s"), base);
  EXPECT_NE(changed("name: two", "name: three"), base);
  EXPECT_NE(changed("name: review", "name: review2"), base);
}

TEST(Canonical, DurationsAreMillisecondsAndDefaultsExplicit) {
  const nlohmann::json c = CanonicalWorkflow(MustLoad(kBlock));
  EXPECT_EQ(c["canonical_version"], 1);
  const nlohmann::json& draft = c["steps"][0];
  EXPECT_EQ(draft["timeout_ms"], 60000);
  EXPECT_EQ(draft["retry"]["initial_delay_ms"], 1000);
  EXPECT_EQ(draft["retry"]["max_delay_ms"], 300000);
  EXPECT_EQ(draft["trigger"], "all_success");
  EXPECT_EQ(draft["config"]["model"], "fast");
  EXPECT_FALSE(draft.contains("line"));
  EXPECT_FALSE(c.contains("source_path"));
  EXPECT_EQ(c["steps"][2]["deadline_ms"], 2000);
  EXPECT_EQ(c["steps"][2]["branches"][0]["name"], "b0");
  EXPECT_EQ(c["steps"][1]["until"],
            nlohmann::json::parse(R"({"ref":"steps.check.output.ok","op":"==","value":true})"));
}

// Issue 25: `timeout: none` (unbounded) is kept apart from no timeout (the
// kind's default), through the canonical form and back.
TEST(Canonical, TimeoutNoneIsNotTheSameAsNoTimeout) {
  const std::string none = R"(name: t
steps:
  - {id: a, kind: exec, command: "true", timeout: none}
  - {id: b, kind: exec, command: "true"}
)";
  const Workflow w = MustLoad(none);
  EXPECT_EQ(w.steps[0].timeout, absl::InfiniteDuration());
  EXPECT_EQ(w.steps[1].timeout, std::nullopt);
  const nlohmann::json c = CanonicalWorkflow(w);
  EXPECT_EQ(c["steps"][0]["timeout_ms"], "none");
  EXPECT_TRUE(c["steps"][1]["timeout_ms"].is_null());
  absl::StatusOr<Workflow> rebuilt = WorkflowFromCanonical(c);
  ASSERT_OK(rebuilt);
  EXPECT_EQ(rebuilt->steps[0].timeout, absl::InfiniteDuration());
  EXPECT_EQ(rebuilt->steps[1].timeout, std::nullopt);
  const Workflow defaults = MustLoad(
      "name: t\ndefaults: {timeout: none}\nsteps:\n  - {id: a, kind: exec, command: \"true\"}\n");
  EXPECT_EQ(defaults.steps[0].timeout, absl::InfiniteDuration());
  absl::StatusOr<Workflow> bad = LoadWorkflowYaml(
      "name: t\nsteps:\n  - {id: a, kind: exec, command: \"true\", timeout: never}\n", "t.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("or none for no timeout"), std::string::npos)
      << bad.status();
}

TEST(Canonical, RoundTripRebuildsTheSameWorkflow) {
  const Workflow original = MustLoad(kBlock);
  const nlohmann::json canonical = CanonicalWorkflow(original);
  absl::StatusOr<Workflow> rebuilt = WorkflowFromCanonical(canonical);
  ASSERT_OK(rebuilt);
  EXPECT_EQ(WorkflowDigest(*rebuilt), WorkflowDigest(original));
  EXPECT_EQ(CanonicalWorkflow(*rebuilt), canonical);
  EXPECT_EQ(rebuilt->steps[1].until->ref, "steps.check.output.ok");
  EXPECT_EQ(rebuilt->steps[1].until->text, "steps.check.output.ok == true");
  EXPECT_EQ(rebuilt->steps[0].timeout, absl::Minutes(1));
  EXPECT_EQ(rebuilt->steps[2].branches[1].steps[0].when->value, 1);
  EXPECT_TRUE(rebuilt->source_path.empty());
  // Through text too, as the catalog stores it.
  absl::StatusOr<Workflow> from_text =
      WorkflowFromCanonical(nlohmann::json::parse(canonical.dump()));
  ASSERT_OK(from_text);
  EXPECT_EQ(WorkflowDigest(*from_text), WorkflowDigest(original));
}

// A budget is part of the workflow (and its digest) only when declared.
TEST(Canonical, BudgetRoundTripsAndChangesTheDigest) {
  Workflow wf =
      MustLoad("name: t\ninputs:\n  team: {type: string}\nsteps:\n  - {id: a, kind: noop}\n");
  const std::string none = WorkflowDigest(wf);
  EXPECT_FALSE(CanonicalWorkflow(wf).contains("budget_micros"));
  wf.budget_micros = 2'500'000;
  EXPECT_NE(WorkflowDigest(wf), none);
  absl::StatusOr<Workflow> back = WorkflowFromCanonical(CanonicalWorkflow(wf));
  ASSERT_OK(back);
  EXPECT_EQ(back->budget_micros, 2'500'000);
  wf.tenant_input = "team";
  const std::string with_tenant = WorkflowDigest(wf);
  back = WorkflowFromCanonical(CanonicalWorkflow(wf));
  ASSERT_OK(back);
  EXPECT_EQ(back->tenant_input, "team");
  EXPECT_EQ(WorkflowDigest(*back), with_tenant);
}

// Issue 28: a workflow that does not set `max_attempts:` keeps the digest
// it had before the key existed (these are the digests of the build before
// it), so catalogs in existing databases stay valid. The default written out
// (`max_attempts: 5`) means the same and keeps it too; another value is a
// new definition.
TEST(Canonical, MaxAttemptsChangesTheDigestOnlyWhenNotTheDefault) {
  EXPECT_EQ(WorkflowDigest(MustLoad(kBlock)),
            "sha256:6f58b3c222425ce940be628aa620c6b7835ce3de6b3ec9761c5c9b8ea553de1d");
  const std::string plain = "name: t\nsteps:\n  - {id: a, kind: noop}\n";
  const Workflow absent = MustLoad(plain);
  EXPECT_EQ(WorkflowDigest(absent),
            "sha256:43a5f98dd6d8918900019c6e6df322bf004de96d6e477ecb3e7cdd2a6d48eb3b");
  EXPECT_FALSE(CanonicalWorkflow(absent).contains("max_attempts"));
  const Workflow five = MustLoad("max_attempts: 5\n" + plain);
  EXPECT_FALSE(CanonicalWorkflow(five).contains("max_attempts"));
  EXPECT_EQ(WorkflowDigest(five), WorkflowDigest(absent));
  const Workflow seven = MustLoad("max_attempts: 7\n" + plain);
  EXPECT_EQ(CanonicalWorkflow(seven)["max_attempts"], 7);
  EXPECT_NE(WorkflowDigest(seven), WorkflowDigest(absent));
  absl::StatusOr<Workflow> back = WorkflowFromCanonical(CanonicalWorkflow(seven));
  ASSERT_OK(back);
  EXPECT_EQ(CanonicalWorkflow(*back)["max_attempts"], 7);
  EXPECT_EQ(WorkflowDigest(*back), WorkflowDigest(seven));
}

// Issue 23: `concurrency:` and `priority:` enter the canonical form only
// when set (priority: when not 0), so earlier digests (pinned above) hold.
TEST(Canonical, ConcurrencyAndPriorityChangeTheDigestOnlyWhenSet) {
  const std::string plain =
      "name: t\ninputs:\n  tenant: {type: string}\nsteps:\n  - {id: a, kind: noop}\n";
  const Workflow absent = MustLoad(plain);
  EXPECT_FALSE(CanonicalWorkflow(absent).contains("concurrency"));
  EXPECT_FALSE(CanonicalWorkflow(absent).contains("priority"));
  EXPECT_EQ(WorkflowDigest(MustLoad("priority: 0\n" + plain)), WorkflowDigest(absent));
  const Workflow keyed =
      MustLoad("concurrency: {key: \"{{ inputs.tenant }}\", limit: 3}\npriority: 4\n" + plain);
  EXPECT_EQ(CanonicalWorkflow(keyed)["concurrency"]["limit"], 3);
  EXPECT_EQ(CanonicalWorkflow(keyed)["priority"], 4);
  EXPECT_NE(WorkflowDigest(keyed), WorkflowDigest(absent));
  absl::StatusOr<Workflow> back = WorkflowFromCanonical(CanonicalWorkflow(keyed));
  ASSERT_OK(back);
  ASSERT_TRUE(back->concurrency.has_value());
  EXPECT_EQ(back->concurrency->key, "{{ inputs.tenant }}");
  EXPECT_EQ(back->concurrency->limit, 3);
  EXPECT_EQ(back->priority, 4);
  EXPECT_EQ(WorkflowDigest(*back), WorkflowDigest(keyed));
  EXPECT_NE(WorkflowDigest(MustLoad("concurrency: {key: \"{{ inputs.tenant }}\", limit: 2}\n" +
                                    plain)),
            WorkflowDigest(MustLoad("concurrency: {key: \"{{ inputs.tenant }}\", limit: 3}\n" +
                                    plain)));
}

TEST(Canonical, InputWithNullDefaultIsDistinctFromNoDefault) {
  Workflow wf =
      MustLoad("name: t\ninputs:\n  o: {type: object}\nsteps:\n  - {id: a, kind: noop}\n");
  const std::string none = WorkflowDigest(wf);
  wf.inputs[0].default_value = nlohmann::json::object();
  EXPECT_NE(WorkflowDigest(wf), none);
  absl::StatusOr<Workflow> back = WorkflowFromCanonical(CanonicalWorkflow(wf));
  ASSERT_OK(back);
  ASSERT_TRUE(back->inputs[0].default_value.has_value());
  EXPECT_EQ(*back->inputs[0].default_value, nlohmann::json::object());
}

TEST(Canonical, NonEmptyNeedsAreExplicitWithoutTheFlag) {
  Workflow wf =
      MustLoad("name: t\nsteps:\n  - {id: a, kind: noop}\n  - {id: b, kind: noop, needs: [a]}\n");
  const std::string digest = WorkflowDigest(wf);
  wf.steps[1].explicit_needs = false;  // as a C++ caller might build it
  EXPECT_EQ(WorkflowDigest(wf), digest);
  EXPECT_OK(ValidateWorkflow(wf));
}

TEST(Canonical, FromCanonicalRejectsMalformedInput) {
  const nlohmann::json good = CanonicalWorkflow(MustLoad(kBlock));
  EXPECT_THAT(WorkflowFromCanonical(nlohmann::json::array()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  nlohmann::json missing = good;
  missing["steps"][0].erase("retry");
  EXPECT_THAT(WorkflowFromCanonical(missing).status().message(),
              HasSubstr("canonical workflow is malformed"));
  nlohmann::json wrong_type = good;
  wrong_type["steps"][0]["timeout_ms"] = "soon";
  EXPECT_THAT(WorkflowFromCanonical(wrong_type), StatusIs(absl::StatusCode::kInvalidArgument));
  nlohmann::json future = good;
  future["canonical_version"] = 2;
  EXPECT_THAT(WorkflowFromCanonical(future).status().message(),
              HasSubstr("canonical_version 2 is not supported"));
  nlohmann::json bad_trigger = good;
  bad_trigger["steps"][0]["trigger"] = "never";
  EXPECT_THAT(WorkflowFromCanonical(bad_trigger).status().message(),
              HasSubstr("unknown trigger rule 'never'"));
}

TEST(Canonical, FromCanonicalValidates) {
  nlohmann::json c = CanonicalWorkflow(MustLoad(kBlock));
  c["steps"][2]["needs"] = {"nope"};
  absl::StatusOr<Workflow> wf = WorkflowFromCanonical(c);
  EXPECT_THAT(wf, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(wf.status().message(), HasSubstr("review: step 'fan': needs 'nope'"));
}

}  // namespace
}  // namespace runloom
