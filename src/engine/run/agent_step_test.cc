// The agent step (issue 24) on a real SQLite store with the fake provider's
// scripted turns: turns and tool calls recorded under the agent's path, the
// conversation rebuilt on a resume, hostile tool calls refused unrun,
// max_turns, approval tools, and what a workflow file may not write.
#include "runloom/clock.h"
#include "runloom/engine.h"

#include "engine/run/agent_step.h"
#include "testing/engine_test_util.h"
#include "testing/status_matchers.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <filesystem>
#include <fstream>
#include <string>

namespace runloom {
namespace {

using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;

// An agent whose fake model calls `search` twice in turn 1 (side by side),
// `note` in turn 2, then answers. Both tools are the counting kind.
constexpr char kTwoTurns[] = R"(
name: agent_basic
inputs:
  topic: {type: string, default: durable runs}
steps:
  - id: research
    kind: agent
    model: fake
    system: You are a careful researcher.
    prompt: "Research {{ inputs.topic }}"
    max_turns: 4
    fake:
      turns:
        - tool_calls:
            - {name: search, arguments: {query: leases}}
            - {name: search, arguments: {query: fencing}}
        - text: "writing it down"
          tool_calls:
            - {name: note, arguments: {text: "leases fence writers"}}
        - text: "Durable runs fence every write."
    tools:
      - name: search
        description: Search the notes for a query.
        parameters: {type: object, properties: {query: {type: string}}, required: [query]}
        step: {kind: count, echo: "{{ args.query }}"}
      - name: note
        description: Write a note down.
        parameters: {type: object, properties: {text: {type: string, maxLength: 200}}, required: [text]}
        step: {kind: count, echo: "{{ args }}"}
  - id: after
    kind: noop
    output: {answer: "{{ steps.research.output.text }}"}
)";

TEST(Agent, TurnsAndToolCallsAreRecordedUnderTheAgentsPath) {
  Harness h;
  RunRecord r = h.RunYaml(kTwoTurns);
  ASSERT_EQ(r.status, RunStatus::kCompleted) << r.error;
  auto s = h.Steps(r.id);
  ASSERT_TRUE(s.count("research/turn[1]"));
  ASSERT_TRUE(s.count("research/turn[1]/tool[search#0]"));
  ASSERT_TRUE(s.count("research/turn[1]/tool[search#1]"));
  ASSERT_TRUE(s.count("research/turn[2]/tool[note#0]"));
  ASSERT_TRUE(s.count("research/turn[3]"));
  EXPECT_FALSE(s.count("research/turn[4]"));
  EXPECT_EQ(s["research/turn[1]/tool[search#0]"].output["echo"], "leases");
  EXPECT_EQ(s["research/turn[1]/tool[search#1]"].output["echo"], "fencing");
  EXPECT_EQ(s["research/turn[2]/tool[note#0]"].output["echo"]["text"], "leases fence writers");
  EXPECT_EQ(s["research"].output["text"], "Durable runs fence every write.");
  EXPECT_EQ(s["research"].output["turns"], 3);
  EXPECT_EQ(s["research"].output["tool_calls"], 3);
  EXPECT_EQ(s["after"].output["answer"], "Durable runs fence every write.");
  EXPECT_EQ(h.kind->count.load(), 3);
  // Each turn is an llm call with its own llm.call event.
  int calls = 0;
  for (const Event& e : h.Events(r.id)) calls += e.type == "llm.call" ? 1 : 0;
  EXPECT_EQ(calls, 3);
}

TEST(Agent, ALaterTurnSeesTheConversationSoFar) {
  Harness h;
  RunRecord r = h.RunYaml(kTwoTurns);
  ASSERT_EQ(r.status, RunStatus::kCompleted) << r.error;
  auto s = h.Steps(r.id);
  // The fake provider counts the history into the prompt tokens: each turn
  // sends more than the one before.
  const int64_t t1 = s["research/turn[1]"].output["usage"]["prompt_tokens"].get<int64_t>();
  const int64_t t2 = s["research/turn[2]"].output["usage"]["prompt_tokens"].get<int64_t>();
  const int64_t t3 = s["research/turn[3]"].output["usage"]["prompt_tokens"].get<int64_t>();
  EXPECT_LT(t1, t2);
  EXPECT_LT(t2, t3);
}

// Hostile calls: each is recorded failed (class invalid), answered to the
// model as an error, and runs nothing.
TEST(Agent, HostileToolCallsAreRefusedAndRunNothing) {
  Harness h;
  const std::string huge(engine_internal::kMaxToolArgumentBytes + 10, 'a');
  std::string deep;
  for (int i = 0; i < 40; ++i) deep += "{\"a\":";
  deep += "1";
  for (int i = 0; i < 40; ++i) deep += "}";
  nlohmann::json turns = nlohmann::json::array();
  turns.push_back(
      {{"tool_calls",
        {{{"name", "run_cmd"}, {"arguments", {{"file", 42}}}},                      // wrong type
         {{"name", "run_cmd"}, {"arguments", nlohmann::json{{"file", huge}}.dump()}},  // huge
         {{"name", "run_cmd"}, {"arguments", deep}},                                // deep
         {{"name", "rm_rf"}, {"arguments", {{"file", "x"}}}},                       // unknown tool
         {{"name", "run_cmd"}, {"arguments", {{"file", "a; touch pwned"}}}},         // shell
         {{"name", "run_cmd"}, {"arguments", {{"file", "$(touch pwned)"}}}},        // shell
         {{"name", "run_cmd"}, {"arguments", {{"file", "--output=/etc/passwd"}}}},  // option
         {{"name", "run_cmd"}, {"arguments", "{not json"}}}}});
  turns.push_back({{"text", "I give up."}});
  const std::string dir = std::filesystem::path(TempDb()).parent_path().string();
  const std::string yaml = absl::StrCat(R"(
name: agent_hostile
steps:
  - id: agent
    kind: agent
    prompt: "Do it"
    fake: {turns: )",
                                        turns.dump(), R"(}
    tools:
      - name: run_cmd
        description: Lists a file.
        parameters: {type: object, properties: {file: {type: string}}, required: [file]}
        step: {kind: exec, command: [ls, "{{ args.file }}"], cwd: ")",
                                        dir, R"("}
)");
  RunRecord r = h.RunYaml(yaml);
  ASSERT_EQ(r.status, RunStatus::kCompleted) << r.error;
  auto s = h.Steps(r.id);
  EXPECT_EQ(s["agent"].output["text"], "I give up.");
  int refused = 0;
  for (const auto& [path, rec] : s) {
    if (path.find("/tool[") == std::string::npos) continue;
    EXPECT_EQ(rec.state, StepState::kFailed) << path;
    EXPECT_EQ(rec.error_class, ErrorClass::kInvalid) << path;
    EXPECT_THAT(rec.error, HasSubstr("refused, not run")) << path;
    ++refused;
  }
  EXPECT_EQ(refused, 8);
  EXPECT_THAT(s["agent/turn[1]/tool[rm_rf#3]"].error, HasSubstr("no tool named 'rm_rf'"));
  EXPECT_THAT(s["agent/turn[1]/tool[run_cmd#4]"].error, HasSubstr("shell metacharacters"));
  EXPECT_THAT(s["agent/turn[1]/tool[run_cmd#6]"].error, HasSubstr("start with '-'"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/pwned"));
  // Nothing started: no step.started for any tool path.
  for (const Event& e : h.Events(r.id)) {
    if (e.type != "step.started") continue;
    EXPECT_EQ(e.data.value("path", "").find("/tool["), std::string::npos) << e.data.dump();
  }
}

TEST(Agent, MaxTurnsEndsARunawayLoopWithTheReason) {
  Harness h;
  RunRecord r = h.RunYaml(R"(
name: agent_runaway
steps:
  - id: loop
    kind: agent
    prompt: "Never stop"
    max_turns: 2
    fake:
      turns:
        - tool_calls: [{name: ping, arguments: {}}]
        - tool_calls: [{name: ping, arguments: {}}]
        - tool_calls: [{name: ping, arguments: {}}]
    tools:
      - name: ping
        description: Pings.
        parameters: {type: object}
        step: {kind: count}
)");
  EXPECT_EQ(r.status, RunStatus::kFailed);
  auto s = h.Steps(r.id);
  EXPECT_EQ(s["loop"].state, StepState::kFailed);
  EXPECT_THAT(s["loop"].error, HasSubstr("max_turns (2) reached"));
  EXPECT_EQ(h.kind->count.load(), 2);
  EXPECT_FALSE(s.count("loop/turn[3]"));
}

TEST(Agent, AToolsErrorIsAnsweredToTheModelNotTheAgentsFailure) {
  Harness h;
  RunRecord r = h.RunYaml(R"(
name: agent_tool_error
steps:
  - id: agent
    kind: agent
    prompt: "Try"
    fake:
      turns:
        - tool_calls: [{name: broken, arguments: {}}]
        - text: "The tool failed; here is what I know."
    tools:
      - name: broken
        description: Always fails.
        parameters: {type: object}
        step: {kind: fail, message: "disk on fire"}
)");
  ASSERT_EQ(r.status, RunStatus::kCompleted) << r.error;
  auto s = h.Steps(r.id);
  EXPECT_EQ(s["agent/turn[1]/tool[broken#0]"].state, StepState::kFailed);
  EXPECT_EQ(s["agent"].output["text"], "The tool failed; here is what I know.");
}

TEST(Agent, AnApprovalToolParksTheRunAndTheAgentGoesOnAfterTheDecision) {
  Harness h;
  auto wf = LoadWorkflowYaml(R"(
name: agent_gate
steps:
  - id: fixer
    kind: agent
    prompt: "Fix the bug"
    fake:
      turns:
        - tool_calls: [{name: ask, arguments: {patch: "fix.diff"}}]
        - tool_calls: [{name: apply, arguments: {patch: "fix.diff"}}]
        - text: "applied"
    tools:
      - name: ask
        description: Ask a person to approve a patch.
        parameters: {type: object, properties: {patch: {type: string}}, required: [patch]}
        step: {kind: approval, proposal: {patch: "{{ args.patch }}"}}
      - name: apply
        description: Apply a patch.
        parameters: {type: object, properties: {patch: {type: string}}, required: [patch]}
        step: {kind: count, echo: "{{ args.patch }}"}
)",
                             "gate.yaml");
  ASSERT_OK(wf);
  auto started = h.engine->StartRun({.workflow = *wf});
  ASSERT_OK(started);
  auto paused = h.engine->ExecuteRun(started->run.id);
  ASSERT_OK(paused);
  ASSERT_EQ(paused->status, RunStatus::kPaused);
  auto gate = h.engine->GetPendingGate(started->run.id);
  ASSERT_OK(gate);
  ASSERT_TRUE(gate->has_value());
  EXPECT_EQ((*gate)->step_path, "fixer/turn[1]/tool[ask#0]");
  EXPECT_EQ(h.kind->count.load(), 0);
  DecisionRequest d;
  d.decision = Decision::kApprove;
  d.proposal_digest = (*gate)->proposal_digest;
  ASSERT_OK(h.engine->Decide(started->run.id, d, "ana"));
  auto done = h.engine->ExecuteRun(started->run.id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCompleted) << done->error;
  auto s = h.Steps(started->run.id);
  EXPECT_EQ(s["fixer"].output["text"], "applied");
  EXPECT_EQ(s["fixer/turn[1]/tool[ask#0]"].output["decision"], "approve");
  EXPECT_EQ(h.kind->count.load(), 1);
  // Turn 1 ran once: its record was reused after the decision.
  int turn1 = 0;
  for (const Event& e : h.Events(started->run.id)) {
    turn1 += e.type == "step.started" && e.data.value("path", "") == "fixer/turn[1]" ? 1 : 0;
  }
  EXPECT_EQ(turn1, 1);
}

// A `run` tool: the call starts a child run and parks the parent; the
// child's end wakes it, and the agent reads the child's outputs as the
// tool's result. The child is started once, under the call's path.
TEST(Agent, ARunToolStartsAChildRunAndTheAgentReadsItsOutputs) {
  SimulatedClock clock;
  Harness h({}, &clock);
  auto child_wf = LoadWorkflowYaml(R"(
name: lookup
inputs:
  q: {type: string}
steps:
  - id: answer
    kind: noop
    output: {found: "facts about {{ inputs.q }}"}
)",
                                   "lookup.yaml");
  ASSERT_OK(child_wf);
  ASSERT_OK(h.engine->RegisterWorkflow(*child_wf));
  auto wf = LoadWorkflowYaml(R"(
name: agent_child
steps:
  - id: agent
    kind: agent
    prompt: "Find out"
    fake:
      turns:
        - tool_calls: [{name: research, arguments: {q: leases}}]
        - text: "done"
    tools:
      - name: research
        description: Research a question in a child run.
        parameters: {type: object, properties: {q: {type: string}}, required: [q]}
        step: {kind: run, workflow: lookup, inputs: {q: "{{ args.q }}"}}
)",
                             "agent_child.yaml");
  ASSERT_OK(wf);
  auto started = h.engine->StartRun({.workflow = *wf});
  ASSERT_OK(started);
  const std::string id = started->run.id;
  auto parked = h.engine->ExecuteRun(id);
  ASSERT_OK(parked);
  ASSERT_EQ(parked->status, RunStatus::kWaiting);
  RunFilter f;
  f.parent_run_id = id;
  f.limit = 0;
  auto children = h.engine->store()->ListRuns(f);
  ASSERT_OK(children);
  ASSERT_EQ(children->size(), 1u);
  EXPECT_EQ((*children)[0].context["parent"]["step_path"], "agent/turn[1]/tool[research#0]");
  ASSERT_OK(h.engine->ExecuteRun((*children)[0].id));
  auto done = h.engine->ExecuteRun(id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCompleted) << done->error;
  auto s = h.Steps(id);
  EXPECT_EQ(s["agent/turn[1]/tool[research#0]"].output["outputs"]["answer"]["found"],
            "facts about leases");
  EXPECT_EQ(s["agent"].output["text"], "done");
  auto again = h.engine->store()->ListRuns(f);
  ASSERT_OK(again);
  EXPECT_EQ(again->size(), 1u);
}

