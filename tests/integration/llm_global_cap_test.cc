// Issue 11, "Adaptive concurrency": the cap on a provider's calls in flight
// is global. Two workers (two engines, each with its own backend, i.e. its
// own connections, and its own llm step and caps) on one PostgreSQL database
// with the Redis queue call one provider that answers 429 to a call arriving
// while 2 are in flight. Each worker's static cap is 2 and each runs a run of
// 4 parallel calls at the same time: counted per worker, up to 4 calls would
// be in flight and some answered 429 (one attempt each: the runs would
// fail); counted on Redis, never more than 2 are.
#include "runloom/backend.h"
#include "runloom/engine.h"
#include "runloom/workflow.h"

#include "llm/fake_provider.h"
#include "llm/llm_concurrency.h"
#include "steps/builtin_steps.h"
#include "testing/engine_test_util.h"
#include "testing/status_matchers.h"
#include "testing/test_servers.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace runloom {
namespace {

constexpr int kCap = 2;
constexpr int kCallsPerRun = 4;

std::string ParallelCalls() {
  std::string yaml = "name: global-cap\nsteps:\n  - id: fan\n    kind: parallel\n    branches:\n";
  for (int i = 0; i < kCallsPerRun; ++i) {
    absl::StrAppend(&yaml, "      - steps: [{id: c", i, ", kind: llm, prompt: \"call ", i,
                    "\", retry: {max_attempts: 1}}]\n");
  }
  return yaml;
}

// One worker: its backend and an llm step with caps of its own, calling the
// shared provider.
std::unique_ptr<Engine> OpenWorker(const std::string& db_url, const std::string& redis_url,
                                   std::shared_ptr<FakeLlmProvider> provider) {
  BackendOptions bo;
  bo.queue_url = redis_url;
  absl::StatusOr<Backend> backend = OpenBackend(db_url, bo);
  EXPECT_OK(backend);
  if (!backend.ok()) return nullptr;
  auto providers = std::make_shared<LlmProviderRegistry>();
  providers->Register("fake", provider);
  auto caps = std::make_shared<LlmConcurrency>();
  // A long tick: the cap stays at its static value.
  caps->Add("fake", provider.get(), {.static_cap = kCap, .tick = absl::Minutes(10)});
  std::shared_ptr<StepRegistry> registry = StepRegistry::WithBuiltins();
  registry->Register("llm", NewLlmStep(providers, caps));
  EngineOptions eo;
  eo.registry = registry;
  eo.enable_sweeper = false;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Open(eo, *std::move(backend));
  EXPECT_OK(engine);
  return engine.ok() ? *std::move(engine) : nullptr;
}

TEST(LlmGlobalCap, TwoWorkersOnOneRedisStayUnderTheCapTogether) {
  absl::StatusOr<testing::TestServers> servers = testing::GetTestServers();
  ASSERT_OK(servers);
  absl::StatusOr<std::string> db = testing::CreateTestPostgresDatabase("llm_global_cap");
  ASSERT_OK(db);
  std::shared_ptr<FakeLlmProvider> provider =
      NewFakeLlmProvider({.latency = absl::Milliseconds(150), .hidden_limit = kCap});
  std::vector<std::unique_ptr<Engine>> workers;
  for (int i = 0; i < 2; ++i) {
    workers.push_back(OpenWorker(*db, servers->redis_url, provider));
    ASSERT_NE(workers.back(), nullptr);
  }
  absl::StatusOr<Workflow> wf = LoadWorkflowYaml(ParallelCalls(), "global-cap.yaml");
  ASSERT_OK(wf);
  std::vector<std::string> runs;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<CreateRunResult> started = workers[0]->StartRun({.workflow = *wf});
    ASSERT_OK(started);
    runs.push_back(started->run.id);
  }

  // Each worker executes one run, both at once.
  std::vector<absl::StatusOr<RunRecord>> done(2, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] { done[i] = workers[i]->ExecuteRun(runs[i]); });
  }
  for (std::thread& t : threads) t.join();

  for (int i = 0; i < 2; ++i) {
    ASSERT_OK(done[i]);
    EXPECT_EQ(done[i]->status, RunStatus::kCompleted) << "worker " << i << ": " << done[i]->error;
    EXPECT_EQ(SucceededLlmSteps(workers[0]->store(), runs[i]), kCallsPerRun) << "worker " << i;
  }
  for (auto& w : workers) w->Stop();
  EXPECT_EQ(provider->in_flight(), 0);
}

}  // namespace
}  // namespace runloom
