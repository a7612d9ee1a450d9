// The llm step under its provider's concurrency cap in a running engine
// (SQLite): parallel model calls never exceed the cap the fake provider
// enforces, and the cap shows up as a metric once the controller ticks.
#include "engine/service/llm_caps.h"

#include "runloom/engine.h"
#include "runloom/sqlite.h"

#include "llm/fake_provider.h"
#include "llm/llm_concurrency.h"
#include "steps/builtin_steps.h"
#include "testing/engine_test_util.h"
#include "testing/status_matchers.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

#include <memory>
#include <string>

namespace runloom {
namespace {

struct CappedEngine {
  std::shared_ptr<FakeLlmProvider> fake;
  std::unique_ptr<Engine> engine;
};

// An engine whose llm step calls a fake provider that answers 429 above 2
// calls in flight, with a static cap of 2.
CappedEngine Open(EngineOptions opts, ConcurrencyOptions cap) {
  CappedEngine out;
  out.fake = NewFakeLlmProvider({.latency = absl::Milliseconds(100), .hidden_limit = 2});
  auto providers = std::make_shared<LlmProviderRegistry>();
  providers->Register("fake", out.fake);
  auto caps = std::make_shared<LlmConcurrency>();
  caps->Add("fake", out.fake.get(), cap);
  std::shared_ptr<StepRegistry> registry = StepRegistry::WithBuiltins();
  registry->Register("llm", NewLlmStep(providers, caps));
  opts.registry = registry;
  opts.idle_poll = absl::Milliseconds(5);
  opts.enable_sweeper = false;
  out.engine = OpenTestEngine(std::move(opts));
  return out;
}

std::string ParallelCalls(int n) {
  std::string yaml = "name: capped\nsteps:\n  - id: fan\n    kind: parallel\n    branches:\n";
  for (int i = 0; i < n; ++i) {
    absl::StrAppend(&yaml, "      - steps: [{id: c", i, ", kind: llm, prompt: \"call ", i,
                    "\", retry: {max_attempts: 1}}]\n");
  }
  return yaml;
}

TEST(EngineLlmCaps, ParallelCallsWaitForASlotInsteadOfDrawing429s) {
  // A long tick: the cap stays at its static value for this test.
  CappedEngine e = Open({}, {.static_cap = 2, .tick = absl::Minutes(10)});
  auto wf = LoadWorkflowYaml(ParallelCalls(6), "capped.yaml");
  ASSERT_OK(wf);
  auto started = e.engine->StartRun({.workflow = *wf});
  ASSERT_OK(started);
  e.engine->Start();
  auto done = e.engine->AwaitRun(started->run.id, RealClock()->Now() + absl::Seconds(30));
  ASSERT_OK(done);
  // Without the cap, 4 of the 6 calls would be answered 429 and, with one
  // attempt each, fail the run.
  EXPECT_EQ(done->status, RunStatus::kCompleted) << done->error;
  EXPECT_EQ(SucceededLlmSteps(e.engine->store(), started->run.id), 6);
  e.engine->Stop();
  EXPECT_EQ(e.fake->in_flight(), 0);
}

double Gauge(prometheus::Registry& registry, const std::string& name, const std::string& provider) {
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    if (f.name != name) continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      for (const prometheus::ClientMetric::Label& l : m.label) {
        if (l.name == "provider" && l.value == provider) return m.gauge.value;
      }
    }
  }
  return -1;
}

TEST(EngineLlmCaps, TheCapIsAMetricWhileTheEngineRuns) {
  prometheus::Registry registry;
  EngineOptions opts;
  opts.env.metrics = &registry;
  // cpu_high above 1: a busy test machine (CI runs this under TSan beside
  // other tests) must not lower the cap this test reads; the CPU signal has
  // its own tests in concurrency_controller_test.cc.
  CappedEngine e =
      Open(opts, {.static_cap = 2, .tick = absl::Milliseconds(20), .cpu_high = 2.0});
  EXPECT_EQ(Gauge(registry, "runloom_llm_concurrency_cap", "fake"), -1);
  e.engine->Start();
  const absl::Time deadline = RealClock()->Now() + absl::Seconds(10);
  while (Gauge(registry, "runloom_llm_concurrency_cap", "fake") < 0 &&
         RealClock()->Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(Gauge(registry, "runloom_llm_concurrency_cap", "fake"), 2);
  EXPECT_EQ(Gauge(registry, "runloom_llm_calls_in_flight", "fake"), 0);
  e.engine->Stop();
}

// Issue 25: GET /api/v1/llm/caps's history. A change of the cap is kept
// (not a repeat), with the limiters as the controller logs them, and only
// the newest kMaxLlmCapHistory per cap.
TEST(EngineLlmCaps, HistoryKeepsTheNewestChangesOfEachCapWithTheirLimiters) {
  std::shared_ptr<FakeLlmProvider> fake = NewFakeLlmProvider(FakeProviderOptions{});
  LlmConcurrency caps;
  caps.Add("fake", fake.get(), {.static_cap = 4});
  SimulatedClock clock;
  absl::StatusOr<std::unique_ptr<engine_internal::LlmCaps>> made =
      engine_internal::LlmCaps::Create(&caps, nullptr, nullptr, Env{.clock = &clock});
  ASSERT_OK(made);
  engine_internal::LlmCaps& board = **made;
  board.Record("fake", CapLimits{.aimd = 2, .cpu = 1, .cap = 1}, clock.Now());
  board.Record("fake", CapLimits{.aimd = 2, .cpu = 1, .cap = 1}, clock.Now());  // no change
  std::vector<LlmCapInfo> seen = board.Snapshot();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].provider, "fake");
  EXPECT_EQ(seen[0].cap, 4);  // the static cap: no controller runs
  ASSERT_EQ(seen[0].history.size(), 1u);
  EXPECT_EQ(seen[0].history[0].reason, "aimd 2, telemetry -, pool -, cpu 1");
  EXPECT_EQ(seen[0].history[0].at, clock.Now());

  for (int i = 0; i < 3 * kMaxLlmCapHistory; ++i) {
    clock.Advance(absl::Seconds(1));
    board.Record("fake", CapLimits{.aimd = 2 + i % 2, .pool = 7, .cap = 2 + i % 2}, clock.Now());
  }
  seen = board.Snapshot();
  ASSERT_EQ(seen[0].history.size(), static_cast<size_t>(kMaxLlmCapHistory));
  EXPECT_EQ(seen[0].history.back().at, clock.Now());  // newest last
  EXPECT_EQ(seen[0].history.back().reason, "aimd 3, telemetry -, pool 7, cpu -");
}

}  // namespace
}  // namespace runloom