TEST(Agent, TheFinalAnswerIsHeldToTheResponseSchema) {
  Harness h;
  RunRecord r = h.RunYaml(R"(
name: agent_schema
steps:
  - id: agent
    kind: agent
    prompt: "Decide"
    response_schema: {type: object, properties: {verdict: {enum: [yes, no]}}, required: [verdict]}
    fake:
      turns:
        - tool_calls: [{name: look, arguments: {}}]
        - text: '{"verdict": "yes"}'
    tools:
      - name: look
        description: Looks.
        parameters: {type: object}
        step: {kind: count}
)");
  ASSERT_EQ(r.status, RunStatus::kCompleted) << r.error;
  EXPECT_EQ(h.Steps(r.id)["agent"].output["json"]["verdict"], "yes");
}

TEST(Agent, AWorkflowFileCannotWriteAnAgentsInternalKeysOrBadTools) {
  Harness h;
  struct Case {
    std::string steps;  // the steps: list
    std::string says;   // in the refusal
  };
  const Case cases[] = {
      {"[{id: a, kind: llm, prompt: hi, agent_history: []}]", "agent_history"},
      {"[{id: a, kind: agent, prompt: hi, max_turns: 0, tools: []}]", "max_turns"},
      {"[{id: a, kind: agent, prompt: hi, tools: [{name: t, description: d, "
       "parameters: {type: array}, step: {kind: noop}}]}]",
       "type object"},
      {"[{id: a, kind: agent, prompt: hi, tools: [{name: t, description: d, "
       "parameters: {type: object}, step: {kind: exec, command: 'echo {{ args.x }}'}}]}]",
       "pass it as data"},
      {"[{id: a, kind: noop, output: {x: '{{ args.x }}'}}]", "only defined in the step"},
      {"[{id: a, kind: agent, prompt: hi, tools: [{name: t, description: d, "
       "parameters: {type: object}, step: {kind: loop, max_iterations: 1, "
       "body: [{id: x, kind: noop}]}}]}]",
       "cannot be kind loop"},
      {"[{id: a, kind: agent, prompt: hi, tools: [{name: t, description: '', "
       "parameters: {type: object}, step: {kind: noop}}]}]",
       "has no description"},
  };
  for (const Case& c : cases) {
    auto wf = LoadWorkflowYaml("name: bad\nsteps: " + c.steps + "\n", "bad.yaml");
    absl::Status s = wf.ok() ? h.engine->ValidateSteps(*wf) : wf.status();
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.says))) << c.steps;
  }
}

TEST(Agent, TheCanonicalFormKeepsTheTools) {
  auto wf = LoadWorkflowYaml(kTwoTurns, "agent.yaml");
  ASSERT_OK(wf);
  auto back = WorkflowFromCanonical(CanonicalWorkflow(*wf));
  ASSERT_OK(back);
  ASSERT_EQ(back->steps[0].tools.size(), 2u);
  EXPECT_EQ(back->steps[0].tools[1].name, "note");
  EXPECT_EQ(back->steps[0].tools[1].step.kind, "count");
  EXPECT_EQ(WorkflowDigest(*back), WorkflowDigest(*wf));
}

}  // namespace
}  // namespace runloom
