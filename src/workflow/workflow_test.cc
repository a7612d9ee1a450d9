// Loader and validator: good files load with every field in place, and each
// class of mistake yields a message naming the right line.
#include "runloom/workflow.h"

#include "testing/status_matchers.h"
#include "workflow/template.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace runloom {
namespace {

using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kFull[] = R"(name: ingest
description: Parse, chunk and index one document
inputs:
  document_id: {type: string, required: true, description: "the doc"}
  format: {type: string, enum: [pdf, docx, html, csv, txt], default: txt}
  pages: {type: integer, default: 3}
  api_key: {type: string, secret: true}
outcome: "{{ steps.status.output.outcome }}"
defaults:
  timeout: 30s
  retry: {max_attempts: 2}
steps:
  - id: save_metadata
    kind: exec
    phase: intake
    command: ["python3", "parse.py"]
    input: {doc: "{{ inputs.document_id }}", n: 42, ratio: 1.5, ok: true, none: ~, quoted: "42"}
  - id: parse
    kind: exec
    needs: [save_metadata]
    trigger: all_done
    when: 'inputs.format == "pdf"'
    retry: {max_attempts: 3, initial_delay: 1s, multiplier: 2, max_delay: 30s, on: [error, timeout]}
    timeout: 10s
    allow_failure: true
    input: {text: "{{ steps.save_metadata.output.path }}"}
  - id: refine
    kind: loop
    max_iterations: 3
    until: 'steps.edit.output.approved == true'
    body:
      - id: write
        kind: llm
        prompt: "draft {{ loop.iteration }}"
      - id: edit
        kind: llm
        prompt: "edit {{ steps.write.output.text }}"
  - id: fanout
    kind: parallel
    deadline: 5s
    needs: []
    branches:
      - name: security
        steps:
          - {id: sec, kind: noop}
      - steps:
          - {id: perf, kind: noop, timeout: 1s}
  - id: status
    kind: noop
)";

absl::StatusOr<Workflow> Load(const std::string& yaml) { return LoadWorkflowYaml(yaml, "wf.yaml"); }

std::string ErrorOf(const std::string& yaml) {
  absl::StatusOr<Workflow> wf = Load(yaml);
  if (wf.ok()) {
    return "(loaded fine)";
  }
  EXPECT_EQ(wf.status().code(), absl::StatusCode::kInvalidArgument) << wf.status();
  return std::string(wf.status().message());
}

// A minimal valid workflow with `steps` (a YAML block at indentation 2) appended.
std::string WithSteps(const std::string& steps) { return absl::StrCat("name: t\nsteps:\n", steps); }

TEST(Loader, LoadsTopLevelAndInputs) {
  absl::StatusOr<Workflow> wf = Load(kFull);
  ASSERT_OK(wf);
  EXPECT_EQ(wf->name, "ingest");
  EXPECT_EQ(wf->source_path, "wf.yaml");
  EXPECT_EQ(wf->outcome, "{{ steps.status.output.outcome }}");
  ASSERT_EQ(wf->inputs.size(), 4u);
  EXPECT_EQ(wf->inputs[0].name, "document_id");
  EXPECT_TRUE(wf->inputs[0].required);
  EXPECT_EQ(wf->inputs[0].description, "the doc");
  EXPECT_EQ(wf->inputs[1].allowed.size(), 5u);
  EXPECT_EQ(*wf->inputs[1].default_value, "txt");
  EXPECT_EQ(*wf->inputs[2].default_value, 3);
  EXPECT_TRUE(wf->inputs[3].secret);
}

