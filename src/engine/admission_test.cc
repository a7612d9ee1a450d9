// Admission on a real SQLite store: idempotency keys, input checks before
// any write, unknown step kinds at load.
#include "runloom/engine.h"

#include "engine/engine_test_util.h"
#include "engine/run_execution.h"
#include "testing/status_matchers.h"

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
      s.message().find("use one of approval, exec, fail, http, llm, loop, noop, parallel, sleep"),
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

}  // namespace
}  // namespace runloom
