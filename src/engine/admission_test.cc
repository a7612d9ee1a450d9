// Admission on a real SQLite store: idempotency keys, input checks before
// any write, unknown step kinds at load.
#include "runloom/engine.h"

#include "engine/run/run_execution.h"
#include "testing/engine_test_util.h"
#include "testing/status_matchers.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include <atomic>
#include <filesystem>
#include <thread>

namespace runloom {
namespace {

using ::runloom::testing::StatusIs;

TEST(Engine, IdempotencyKeyReturnsSameRun) {
  Harness h;
  auto wf = LoadWorkflowYaml("name: idem\nsteps:\n  - {id: a, kind: noop}\n", "idem.yaml");
  ASSERT_OK(wf);
  StartRunRequest req;
  req.workflow = *wf;
  req.idempotency_key = "k1";
  auto a = h.engine->StartRun(req);
  auto b = h.engine->StartRun(req);
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_TRUE(a->created);
  EXPECT_FALSE(b->created);
  EXPECT_EQ(a->run.id, b->run.id);
}

TEST(Engine, BadInputsAreRefusedBeforeAnyWrite) {
  Harness h;
  auto wf = LoadWorkflowYaml(
      "name: typed\ninputs:\n  n: {type: integer, required: true}\nsteps:\n  - {id: a, kind: "
      "noop}\n",
      "typed.yaml");
  ASSERT_OK(wf);
  StartRunRequest req;
  req.workflow = *wf;
  req.inputs = {{"n", "not a number"}};
  EXPECT_THAT(h.engine->StartRun(req), StatusIs(absl::StatusCode::kInvalidArgument));
  req.inputs = {{"unknown", 1}, {"n", 1}};
  EXPECT_THAT(h.engine->StartRun(req), StatusIs(absl::StatusCode::kInvalidArgument));
  auto runs = h.engine->store()->ListRuns({});
  ASSERT_OK(runs);
  EXPECT_TRUE(runs->empty());
}

// Issue 23: admission renders the concurrency key over the frozen inputs
// (bounded, never empty) and stores key, limit and priority on the run.
TEST(Engine, AdmissionRendersTheConcurrencyKeyAndPriority) {
  Harness h;
  auto wf = LoadWorkflowYaml(
      "name: keyed\nconcurrency: {key: \"t-{{ inputs.tenant }}\", limit: 2}\npriority: 3\n"
      "inputs:\n  tenant: {type: string}\n  n: {type: integer, default: 4}\n"
      "steps:\n  - {id: a, kind: noop}\n",
      "keyed.yaml");
  ASSERT_OK(wf);
  StartRunRequest req;
  req.workflow = *wf;
  req.inputs = {{"tenant", "acme"}};
  auto a = h.engine->StartRun(req);
  ASSERT_OK(a);
  EXPECT_EQ(a->run.concurrency_key, "t-acme");
  EXPECT_EQ(a->run.concurrency_limit, 2);
  EXPECT_EQ(a->run.priority, 3);
  auto stored = h.engine->store()->GetRun(a->run.id);
  ASSERT_OK(stored);
  EXPECT_EQ(stored->concurrency_key, "t-acme");
  EXPECT_EQ(stored->concurrency_limit, 2);
  EXPECT_EQ(stored->priority, 3);
  // The request's priority wins over the workflow's; outside 0-9 is refused.
  req.priority = 8;
  auto b = h.engine->StartRun(req);
  ASSERT_OK(b);
  EXPECT_EQ(b->run.priority, 8);
  req.priority = 10;
  EXPECT_THAT(h.engine->StartRun(req), StatusIs(absl::StatusCode::kInvalidArgument));
  req.priority.reset();
  // The rendered key is the client's text: bounded, and never empty.
  req.inputs = {{"tenant", std::string(kMaxConcurrencyKeyBytes, 'x')}};
  absl::Status long_key = h.engine->StartRun(req).status();
  EXPECT_THAT(long_key, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(long_key.message()), ::testing::HasSubstr("at most 256"));
  auto bare = LoadWorkflowYaml(
      "name: bare\nconcurrency: {key: \"{{ inputs.tenant }}\", limit: 1}\n"
      "inputs:\n  tenant: {type: string, default: \"\"}\nsteps:\n  - {id: a, kind: noop}\n",
      "bare.yaml");
  ASSERT_OK(bare);
  StartRunRequest empty;
  empty.workflow = *bare;
  absl::Status refused = h.engine->StartRun(empty).status();
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(refused.message()), ::testing::HasSubstr("renders empty"));
  auto runs = h.engine->store()->ListRuns({});
  ASSERT_OK(runs);
  EXPECT_EQ(runs->size(), 2u);  // a and b only
}

TEST(Engine, UnknownStepKindIsALoadError) {
  auto wf = LoadWorkflowYaml("name: k\nsteps:\n  - {id: a, kind: teleport}\n", "k.yaml");
  ASSERT_OK(wf);
  auto registry = StepRegistry::WithBuiltins();
  absl::Status s = ValidateStepKinds(*wf, *registry);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(s.message().find("k.yaml:3"), std::string::npos) << s;
  EXPECT_NE(s.message().find("teleport"), std::string::npos) << s;
  // Issue 8, finding 9: the list names every kind a workflow may use.
  EXPECT_NE(
      s.message().find("use one of agent, approval, exec, fail, http, llm, loop, noop, parallel, run, sleep"),
      std::string::npos)
      << s;
}

// Budget preflight: a run whose budget is more than its tenant has left is
// refused before anything is written; the tenant is the workflow's
// stage_events tenant input, and the accepted run keeps its budget.
TEST(Engine, PreflightRefusesARunItsTenantCannotPayFor) {
  Harness h;
  auto wf = LoadWorkflowYaml(
      "name: billed\ninputs:\n  tenant: {type: string}\n  doc: {type: string}\n"
      "  node: {type: string}\n"
      "stage_events: {document_id: doc, tenant_id: tenant, node_id: node}\n"
      "steps:\n  - {id: a, kind: noop}\n",
      "billed.yaml");
  ASSERT_OK(wf);
  Store* store = h.engine->store();
  ASSERT_OK(store->SetTenantBudget("acme", 1'500'000));
  StartRunRequest req;
  req.workflow = *wf;
  req.inputs = {{"tenant", "acme"}, {"doc", "d"}, {"node", "n"}};
  req.budget_micros = 2'000'000;
  absl::Status refused = h.engine->StartRun(req).status();
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_NE(refused.message().find("tenant 'acme' has 1.5 left of 1.5"), std::string::npos)
      << refused;
  auto runs = store->ListRuns({});
  ASSERT_OK(runs);
  EXPECT_TRUE(runs->empty());
  // Within what is left: created, with tenant and budget in its context.
  req.budget_micros = 1'500'000;
  auto created = h.engine->StartRun(req);
  ASSERT_OK(created);
  EXPECT_EQ(created->run.context["budget"],
            (nlohmann::json{{"tenant", "acme"}, {"limit_micros", 1'500'000}}));
  // Another tenant, with no configured limit, is not refused.
  req.inputs["tenant"] = "other";
  req.budget_micros = 900'000'000;
  EXPECT_OK(h.engine->StartRun(req));
  req.budget_micros = -1;
  EXPECT_THAT(h.engine->StartRun(req), StatusIs(absl::StatusCode::kInvalidArgument));
}

// A start repeated under its idempotency key returns the run the key names
// even when the tenant could no longer pay for a new one: it spends nothing.
// A new key is still refused.
TEST(Engine, ARepeatedStartUnderItsKeyIsTheSameRunWhateverTheBudgetLeft) {
  Harness h;
  auto wf = LoadWorkflowYaml(
      "name: billed\ninputs:\n  tenant: {type: string}\ntenant: tenant\n"
      "steps:\n  - {id: a, kind: noop}\n",
      "billed.yaml");
  ASSERT_OK(wf);
  Store* store = h.engine->store();
  ASSERT_OK(store->SetTenantBudget("acme", 1'000'000));
  StartRunRequest req;
  req.workflow = *wf;
  req.inputs = {{"tenant", "acme"}};
  req.budget_micros = 1'000'000;
  req.idempotency_key = "order-7";
  absl::StatusOr<CreateRunResult> first = h.engine->StartRun(req);
  ASSERT_OK(first);
  ASSERT_TRUE(first->created);
  // The tenant's budget is lowered below what the run asked for.
  ASSERT_OK(store->SetTenantBudget("acme", 10));
  absl::StatusOr<CreateRunResult> again = h.engine->StartRun(req);
  ASSERT_OK(again);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->run.id, first->run.id);
  req.idempotency_key = "order-8";
  EXPECT_THAT(h.engine->StartRun(req).status(), StatusIs(absl::StatusCode::kResourceExhausted));
  auto runs = store->ListRuns({});
  ASSERT_OK(runs);
  EXPECT_EQ(runs->size(), 1u);
}