TEST(Loader, LoadsStepFieldsAndTypedConfig) {
  absl::StatusOr<Workflow> wf = Load(kFull);
  ASSERT_OK(wf);
  ASSERT_EQ(wf->steps.size(), 5u);
  const StepDef& meta = wf->steps[0];
  EXPECT_EQ(meta.line, 13);
  EXPECT_EQ(meta.phase, "intake");
  EXPECT_FALSE(meta.explicit_needs);
  EXPECT_EQ(meta.config["command"], nlohmann::json::parse(R"(["python3","parse.py"])"));
  const nlohmann::json& in = meta.config["input"];
  EXPECT_EQ(in["n"], 42);
  EXPECT_TRUE(in["n"].is_number_integer());
  EXPECT_EQ(in["ratio"], 1.5);
  EXPECT_EQ(in["ok"], true);
  EXPECT_TRUE(in["none"].is_null());
  EXPECT_EQ(in["quoted"], "42");
  EXPECT_EQ(meta.retry.max_attempts, 2);  // from defaults
  EXPECT_EQ(meta.timeout, absl::Seconds(30));

  const StepDef& parse = wf->steps[1];
  EXPECT_TRUE(parse.explicit_needs);
  EXPECT_EQ(parse.needs, std::vector<std::string>{"save_metadata"});
  EXPECT_EQ(parse.trigger, TriggerRule::kAllDone);
  ASSERT_TRUE(parse.when.has_value());
  EXPECT_EQ(parse.when->ref, "inputs.format");
  EXPECT_EQ(parse.when->op, "==");
  EXPECT_EQ(parse.when->value, "pdf");
  EXPECT_EQ(parse.retry.max_attempts, 3);
  EXPECT_EQ(parse.retry.max_delay, absl::Seconds(30));
  EXPECT_EQ(parse.retry.retry_on,
            (std::vector<ErrorClass>{ErrorClass::kError, ErrorClass::kTimeout}));
  EXPECT_EQ(parse.timeout, absl::Seconds(10));
  EXPECT_TRUE(parse.allow_failure);
  EXPECT_FALSE(parse.config.contains("retry"));
}

TEST(Loader, LoadsLoopAndParallel) {
  absl::StatusOr<Workflow> wf = Load(kFull);
  ASSERT_OK(wf);
  const StepDef& loop = wf->steps[2];
  EXPECT_EQ(loop.max_iterations, 3);
  ASSERT_TRUE(loop.until.has_value());
  EXPECT_EQ(loop.until->value, true);
  ASSERT_EQ(loop.body.size(), 2u);
  EXPECT_EQ(loop.body[1].id, "edit");
  EXPECT_TRUE(loop.config.empty());
  // Defaults fill leaf steps, nested ones included, but not loop/parallel containers.
  EXPECT_FALSE(loop.timeout.has_value());
  EXPECT_EQ(loop.retry.max_attempts, 1);
  EXPECT_EQ(loop.body[0].timeout, absl::Seconds(30));

  const StepDef& fan = wf->steps[3];
  EXPECT_TRUE(fan.explicit_needs);
  EXPECT_TRUE(fan.needs.empty());
  EXPECT_EQ(fan.deadline, absl::Seconds(5));
  ASSERT_EQ(fan.branches.size(), 2u);
  EXPECT_EQ(fan.branches[0].name, "security");
  EXPECT_EQ(fan.branches[1].name, "b1");
  EXPECT_EQ(fan.branches[1].steps[0].timeout, absl::Seconds(1));  // own beats default
  EXPECT_EQ(fan.branches[1].steps[0].retry.max_attempts, 2);
}

TEST(Loader, OwnRetryReplacesDefaultRetryWhole) {
  absl::StatusOr<Workflow> wf = Load(R"(name: t
defaults:
  retry: {max_attempts: 4, initial_delay: 3s}
steps:
  - {id: a, kind: noop, retry: {max_attempts: 2}}
)");
  ASSERT_OK(wf);
  EXPECT_EQ(wf->steps[0].retry.max_attempts, 2);
  EXPECT_EQ(wf->steps[0].retry.initial_delay, absl::Seconds(1));
}

TEST(Loader, MissingFileIsNotFound) {
  absl::StatusOr<Workflow> wf = LoadWorkflowFile("/nonexistent/dir/wf.yaml");
  EXPECT_THAT(wf, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(wf.status().message(), "workflow file '/nonexistent/dir/wf.yaml' not found");
}

TEST(Loader, LoadsFileAndNamesItInErrors) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / absl::StrCat("runloom_workflow_test_", getpid());
  std::filesystem::create_directories(dir);
  const std::string good = (dir / "good.yaml").string();
  const std::string bad = (dir / "bad.yaml").string();
  std::ofstream(good) << "name: t\nsteps:\n  - {id: a, kind: noop}\n";
  std::ofstream(bad) << "name: t\nsteps:\n  - {id: a, kind: noop, needs: [zz]}\n";
  absl::StatusOr<Workflow> wf = LoadWorkflowFile(good);
  ASSERT_OK(wf);
  EXPECT_EQ(wf->source_path, good);
  absl::StatusOr<Workflow> err = LoadWorkflowFile(bad);
  EXPECT_THAT(err.status().message(), HasSubstr(bad + ":3: step 'a': needs 'zz'"));
  EXPECT_THAT(LoadWorkflowFile(dir.string()), StatusIs(absl::StatusCode::kInvalidArgument));
  std::filesystem::remove_all(dir);
}

