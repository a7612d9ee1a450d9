// The workflow side of stage events: the `stage_events:` block and `stage:`
// on steps, their checks, and their canonical form (absent = the digest a
// workflow had before stage events existed).
#include "runloom/workflow.h"

#include "testing/status_matchers.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <string>

namespace runloom {
namespace {

using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kPipeline[] = R"(name: ingest
inputs:
  doc_id: {type: string, required: true}
  tenant: {type: string}
  node: {type: integer}
stage_events: {document_id: doc_id, tenant_id: tenant, node_id: node}
steps:
  - {id: parse, kind: noop, stage: parsing}
  - id: fan
    kind: parallel
    branches:
      - steps: [{id: chunk, kind: noop, stage: chunking}]
  - {id: index, kind: noop, stage: indexing}
)";

TEST(StageEventsWorkflow, LoadsTheBlockAndStepStages) {
  auto wf = LoadWorkflowYaml(kPipeline, "ingest.yaml");
  ASSERT_OK(wf);
  ASSERT_TRUE(wf->stage_events.has_value());
  EXPECT_EQ(wf->stage_events->document_id, "doc_id");
  EXPECT_EQ(wf->stage_events->tenant_id, "tenant");
  EXPECT_EQ(wf->stage_events->node_id, "node");
  EXPECT_EQ(wf->steps[0].stage, "parsing");
  EXPECT_EQ(wf->steps[1].branches[0].steps[0].stage, "chunking");
  EXPECT_TRUE(wf->steps[0].config.empty());  // stage is not step config
}

// Reference 004's save_metadata reports `pending` when it starts and
// `processing` once its upsert is done.
TEST(StageEventsWorkflow, AStepMayReportASecondStageWhenItSucceeds) {
  auto wf = LoadWorkflowYaml(
      "name: w\ninputs:\n  d: {type: string}\nstage_events: {document_id: d, tenant_id: d, "
      "node_id: d}\nsteps:\n  - {id: save, kind: noop, stage: [pending, processing]}\n",
      "w.yaml");
  ASSERT_OK(wf);
  EXPECT_EQ(wf->steps[0].stage, "pending");
  EXPECT_EQ(wf->steps[0].success_stage, "processing");
  auto back = WorkflowFromCanonical(CanonicalWorkflow(*wf));
  ASSERT_OK(back);
  EXPECT_EQ(back->steps[0].success_stage, "processing");
  EXPECT_EQ(WorkflowDigest(*back), WorkflowDigest(*wf));
  Workflow other = *wf;
  other.steps[0].success_stage = "";
  EXPECT_NE(WorkflowDigest(other), WorkflowDigest(*wf));
  other.steps[0].stage = "";
  other.steps[0].success_stage = "processing";
  EXPECT_THAT(ValidateWorkflow(other), StatusIs(absl::StatusCode::kInvalidArgument,
                                                HasSubstr("a second stage needs a first")));
}

TEST(StageEventsWorkflow, CanonicalFormRoundTripsAndChangesTheDigest) {
  auto wf = LoadWorkflowYaml(kPipeline, "ingest.yaml");
  ASSERT_OK(wf);
  auto back = WorkflowFromCanonical(CanonicalWorkflow(*wf));
  ASSERT_OK(back);
  EXPECT_EQ(WorkflowDigest(*back), WorkflowDigest(*wf));
  ASSERT_TRUE(back->stage_events.has_value());
  EXPECT_EQ(back->stage_events->node_id, "node");
  EXPECT_EQ(back->steps[2].stage, "indexing");
  Workflow other = *wf;
  other.steps[2].stage = "chunking";
  EXPECT_NE(WorkflowDigest(other), WorkflowDigest(*wf));
  other = *wf;
  other.stage_events->document_id = "tenant";
  EXPECT_NE(WorkflowDigest(other), WorkflowDigest(*wf));
}

TEST(StageEventsWorkflow, AbsentKeysLeaveTheCanonicalFormAsBefore) {
  auto wf = LoadWorkflowYaml("name: plain\nsteps:\n  - {id: a, kind: noop}\n", "plain.yaml");
  ASSERT_OK(wf);
  const nlohmann::json c = CanonicalWorkflow(*wf);
  EXPECT_FALSE(c.contains("stage_events"));
  EXPECT_FALSE(c["steps"][0].contains("stage"));
  // The canonical form of version 1, unchanged: the digest of this workflow
  // as the catalog stored it before stage events existed.
  EXPECT_EQ(c.dump(),
            R"({"canonical_version":1,"description":"","inputs":{},"name":"plain","outcome":"",)"
            R"("steps":[{"allow_failure":false,"config":{},"explicit_needs":false,"id":"a",)"
            R"("kind":"noop","needs":[],"phase":"","retry":{"initial_delay_ms":1000,)"
            R"("max_attempts":1,"max_delay_ms":300000,"multiplier":2.0,"on":["error",)"
            R"("timeout","unavailable","rate_limited"]},"timeout_ms":null,)"
            R"("trigger":"all_success","when":null}]})");
}

struct BadCase {
  std::string yaml;
  std::string message;
};

TEST(StageEventsWorkflow, RefusesWhatCannotBeRoutedOrIsOutsideTheVocabulary) {
  const std::string inputs =
      "name: w\ninputs:\n  d: {type: string}\n  t: {type: string}\n  n: {type: string}\n"
      "  s: {type: string, secret: true}\n  o: {type: object}\n";
  const std::string block = "stage_events: {document_id: d, tenant_id: t, node_id: n}\n";
  const BadCase cases[] = {
      {inputs + block + "steps:\n  - {id: a, kind: noop, stage: completed}\n",
       "unknown stage 'completed'"},
      {inputs + block + "steps:\n  - {id: a, kind: noop, stage: Parsing}\n", "unknown stage"},
      {inputs + block + "steps:\n  - {id: a, kind: noop, stage: [pending, failed]}\n",
       "unknown stage 'failed'"},
      {inputs + block + "steps:\n  - {id: a, kind: noop, stage: [pending, processing, parsing]}\n",
       "lists 3 stages; give one"},
      {inputs + block + "steps:\n  - {id: a, kind: noop, stage: []}\n", "lists 0 stages"},
      {inputs + "steps:\n  - {id: a, kind: noop, stage: parsing}\n",
       "stage: needs a top-level stage_events: block"},
      {inputs + "stage_events: {document_id: d, tenant_id: nope, node_id: n}\n" +
           "steps:\n  - {id: a, kind: noop}\n",
       "stage_events.tenant_id names 'nope', which is not a declared input"},
      {inputs + "stage_events: {document_id: d, tenant_id: t, node_id: s}\n" +
           "steps:\n  - {id: a, kind: noop}\n",
       "names the secret input 's'"},
      {inputs + "stage_events: {document_id: o, tenant_id: t, node_id: n}\n" +
           "steps:\n  - {id: a, kind: noop}\n",
       "must be a string or an integer"},
      {inputs + "stage_events: {document_id: d, tenant_id: t}\nsteps:\n  - {id: a, kind: noop}\n",
       "stage_events.node_id is missing"},
      {inputs + "stage_events: {document_id: d, tenant_id: t, node_id: n, extra: x}\n" +
           "steps:\n  - {id: a, kind: noop}\n",
       "stage_events does not take 'extra'"},
      {inputs + "stage_events: [d, t, n]\nsteps:\n  - {id: a, kind: noop}\n",
       "stage_events must be a mapping"},
      {inputs + block + "steps:\n  - id: l\n    kind: loop\n    max_iterations: 2\n" +
           "    stage: parsing\n    body: [{id: b, kind: noop}]\n",
       "a loop step does not report a stage"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.yaml);
    EXPECT_THAT(LoadWorkflowYaml(c.yaml, "w.yaml"),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)));
  }
}

TEST(StageEventsWorkflow, CxxBuiltWorkflowsAreCheckedToo) {
  Workflow wf;
  wf.name = "built";
  wf.steps.push_back(StepDef{.id = "a", .kind = "noop", .stage = "indexing"});
  EXPECT_THAT(ValidateWorkflow(wf), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("needs a top-level stage_events")));
  wf.inputs.push_back(InputDef{.name = "t"});
  wf.stage_events = StageEventsDef{.document_id = "t", .tenant_id = "t", .node_id = "t"};
  EXPECT_OK(ValidateWorkflow(wf));
  wf.steps[0].kind = "parallel";
  wf.steps[0].branches.push_back(
      Branch{.name = "b", .steps = {StepDef{.id = "x", .kind = "noop"}}});
  EXPECT_THAT(ValidateWorkflow(wf),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("does not report a stage")));
}

}  // namespace
}  // namespace runloom