// Without a budget in the start request a run takes the workflow's
// `budget:`; a run with no budget at all that calls a model is refused when
// its tenant has nothing left, and one that calls no model is not.
// `tenant:` names the tenant input of a workflow without stage events.
TEST(Engine, PreflightUsesTheWorkflowsBudgetAndRefusesAModelCallerOfAnEmptyTenant) {
  Harness h;
  const std::string head =
      "inputs:\n  tenant: {type: string}\n  doc: {type: string}\n  node: {type: string}\n"
      "stage_events: {document_id: doc, tenant_id: tenant, node_id: node}\n";
  auto budgeted = LoadWorkflowYaml(
      absl::StrCat("name: budgeted\nbudget: 2\n", head, "steps:\n  - {id: a, kind: noop}\n"),
      "budgeted.yaml");
  auto caller = LoadWorkflowYaml(
      absl::StrCat("name: caller\n", head,
                   "steps:\n  - id: p\n    kind: parallel\n    branches:\n"
                   "      - steps:\n          - {id: ask, kind: llm, prompt: hi}\n"),
      "caller.yaml");
  auto plain = LoadWorkflowYaml(
      absl::StrCat("name: plain\n", head, "steps:\n  - {id: a, kind: noop}\n"), "plain.yaml");
  // `tenant:` names the tenant input without stage events.
  auto team = LoadWorkflowYaml(
      "name: team\ntenant: team\ninputs:\n  team: {type: string}\n"
      "steps:\n  - {id: a, kind: noop}\n  - {id: ask, kind: llm, prompt: hi}\n",
      "team.yaml");
  ASSERT_OK(team);
  ASSERT_OK(budgeted);
  ASSERT_OK(caller);
  ASSERT_OK(plain);
  Store* store = h.engine->store();
  ASSERT_OK(store->SetTenantBudget("acme", 1'000'000));
  StartRunRequest req;
  req.inputs = {{"tenant", "acme"}, {"doc", "d"}, {"node", "n"}};
  req.workflow = *budgeted;
  absl::Status refused = h.engine->StartRun(req).status();
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_NE(refused.message().find("but this run's budget is 2;"), std::string::npos) << refused;
  req.budget_micros = 500'000;  // the request's budget wins over the workflow's
  auto created = h.engine->StartRun(req);
  ASSERT_OK(created);
  EXPECT_EQ(created->run.context["budget"]["limit_micros"], 500'000);

  ASSERT_OK(store->SetTenantBudget("acme", 0));
  req.budget_micros.reset();
  req.workflow = *caller;
  refused = h.engine->StartRun(req).status();
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_NE(refused.message().find("has 0 left of 0 (spent 0, reserved 0) and this workflow "
                                   "calls a model"),
            std::string::npos)
      << refused;
  req.workflow = *plain;
  EXPECT_OK(h.engine->StartRun(req));
  req.inputs = {{"team", "acme"}};
  req.workflow = *team;
  EXPECT_THAT(h.engine->StartRun(req), StatusIs(absl::StatusCode::kResourceExhausted));
  req.inputs = {{"team", "beta"}};  // no limit configured
  auto beta = h.engine->StartRun(req);
  ASSERT_OK(beta);
  EXPECT_EQ(beta->run.context["budget"]["tenant"], "beta");
  auto runs = store->ListRuns({});
  ASSERT_OK(runs);
  EXPECT_EQ(runs->size(), 3u);
}

}  // namespace
}  // namespace runloom