TEST(Loader, InvalidYamlGivesPosition) {
  EXPECT_THAT(ErrorOf("name: t\nsteps: [1,\n  b: 2\n"),
              HasSubstr("wf.yaml:4:1: invalid YAML: end of sequence flow not found"));
}

TEST(Loader, EmptyOrNonMappingDocument) {
  EXPECT_THAT(ErrorOf(""), HasSubstr("wf.yaml: the workflow is empty"));
  EXPECT_THAT(ErrorOf("- a\n- b\n"), HasSubstr("wf.yaml:1: the top level must be a mapping"));
}

TEST(Loader, UnknownTopLevelKeyNamesLine) {
  EXPECT_THAT(ErrorOf("name: t\nversion: 2\nsteps:\n  - {id: a, kind: noop}\n"),
              HasSubstr("wf.yaml:2: unknown top-level key 'version'; the top level takes name"));
}

TEST(Loader, DuplicateKeyNamesLine) {
  EXPECT_THAT(ErrorOf(WithSteps("  - id: a\n    kind: noop\n    kind: exec\n")),
              HasSubstr("wf.yaml:5: duplicate key 'kind'"));
}

TEST(Validate, WorkflowNameRequiredAndChecked) {
  EXPECT_THAT(ErrorOf("steps:\n  - {id: a, kind: noop}\n"), HasSubstr("missing workflow name"));
  EXPECT_THAT(ErrorOf("name: Bad Name\nsteps:\n  - {id: a, kind: noop}\n"),
              HasSubstr("wf.yaml:1: bad workflow name 'Bad Name'"));
  EXPECT_THAT(ErrorOf("name: t\n"), HasSubstr("the workflow has no steps"));
}

TEST(Validate, StepIdSyntaxAndPresence) {
  EXPECT_THAT(ErrorOf(WithSteps("  - {id: a, kind: noop}\n  - {id: Bad-Id, kind: noop}\n")),
              HasSubstr("wf.yaml:4: step 'Bad-Id': bad step id 'Bad-Id'"));
  EXPECT_THAT(ErrorOf(WithSteps("  - {id: a, kind: noop}\n  - kind: noop\n")),
              HasSubstr("wf.yaml:4: a step has no id"));
}

TEST(Validate, DuplicateIdAcrossNestingNamesBothLines) {
  const std::string yaml = WithSteps(R"(  - id: a
    kind: noop
  - id: l
    kind: loop
    max_iterations: 2
    body:
      - id: a
        kind: noop
)");
  EXPECT_THAT(ErrorOf(yaml),
              HasSubstr("wf.yaml:9: step 'a': step id 'a' is already used at line 3"));
}

TEST(Validate, MissingKind) {
  EXPECT_THAT(ErrorOf(WithSteps("  - id: a\n")), HasSubstr("wf.yaml:3: step 'a': missing kind"));
}

TEST(Validate, NeedsUnknownAndNonSibling) {
  EXPECT_THAT(ErrorOf(WithSteps("  - {id: a, kind: noop}\n  - id: b\n    kind: noop\n"
                                "    needs: [a, nope]\n")),
              HasSubstr("wf.yaml:6: step 'b': needs 'nope', which does not exist"));
  const std::string yaml = WithSteps(R"(  - id: l
    kind: loop
    max_iterations: 1
    body:
      - {id: inner, kind: noop}
  - id: b
    kind: noop
    needs: [inner]
)");
  EXPECT_THAT(ErrorOf(yaml), HasSubstr("wf.yaml:10: step 'b': needs 'inner', which is not in the "
                                       "same step list"));
  EXPECT_THAT(ErrorOf(WithSteps("  - {id: a, kind: noop, needs: [a]}\n")),
              HasSubstr("cannot need itself"));
}

TEST(Validate, NeedsCycleIsReported) {
  const std::string yaml = WithSteps(R"(  - {id: a, kind: noop, needs: [c]}
  - {id: b, kind: noop, needs: [a]}
  - {id: c, kind: noop, needs: [b]}
)");
  EXPECT_THAT(ErrorOf(yaml),
              HasSubstr("wf.yaml:3: step 'a': needs form a cycle: a -> c -> b -> a"));
}

TEST(Validate, ImplicitEdgeCycleHintsAtNeedsEmpty) {
  // b has no needs:, so it waits for a; a needs b.
  std::string err =
      ErrorOf(WithSteps("  - {id: a, kind: noop, needs: [b]}\n  - {id: b, kind: noop}\n"));
  EXPECT_THAT(err, HasSubstr("a -> b -> a"));
  EXPECT_THAT(err, HasSubstr("needs: []"));
}

