// Budgets in a running engine (SQLite): every priced model call reserves
// its worst case first; the call that cannot reserve is not sent and the
// run ends budget_stopped, with the figures in its run.finished event.
#include "runloom/engine.h"
#include "runloom/sqlite.h"

#include "llm/fake_provider.h"
#include "llm/provider.h"
#include "steps/builtin_steps.h"
#include "steps/http_exchange.h"
#include "testing/engine_test_util.h"
#include "testing/status_matchers.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace runloom {
namespace {

// Counts the calls that reach the provider (i.e. were sent).
class CountingProvider final : public LlmProvider {
 public:
  explicit CountingProvider(std::shared_ptr<LlmProvider> inner) : inner_(std::move(inner)) {}
  absl::Status ValidateOptions(const nlohmann::json& options) const override {
    return inner_->ValidateOptions(options);
  }
  absl::StatusOr<LlmResponse> Complete(StepContext& ctx, const LlmRequest& request) override {
    ++calls;
    return inner_->Complete(ctx, request);
  }
  std::atomic<int> calls{0};

 private:
  std::shared_ptr<LlmProvider> inner_;
};

struct BudgetEngine {
  std::shared_ptr<CountingProvider> provider;
  std::unique_ptr<Engine> engine;
};

// An engine whose model "priced" costs 1,000 micro-units per 1,000 prompt
// tokens (completions are free): a call of a 40-byte prompt has a worst case
// of 40 micro-units (a token per byte) and costs 27 (the fake provider
// counts the prompt's 20 words as 27 tokens).
// `more` (may be empty) registers further step kinds.
BudgetEngine Open(const std::function<void(StepRegistry&)>& more = nullptr) {
  BudgetEngine out;
  out.provider = std::make_shared<CountingProvider>(NewFakeLlmProvider());
  auto providers = std::make_shared<LlmProviderRegistry>();
  providers->RegisterModel("priced", ModelRoute{.provider = out.provider,
                                                .provider_name = "fake",
                                                .model = "priced",
                                                .input_micros_per_1k = 1000,
                                                .output_micros_per_1k = 0,
                                                .max_tokens = 100});
  std::shared_ptr<StepRegistry> registry = StepRegistry::WithBuiltins();
  registry->Register("llm", NewLlmStep(providers, nullptr));
  if (more) more(*registry);
  EngineOptions opts;
  opts.registry = registry;
  opts.enable_sweeper = false;
  out.engine = OpenTestEngine(std::move(opts));
  return out;
}

// Eight calls in a row, each a 40-byte prompt of 20 words.
constexpr char kPrompt[] = "a a a a a a a a a a a a a a a a a a a a ";
constexpr int64_t kWorst = 40;
constexpr int64_t kCost = 27;

std::string EightCalls() {
  std::string yaml =
      "name: spender\ninputs:\n  tenant: {type: string}\n  doc: {type: string, default: d}\n"
      "  node: {type: string, default: n}\n"
      "stage_events: {document_id: doc, tenant_id: tenant, node_id: node}\nsteps:\n";
  for (int i = 0; i < 8; ++i) {
    absl::StrAppend(&yaml, "  - {id: ask", i, ", kind: llm, model: priced, prompt: \"",
                    std::string(kPrompt), "\"}\n");
  }
  return yaml;
}

TEST(EngineBudgets, ARunStopsAtItsBudgetAndSendsNothingPastIt) {
  BudgetEngine b = Open();
  Store* store = b.engine->store();
  auto wf = LoadWorkflowYaml(EightCalls(), "spender.yaml");
  ASSERT_OK(wf);
  StartRunRequest req;
  req.workflow = *wf;
  req.inputs = {{"tenant", "acme"}};
  req.budget_micros = 100;  // 3 calls: 40 reserved of 100, 73, 46 left; then 19 < 40
  auto started = b.engine->StartRun(req);
  ASSERT_OK(started);
  auto done = b.engine->ExecuteRun(started->run.id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kBudgetStopped) << done->error;
  EXPECT_NE(done->error.find("budget exhausted: the run budget"), std::string::npos) << done->error;

  // Every call sent was reserved and settled; none was sent unreserved.
  auto reservations = store->ListReservations(done->id);
  ASSERT_OK(reservations);
  ASSERT_EQ(reservations->size(), 3u);
  for (const Reservation& r : *reservations) {
    EXPECT_EQ(r.state, ReservationState::kSettled);
    EXPECT_EQ(r.amount_micros, kWorst);
    EXPECT_EQ(r.cost_micros, kCost);
  }
  EXPECT_EQ(b.provider->calls.load(), 3);
  auto run = store->GetRunBudget(done->id);
  ASSERT_OK(run);
  EXPECT_EQ(run->figures.limit_micros, 100);
  EXPECT_EQ(run->figures.reserved_micros, 0);
  EXPECT_EQ(run->figures.spent_micros, 3 * kCost);

  // run.finished carries the figures; the refused attempt left no step record.
  std::optional<Event> finished;
  int llm_calls = 0;
  auto events = store->ListEvents(done->id, 0, 1000);
  ASSERT_OK(events);
  for (const Event& e : *events) {
    if (e.type == "run.finished") finished = e;
    if (e.type == "llm.call") ++llm_calls;
  }
  ASSERT_TRUE(finished.has_value());
  EXPECT_EQ(finished->data["status"], "budget_stopped");
  EXPECT_EQ(finished->data["budget_refused_by"], "run");
  EXPECT_EQ(finished->data["budget_amount_micros"], kWorst);
  EXPECT_EQ(finished->data["budget_limit_micros"], 100);
  EXPECT_EQ(finished->data["budget_spent_micros"], 3 * kCost);
  EXPECT_EQ(finished->data["budget_reserved_micros"], 0);
  EXPECT_EQ(llm_calls, b.provider->calls.load());
  // The tenant (no configured limit) was charged the same.
  auto tenants = store->ListTenantBudgets();
  ASSERT_OK(tenants);
  ASSERT_EQ(tenants->size(), 1u);
  EXPECT_EQ((*tenants)[0].tenant, "acme");
  EXPECT_EQ((*tenants)[0].figures.spent_micros, run->figures.spent_micros);
}

// The tenant's limit stops a run that has no budget of its own.
TEST(EngineBudgets, TheTenantsLimitStopsARun) {
  BudgetEngine b = Open();
  Store* store = b.engine->store();
  ASSERT_OK(store->SetTenantBudget("acme", 100));
  auto wf = LoadWorkflowYaml(EightCalls(), "spender.yaml");
  ASSERT_OK(wf);
  StartRunRequest req;
  req.workflow = *wf;
  req.inputs = {{"tenant", "acme"}};
  auto started = b.engine->StartRun(req);
  ASSERT_OK(started);
  auto done = b.engine->ExecuteRun(started->run.id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kBudgetStopped) << done->error;
  auto tenants = store->ListTenantBudgets();
  ASSERT_OK(tenants);
  ASSERT_EQ(tenants->size(), 1u);
  const BudgetFigures& t = (*tenants)[0].figures;
  EXPECT_EQ(t.reserved_micros, 0);
  EXPECT_EQ(t.spent_micros, 3 * kCost);
  EXPECT_EQ(b.provider->calls.load(), 3);
  auto events = store->ListEvents(done->id, 0, 1000);
  ASSERT_OK(events);
  EXPECT_EQ(events->back().type, "run.finished");
  EXPECT_EQ(events->back().data["budget_refused_by"], "tenant");
}

// Reference 003: a budget stop after an approved gate and an applied
// external write. The write's ledger row stays as it was (done, its answer
// recorded), it is sent once, and no step after the refused call starts.
TEST(EngineBudgets, AStopAfterAnApprovedGateAndAnAppliedWriteKeepsTheWrite) {
  std::atomic<int> sends{0};
  BudgetEngine b = Open([&sends](StepRegistry& registry) {
    registry.Register(
        "http",
        steps_internal::NewHttpStepWith(
            [&sends](const steps_internal::Exchange& e) -> absl::StatusOr<steps_internal::Reply> {
              if (e.method != "POST") return steps_internal::Reply{404, "{}"};
              ++sends;
              return steps_internal::Reply{201, R"({"applied":true})"};
            }));
  });
  Engine* engine = b.engine.get();
  ASSERT_NE(engine, nullptr);
  const std::string yaml = absl::StrCat(R"(
name: gated_spender
tenant: tenant
inputs:
  tenant: {type: string}
steps:
  - id: review
    kind: approval
    proposal: {action: restart}
  - id: apply
    kind: http
    method: POST
    url: http://actions.invalid/actions
    write: true
    action: remediate
    body: {action: restart}
    expect: [201]
  - {id: ask1, kind: llm, model: priced, prompt: ")",
                                        kPrompt, R"("}
  - {id: ask2, kind: llm, model: priced, prompt: ")",
                                        kPrompt, R"("}
  - {id: after, kind: noop}
)");
  auto wf = LoadWorkflowYaml(yaml, "gated_spender.yaml");
  ASSERT_OK(wf);
  StartRunRequest req;
  req.workflow = *wf;
  req.inputs = {{"tenant", "acme"}};
  req.budget_micros = 50;  // ask1 reserves 40 and costs 27: 23 left < 40 for ask2
  auto started = engine->StartRun(req);
  ASSERT_OK(started);
  const std::string id = started->run.id;
  auto paused = engine->ExecuteRun(id);
  ASSERT_OK(paused);
  ASSERT_EQ(paused->status, RunStatus::kPaused);
  auto gate = engine->GetPendingGate(id);
  ASSERT_OK(gate);
  ASSERT_TRUE(gate->has_value());
  ASSERT_OK(engine->Decide(
      id, {.proposal_digest = (*gate)->proposal_digest, .decision = Decision::kApprove}, "alice"));
  auto done = engine->ExecuteRun(id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kBudgetStopped) << done->error;

  EXPECT_EQ(sends.load(), 1);
  EXPECT_EQ(b.provider->calls.load(), 1);
  auto writes = engine->store()->ListWrites(id);
  ASSERT_OK(writes);
  ASSERT_EQ(writes->size(), 1u);
  EXPECT_EQ((*writes)[0].state, WriteState::kDone);
  ASSERT_TRUE((*writes)[0].result.has_value());
  EXPECT_EQ((*writes)[0].result->http_status, 201);
  EXPECT_EQ((*writes)[0].result->source, "sent");
  auto steps = engine->store()->ListSteps(id, std::nullopt);
  ASSERT_OK(steps);
  std::map<std::string, StepRecord> by_path;
  for (const StepRecord& r : *steps) by_path[r.path] = r;
  EXPECT_EQ(by_path["review"].output["decision"], "approve");
  EXPECT_EQ(by_path["apply"].state, StepState::kSucceeded);
  EXPECT_EQ(by_path["ask1"].state, StepState::kSucceeded);
  EXPECT_EQ(by_path.count("ask2"), 0u);  // the refused attempt leaves no record
  EXPECT_EQ(by_path.count("after"), 0u);
  auto events = engine->store()->ListEvents(id, 0, 1000);
  ASSERT_OK(events);
  for (const Event& e : *events) {
    if (e.type == "step.started") {
      EXPECT_NE(e.data.value("path", ""), "after");
    }
  }
  auto budget = engine->store()->GetRunBudget(id);
  ASSERT_OK(budget);
  EXPECT_EQ(budget->figures.reserved_micros, 0);
  EXPECT_EQ(budget->figures.spent_micros, kCost);
}

}  // namespace
}  // namespace runloom