TEST(Loader, BadTriggerAndRetry) {
  EXPECT_THAT(ErrorOf(WithSteps("  - id: a\n    kind: noop\n    trigger: sometimes\n")),
              HasSubstr("wf.yaml:5: step 'a': trigger: unknown trigger rule 'sometimes'; use "
                        "all_success, all_done"));
  EXPECT_THAT(ErrorOf(WithSteps("  - id: a\n    kind: noop\n    retry:\n      max_attempts: 0\n")),
              HasSubstr("wf.yaml:6: step 'a': retry.max_attempts counts the first try"));
  EXPECT_THAT(ErrorOf(WithSteps("  - id: a\n    kind: noop\n    retry: {multiplier: 0.5}\n")),
              HasSubstr("wf.yaml:5: step 'a': retry.multiplier must be 1"));
  EXPECT_THAT(ErrorOf(WithSteps("  - id: a\n    kind: noop\n    retry: {on: [error, oops]}\n")),
              HasSubstr("unknown error class 'oops'; use error, timeout"));
  EXPECT_THAT(ErrorOf(WithSteps("  - id: a\n    kind: noop\n    retry: {tries: 3}\n")),
              HasSubstr("wf.yaml:5: step 'a': retry does not take 'tries'"));
  EXPECT_THAT(
      ErrorOf("name: t\ndefaults:\n  retry: {max_attempts: x}\nsteps:\n  - {id: a, kind: noop}\n"),
      HasSubstr("wf.yaml:3: defaults.retry.max_attempts must be a whole number"));
}

TEST(Loader, BadDurationsAndBooleans) {
  EXPECT_THAT(ErrorOf(WithSteps("  - id: a\n    kind: noop\n    timeout: ten\n")),
              HasSubstr("wf.yaml:5: step 'a': timeout: bad duration 'ten'"));
  EXPECT_THAT(ErrorOf(WithSteps("  - id: a\n    kind: noop\n    timeout: 0s\n")),
              HasSubstr("wf.yaml:5: step 'a': timeout must be positive"));
  EXPECT_THAT(ErrorOf(WithSteps("  - id: a\n    kind: noop\n    allow_failure: yes\n")),
              HasSubstr("wf.yaml:5: step 'a': allow_failure must be true or false"));
}

TEST(Loader, HugeIntegersDoNotWrap) {
  EXPECT_THAT(
      ErrorOf(WithSteps("  - id: l\n    kind: loop\n    max_iterations: 18446744073709551615\n"
                        "    body: [{id: x, kind: noop}]\n")),
      HasSubstr("wf.yaml:5: step 'l': max_iterations must be a whole number"));
}

TEST(Validate, LoopShape) {
  EXPECT_THAT(
      ErrorOf(WithSteps("  - id: l\n    kind: loop\n    body:\n      - {id: x, kind: noop}\n")),
      HasSubstr("wf.yaml:3: step 'l': a loop needs max_iterations"));
  EXPECT_THAT(
      ErrorOf(WithSteps("  - id: l\n    kind: loop\n    max_iterations: 2\n    body: []\n")),
      HasSubstr("wf.yaml:6: step 'l': a loop needs a non-empty body"));
  EXPECT_THAT(ErrorOf(WithSteps("  - id: l\n    kind: loop\n    max_iterations: 2\n    prompt: hi\n"
                                "    body: [{id: x, kind: noop}]\n")),
              HasSubstr("wf.yaml:6: step 'l': a loop step does not take 'prompt'"));
  EXPECT_THAT(
      ErrorOf(WithSteps("  - id: l\n    kind: loop\n    max_iterations: 2\n"
                        "    until: steps.nope.output.ok\n    body: [{id: x, kind: noop}]\n")),
      HasSubstr("wf.yaml:6: step 'l': until: 'steps.nope.output.ok' names step 'nope'"));
}

TEST(Validate, ParallelShape) {
  EXPECT_THAT(ErrorOf(WithSteps("  - id: p\n    kind: parallel\n")),
              HasSubstr("wf.yaml:3: step 'p': a parallel step needs branches"));
  const std::string dup = WithSteps(R"(  - id: p
    kind: parallel
    branches:
      - {name: x, steps: [{id: a, kind: noop}]}
      - {name: x, steps: [{id: b, kind: noop}]}
)");
  EXPECT_THAT(ErrorOf(dup), HasSubstr("wf.yaml:7: step 'p': branch name 'x' is used twice"));
  EXPECT_THAT(
      ErrorOf(WithSteps("  - id: p\n    kind: parallel\n    branches:\n      - {name: x}\n")),
      HasSubstr("wf.yaml:6: step 'p': branch 'x' has no steps"));
  EXPECT_THAT(ErrorOf(WithSteps("  - id: p\n    kind: parallel\n    max_iterations: 2\n")),
              HasSubstr("wf.yaml:5: step 'p': a parallel step does not take 'max_iterations'"));
  EXPECT_THAT(ErrorOf(WithSteps("  - id: p\n    kind: parallel\n    branches:\n"
                                "      - {name: x, steps: [{id: a, kind: noop}], extra: 1}\n")),
              HasSubstr("wf.yaml:6: a branch does not take 'extra'"));
}

TEST(Validate, InputSpecs) {
  const auto with_input = [](const std::string& spec) {
    return absl::StrCat("name: t\ninputs:\n  x: ", spec, "\nsteps:\n  - {id: a, kind: noop}\n");
  };
  EXPECT_THAT(
      ErrorOf(with_input("{type: text}")),
      HasSubstr("wf.yaml:3: input 'x' has unknown type 'text'; use one of string, integer"));
  EXPECT_THAT(ErrorOf(with_input("{type: integer, default: many}")),
              HasSubstr("wf.yaml:3: input 'x': default \"many\" is not a integer"));
  EXPECT_THAT(ErrorOf(with_input("{enum: [a, b], default: c}")),
              HasSubstr("default \"c\" is not in its enum"));
  EXPECT_THAT(ErrorOf(with_input("{type: integer, enum: [1, two]}")),
              HasSubstr("enum value \"two\" is not a integer"));
  EXPECT_THAT(ErrorOf(with_input("{secret: true, default: hunter2}")),
              HasSubstr("secret input 'x' has a default"));
  EXPECT_THAT(ErrorOf(with_input("{type: string, mandatory: true}")),
              HasSubstr("wf.yaml:3: input 'x' does not take 'mandatory'"));
  EXPECT_OK(Load(with_input("{type: number, default: 2}")));
}

TEST(Validate, TemplateRefToUnknownStepNamesItsLine) {
  const std::string yaml = WithSteps(R"(  - id: a
    kind: exec
    input:
      doc: fine
      text: "{{ steps.ghost.output.text }}"
)");
  EXPECT_THAT(ErrorOf(yaml), HasSubstr("wf.yaml:7: step 'a': input.text: 'steps.ghost.output.text' "
                                       "names step 'ghost', which does not exist"));
}

TEST(Validate, TemplateRefToUndeclaredInput) {
  const std::string yaml =
      "name: t\ninputs:\n  a: {}\nsteps:\n  - id: s\n    kind: exec\n"
      "    command: [echo, \"{{ inputs.b }}\"]\n";
  EXPECT_THAT(ErrorOf(yaml),
              HasSubstr("wf.yaml:7: step 's': command.1: 'inputs.b' names "
                        "undeclared input 'b'; declare it under inputs: (declared: a)"));
}

TEST(Validate, TemplateShapeErrors) {
  EXPECT_THAT(ErrorOf(WithSteps("  - {id: a, kind: exec, prompt: \"hi {{ inputs.x\"}\n")),
              HasSubstr("wf.yaml:3: step 'a': prompt: unclosed '{{'"));
  EXPECT_THAT(ErrorOf(WithSteps("  - {id: a, kind: exec, prompt: \"{{ steps.a.result }}\"}\n")),
              HasSubstr("bad reference 'steps.a.result': a step has output, status and error"));
  EXPECT_THAT(ErrorOf(WithSteps("  - {id: a, kind: exec, prompt: \"{{ env.HOME }}\"}\n")),
              HasSubstr("unknown root 'env'"));
}

TEST(Validate, LoopIterationOnlyInsideLoop) {
  EXPECT_THAT(ErrorOf(WithSteps("  - {id: a, kind: exec, prompt: \"{{ loop.iteration }}\"}\n")),
              HasSubstr("'loop.iteration' is only defined inside a loop body"));
  EXPECT_OK(
      Load(WithSteps("  - id: l\n    kind: loop\n    max_iterations: 2\n"
                     "    until: loop.iteration\n    body:\n"
                     "      - {id: a, kind: exec, prompt: \"{{ loop.iteration }}\"}\n")));
}

TEST(Validate, RunAndStatusRefsAreAccepted) {
  EXPECT_OK(Load(WithSteps(
      "  - {id: a, kind: noop}\n"
      "  - {id: b, kind: exec, input: {r: \"{{ run.id }}/{{ run.revision }}/{{ run.entry }}\","
      " f: \"{{ run.feedback.comment }}\", s: \"{{ steps.a.status }}\", e: \"{{ steps.a.error }}\","
      " x: \"{{ run.rerun_from }}\"}}\n")));
}

TEST(Loader, WhenConditionErrorsNameLine) {
  EXPECT_THAT(ErrorOf(WithSteps("  - id: a\n    kind: noop\n    when: inputs.x == pdf\n")),
              HasSubstr("wf.yaml:5: step 'a': when: condition 'inputs.x == pdf': 'pdf' is not a "
                        "JSON literal"));
  EXPECT_THAT(
      ErrorOf(WithSteps("  - id: a\n    kind: noop\n    when: steps.zz.status == \"ok\"\n")),
      HasSubstr("wf.yaml:5: step 'a': when: 'steps.zz.status' names step 'zz'"));
}

TEST(Validate, OutcomeWordOrTemplate) {
  EXPECT_OK(Load("name: t\noutcome: approved\nsteps:\n  - {id: a, kind: noop}\n"));
  EXPECT_THAT(ErrorOf("name: t\noutcome: done\nsteps:\n  - {id: a, kind: noop}\n"),
              HasSubstr("wf.yaml:2: outcome 'done' is not approved, completed"));
  EXPECT_THAT(
      ErrorOf("name: t\noutcome: \"{{ steps.b.output.x }}\"\nsteps:\n  - {id: a, kind: noop}\n"),
      HasSubstr("wf.yaml:2: outcome: 'steps.b.output.x' names step 'b'"));
}

TEST(Loader, ScalarTypingFollowsYaml12CoreSchema) {
  absl::StatusOr<Workflow> wf =
      Load(WithSteps("  - id: a\n    kind: exec\n    v: [yes, no, on, 0x1f, 0o17, -7, 1e3, .5, "
                     "1.2.3, '1', \"true\","
                     " Null, 18446744073709551615, .inf]\n"));
  ASSERT_OK(wf);
  const nlohmann::json expected = nlohmann::json::parse(
      R"(["yes","no","on",31,15,-7,1000.0,0.5,"1.2.3","1","true",null,18446744073709551615,".inf"])");
  EXPECT_EQ(wf->steps[0].config["v"], expected);
}

// `budget:` is read exactly from the scalar's text, in micro-units.
TEST(Loader, BudgetIsAnExactAmount) {
  absl::StatusOr<Workflow> wf = Load("name: t\nbudget: 2.50\nsteps:\n  - {id: a, kind: noop}\n");
  ASSERT_OK(wf);
  EXPECT_EQ(wf->budget_micros, 2'500'000);
  wf = Load("name: t\nbudget: 0.000003\nsteps:\n  - {id: a, kind: noop}\n");
  ASSERT_OK(wf);
  EXPECT_EQ(wf->budget_micros, 3);
  wf = Load("name: t\nsteps:\n  - {id: a, kind: noop}\n");
  ASSERT_OK(wf);
  EXPECT_FALSE(wf->budget_micros.has_value());
  for (const char* bad : {"-1", "1e3", "two", "0.0000001", "[1]", "1.", "9999999999999"}) {
    EXPECT_THAT(ErrorOf(absl::StrCat("name: t\nbudget: ", bad,
                                     "\nsteps:\n  - {id: a, kind: "
                                     "noop}\n")),
                HasSubstr("wf.yaml:2: budget must be an amount in price units"))
        << bad;
  }
  Workflow built = *Load("name: t\nsteps:\n  - {id: a, kind: noop}\n");
  built.source_path.clear();
  built.budget_micros = -1;
  EXPECT_THAT(ValidateWorkflow(built).message(), HasSubstr("budget must be 0 or more"));
}

// Issue 28: `max_attempts:` is the workflow's cap on the leases a run may
// take (stored on each run at admission); 1..100, 5 when absent.
TEST(Loader, MaxAttemptsIsAWholeNumberFromOneToAHundred) {
  absl::StatusOr<Workflow> wf = Load("name: t\nmax_attempts: 7\nsteps:\n  - {id: a, kind: noop}\n");
  ASSERT_OK(wf);
  EXPECT_EQ(wf->max_attempts, 7);
  EXPECT_EQ(CanonicalWorkflow(*wf)["max_attempts"], 7);
  EXPECT_EQ(Load(WithSteps("  - {id: a, kind: noop}\n"))->max_attempts, 5);
  for (const char* ok : {"1", "100"}) {
    EXPECT_OK(
        Load(absl::StrCat("name: t\nmax_attempts: ", ok, "\nsteps:\n  - {id: a, kind: noop}\n")))
        << ok;
  }
  for (const char* bad :
       {"0", "101", "\"x\"", "-3", "2.5", "[3]", "{n: 3}", "18446744073709551616"}) {
    EXPECT_THAT(ErrorOf(absl::StrCat("name: t\nmax_attempts: ", bad,
                                     "\nsteps:\n  - {id: a, kind: noop}\n")),
                HasSubstr("wf.yaml:2: max_attempts must be a whole number from 1 to 100"))
        << bad;
  }
  // A workflow built in C++ or read back from the catalog is checked too.
  nlohmann::json c = CanonicalWorkflow(*wf);
  c["max_attempts"] = 0;
  EXPECT_THAT(WorkflowFromCanonical(c).status().message(),
              HasSubstr("t: max_attempts is 0; it must be from 1 to 100"));
  Workflow built = *wf;
  built.source_path.clear();
  built.max_attempts = kMaxRunMaxAttempts + 1;
  EXPECT_THAT(ValidateWorkflow(built).message(), HasSubstr("t: max_attempts is 101"));
}

// Issue 23: `concurrency: {key, limit}` and `priority:`.
TEST(Loader, ConcurrencyAndPriority) {
  const std::string rest =
      "inputs:\n  tenant: {type: string}\n  pw: {type: string, secret: true}\n"
      "steps:\n  - {id: a, kind: noop}\n";
  absl::StatusOr<Workflow> wf = Load(
      "name: t\nconcurrency: {key: \"team-{{ inputs.tenant }}\", limit: 2}\npriority: 9\n" + rest);
  ASSERT_OK(wf);
  ASSERT_TRUE(wf->concurrency.has_value());
  EXPECT_EQ(wf->concurrency->key, "team-{{ inputs.tenant }}");
  EXPECT_EQ(wf->concurrency->limit, 2);
  EXPECT_EQ(wf->priority, 9);
  absl::StatusOr<Workflow> none = Load("name: t\n" + rest);
  ASSERT_OK(none);
  EXPECT_FALSE(none->concurrency.has_value());
  EXPECT_EQ(none->priority, 0);
  for (const char* bad : {"10", "-1", "\"high\"", "1.5"}) {
    EXPECT_THAT(ErrorOf(absl::StrCat("name: t\npriority: ", bad, "\n", rest)),
                HasSubstr("wf.yaml:2: priority must be a whole number from 0 to 9"))
        << bad;
  }
  for (const char* bad : {"0", "10001", "x"}) {
    EXPECT_THAT(ErrorOf(absl::StrCat("name: t\nconcurrency: {key: \"{{ inputs.tenant }}\", limit: ",
                                     bad, "}\n", rest)),
                HasSubstr("concurrency.limit must be a whole number from 1 to 10000"))
        << bad;
  }
  EXPECT_THAT(ErrorOf("name: t\nconcurrency: {limit: 2}\n" + rest),
              HasSubstr("wf.yaml:2: concurrency.key must be a template over the run's inputs"));
  EXPECT_THAT(ErrorOf("name: t\nconcurrency: 3\n" + rest),
              HasSubstr("wf.yaml:2: concurrency must be a mapping"));
  EXPECT_THAT(ErrorOf("name: t\nconcurrency: {key: k, limit: 1, burst: 2}\n" + rest),
              HasSubstr("burst"));
  // The key is rendered at admission: only declared, clear inputs.
  EXPECT_THAT(ErrorOf("name: t\nconcurrency: {key: \"{{ steps.a.output }}\", limit: 1}\n" + rest),
              HasSubstr("concurrency.key references 'steps.a.output'; it may reference only "
                        "declared inputs that are not secret"));
  EXPECT_THAT(ErrorOf("name: t\nconcurrency: {key: \"{{ inputs.nope }}\", limit: 1}\n" + rest),
              HasSubstr("concurrency.key references 'inputs.nope'"));
  EXPECT_THAT(ErrorOf("name: t\nconcurrency: {key: \"{{ inputs.pw }}\", limit: 1}\n" + rest),
              HasSubstr("concurrency.key references 'inputs.pw'"));
  // A workflow built in C++ is checked too.
  Workflow built = *wf;
  built.source_path.clear();
  built.priority = 12;
  EXPECT_THAT(ValidateWorkflow(built).message(), HasSubstr("priority is 12"));
  built.priority = 0;
  built.concurrency->limit = 0;
  EXPECT_THAT(ValidateWorkflow(built).message(), HasSubstr("concurrency.limit is 0"));
}

// `tenant:` names a declared, clear input of an id's type.
TEST(Loader, TenantNamesAnIdInput) {
  absl::StatusOr<Workflow> wf = Load(
      "name: t\ntenant: team\ninputs:\n  team: {type: string}\nsteps:\n  - {id: a, "
      "kind: noop}\n");
  ASSERT_OK(wf);
  EXPECT_EQ(wf->tenant_input, "team");
  EXPECT_THAT(ErrorOf("name: t\ntenant: team\nsteps:\n  - {id: a, kind: noop}\n"),
              HasSubstr("wf.yaml:2: tenant names 'team', which is not a declared input"));
  EXPECT_THAT(ErrorOf("name: t\ntenant: k\ninputs:\n  k: {type: string, secret: true}\n"
                      "steps:\n  - {id: a, kind: noop}\n"),
              HasSubstr("tenant names the secret input 'k'"));
  EXPECT_THAT(ErrorOf("name: t\ntenant: k\ninputs:\n  k: {type: object}\n"
                      "steps:\n  - {id: a, kind: noop}\n"),
              HasSubstr("tenant names 'k' of type object"));
}

TEST(Loader, ImplicitAndExplicitNeeds) {
  absl::StatusOr<Workflow> wf = Load(WithSteps(
      "  - {id: a, kind: noop}\n  - {id: b, kind: noop}\n  - {id: c, kind: noop, needs: []}\n"));
  ASSERT_OK(wf);
  EXPECT_FALSE(wf->steps[1].explicit_needs);
  EXPECT_TRUE(wf->steps[2].explicit_needs);
  EXPECT_TRUE(wf->steps[2].needs.empty());
  EXPECT_THAT(ErrorOf(WithSteps("  - {id: a, kind: noop, needs: a}\n")),
              HasSubstr("wf.yaml:3: step 'a': needs must be a list"));
}

TEST(Validate, CppBuiltWorkflowUsesNameAndStepId) {
  Workflow wf;
  wf.name = "built";
  StepDef a;
  a.id = "a";
  a.kind = "noop";
  a.needs = {"missing"};  // non-empty needs count as explicit even without explicit_needs
  wf.steps.push_back(a);
  absl::Status s = ValidateWorkflow(wf);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s.message(), HasSubstr("built: step 'a': needs 'missing', which does not exist"));

  wf.steps[0].needs.clear();
  EXPECT_OK(ValidateWorkflow(wf));
  StepDef nested;
  nested.id = "nested";
  nested.kind = "noop";
  wf.steps[0].body.push_back(nested);
  EXPECT_THAT(ValidateWorkflow(wf).message(), HasSubstr("set kind: loop or drop them"));
}

TEST(Validate, CppBuiltChecksRetryAndConditions) {
  Workflow wf;
  wf.name = "built";
  StepDef a;
  a.id = "a";
  a.kind = "noop";
  a.retry.max_attempts = 0;
  wf.steps.push_back(a);
  EXPECT_THAT(ValidateWorkflow(wf).message(),
              HasSubstr("built: step 'a': retry.max_attempts is 0"));
  wf.steps[0].retry = RetryPolicy{};
  wf.steps[0].retry.initial_delay = absl::Minutes(10);
  EXPECT_THAT(ValidateWorkflow(wf).message(), HasSubstr("max_delay is below"));
  wf.steps[0].retry = RetryPolicy{};
  wf.steps[0].when = Condition{"x", "inputs.nope", "", nullptr};
  EXPECT_THAT(ValidateWorkflow(wf).message(), HasSubstr("undeclared input 'nope'"));
  wf.steps[0].when.reset();
  wf.steps[0].timeout = absl::Microseconds(1500);
  EXPECT_THAT(ValidateWorkflow(wf).message(), HasSubstr("finer than a millisecond"));
}

TEST(Names, ToStringCoversEveryValue) {
  EXPECT_EQ(ToString(TriggerRule::kAllSuccess), "all_success");
  EXPECT_EQ(ToString(TriggerRule::kAllDone), "all_done");
  EXPECT_EQ(ToString(TriggerRule::kNoneFailedMinOneSuccess), "none_failed_min_one_success");
  EXPECT_EQ(ToString(TriggerRule::kOneSuccess), "one_success");
  EXPECT_EQ(ToString(ErrorClass::kError), "error");
  EXPECT_EQ(ToString(ErrorClass::kTimeout), "timeout");
  EXPECT_EQ(ToString(ErrorClass::kUnavailable), "unavailable");
  EXPECT_EQ(ToString(ErrorClass::kRateLimited), "rate_limited");
  EXPECT_EQ(ToString(ErrorClass::kInvalid), "invalid");
}

}  // namespace
}  // namespace runloom
