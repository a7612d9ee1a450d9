// EngineOptions::env on a real SQLite store: a dropped transport error gets
// a log line, log lines carry their run, step, attempt and worker, the metrics registry counts runs
// and step durations, no registry is fine, and a seeded generator makes run ids repeatable.
#include "runloom/env.h"

#include "runloom/engine.h"

#include "testing/capturing_logger.h"
#include "testing/engine_test_util.h"
#include "testing/status_matchers.h"
#include "testing/transport_wrapper.h"

#include "absl/random/random.h"
#include "gtest/gtest.h"
#include "prometheus/gauge.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

#include <atomic>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

namespace runloom {
namespace {

using ::runloom::testing::CapturingLogger;
using ::runloom::testing::StatusIs;

constexpr char kTwoSteps[] =
    "name: env\nsteps:\n  - {id: a, kind: count}\n  - {id: b, kind: noop}\n";

// Forwards everything to the wrapped transport, except that Ack fails.
class FailingAckTransport final : public ::runloom::testing::TransportWrapper {
 public:
  using TransportWrapper::TransportWrapper;
  absl::Status Ack(const QueueMessage&) override {
    ++acks;
    return absl::UnavailableError("injected: ack refused");
  }
  std::atomic<int> acks{0};
};

TEST(EngineEnv, FailedAckIsLoggedWithTheRunAndTheRunStillFinishes) {
  CapturingLogger log;
  EngineOptions opts;
  opts.env.logger = &log;
  opts.idle_poll = absl::Milliseconds(5);
  opts.enable_sweeper = false;
  FailingAckTransport* failing = nullptr;
  Harness h(opts, nullptr, nullptr, [&](std::unique_ptr<Transport> t) {
    auto wrapped = std::make_unique<FailingAckTransport>(std::move(t));
    failing = wrapped.get();
    return wrapped;
  });
  auto wf = LoadWorkflowYaml(kTwoSteps, "env.yaml");
  ASSERT_OK(wf);
  auto started = h.engine->StartRun({.workflow = *wf});
  ASSERT_OK(started);
  const std::string id = started->run.id;
  h.engine->Start();
  auto done = h.engine->AwaitRun(id, RealClock()->Now() + absl::Seconds(30));
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCompleted);
  h.engine->Stop();
  ASSERT_NE(failing, nullptr);
  EXPECT_GE(failing->acks.load(), 1);
  EXPECT_GE(log.Count(LogLevel::kWarning, "run " + id + ": acking its queue message failed"), 1);
  EXPECT_GE(log.Count(LogLevel::kWarning, "injected: ack refused"), 1);
}

// A step kind that logs the `key` it was given, through its context's logger.
class LoggingKind final : public StepKind {
 public:
  absl::Status Validate(const StepDef&) const override { return absl::OkStatus(); }
  absl::StatusOr<StepOutput> Execute(StepContext& ctx, const nlohmann::json& config) override {
    ctx.logger()->Log(LogLevel::kWarning, "calling with key " + config.value("key", ""));
    return StepOutput{};
  }
};

// Issue 25 (logs): an execution's lines carry its run id, lease attempt and
// worker; a step kind's lines carry its step and attempt too, with the run's
// secrets scrubbed.
TEST(EngineEnv, LogLinesCarryTheRunStepAttemptAndWorkerAndNoSecret) {
  const std::string secret = "log-secret-" + std::to_string(getpid());
  setenv("RUNLOOM_SECRET_LOG_KEY", secret.c_str(), 1);
  CapturingLogger log;
  EngineOptions opts;
  opts.env.logger = &log;
  opts.registry = StepRegistry::WithBuiltins();
  opts.registry->Register("logs", std::make_shared<LoggingKind>());
  Harness h(opts);
  const RunRecord run = h.RunYaml(
      "name: logs\ninputs:\n  key: {type: string, secret: true}\nsteps:\n"
      "  - {id: use, kind: logs, key: '{{ inputs.key }}'}\n",
      {{"key", "secret://LOG_KEY"}});
  unsetenv("RUNLOOM_SECRET_LOG_KEY");
  EXPECT_EQ(run.status, RunStatus::kCompleted) << run.error;
  bool step_line = false;
  bool run_line = false;
  for (const CapturingLogger::Line& line : log.lines()) {
    EXPECT_EQ(line.message.find(secret), std::string::npos) << line.message;
    if (line.message == "calling with key [secret]") {
      step_line = true;
      EXPECT_EQ(line.run_id, run.id);
      EXPECT_EQ(line.step, "use");
      EXPECT_EQ(line.attempt, 1);
      EXPECT_FALSE(line.worker.empty());
    }
    if (line.message == "run " + run.id + ": finished completed") {
      run_line = true;
      EXPECT_EQ(line.run_id, run.id);
      EXPECT_EQ(line.step, "");
      EXPECT_EQ(line.attempt, 1);
      EXPECT_FALSE(line.worker.empty());
    }
  }
  EXPECT_TRUE(step_line);
  EXPECT_TRUE(run_line);
}

// The value of `name`'s series whose label `key` is `value` (counter), or -1.
double CounterValue(prometheus::Registry& registry, const std::string& name, const std::string& key,
                    const std::string& value) {
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    if (f.name != name) continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      for (const prometheus::ClientMetric::Label& l : m.label) {
        if (l.name == key && l.value == value) return m.counter.value;
      }
      if (key.empty() && m.label.empty()) return m.counter.value;
    }
  }
  return -1;
}

// Samples in `name`'s histogram series whose `kind` label is `kind`.
uint64_t HistogramCount(prometheus::Registry& registry, const std::string& name,
                        const std::string& kind) {
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    if (f.name != name) continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      for (const prometheus::ClientMetric::Label& l : m.label) {
        if (l.name == "kind" && l.value == kind) return m.histogram.sample_count;
      }
    }
  }
  return 0;
}

TEST(EngineEnv, MetricsCountFinishedRunsAndStepDurations) {
  auto registry = std::make_shared<prometheus::Registry>();
  EngineOptions opts;
  opts.env.metrics = registry.get();
  opts.env.logger = NullLogger();
  Harness h(opts);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(h.RunYaml(kTwoSteps).status, RunStatus::kCompleted);
  }
  EXPECT_EQ(CounterValue(*registry, "runloom_runs_finished_total", "status", "completed"), 2);
  EXPECT_EQ(CounterValue(*registry, "runloom_runs_finished_total", "status", "failed"), 0);
  EXPECT_EQ(CounterValue(*registry, "runloom_runs_started_total", "", ""), 2);
  EXPECT_EQ(CounterValue(*registry, "runloom_leases_lost_total", "", ""), 0);
  // "count" was registered before Open, so its series exists from the start.
  EXPECT_EQ(HistogramCount(*registry, "runloom_step_duration_seconds", "count"), 2u);
  EXPECT_EQ(HistogramCount(*registry, "runloom_step_duration_seconds", "noop"), 2u);
}

TEST(EngineEnv, MetricsCountSweeperRecoveries) {
  auto registry = std::make_shared<prometheus::Registry>();
  SimulatedClock clock;
  EngineOptions opts;
  opts.env.metrics = registry.get();
  opts.lease_ttl = absl::Seconds(10);
  opts.enable_sweeper = false;
  Harness h(opts, &clock);
  auto wf = LoadWorkflowYaml(kTwoSteps, "env.yaml");
  ASSERT_OK(wf);
  auto started = h.engine->StartRun({.workflow = *wf});
  ASSERT_OK(started);
  ASSERT_OK(h.engine->store()->AcquireLease(started->run.id, "dead", absl::Seconds(10), {}));
  clock.Advance(absl::Seconds(11));
  EXPECT_EQ(*h.engine->SweepOnce(), 1);
  EXPECT_EQ(CounterValue(*registry, "runloom_lease_expiries_total", "", ""), 1);
  EXPECT_EQ(CounterValue(*registry, "runloom_sweeper_actions_total", "action", "requeued"), 1);
  EXPECT_EQ(CounterValue(*registry, "runloom_sweeper_actions_total", "action", "failed"), 0);
}

TEST(EngineEnv, NoMetricsRegistryRunsFine) {
  EngineOptions opts;  // env.metrics == nullptr
  opts.env.logger = NullLogger();
  Harness h(opts);
  EXPECT_EQ(h.RunYaml(kTwoSteps).status, RunStatus::kCompleted);
  EXPECT_EQ(h.RunYaml("name: bad\nsteps:\n  - {id: f, kind: fail}\n").status, RunStatus::kFailed);
  EXPECT_EQ(*h.engine->SweepOnce(), 0);
}

// prometheus-cpp throws when a name is taken by another metric type; Open
// returns that as a status instead.
TEST(EngineEnv, MetricsNameClashIsAnOpenError) {
  prometheus::Registry registry;
  prometheus::BuildGauge().Name("runloom_leases_lost_total").Register(registry);
  EngineOptions opts;
  opts.env.metrics = &registry;
  auto backend = OpenSqlite(TempDb(), {});
  ASSERT_OK(backend);
  EXPECT_THAT(Engine::Open(std::move(opts), *std::move(backend)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// The run ids' random part comes from env.random: two engines on the same
// simulated time with generators seeded alike name their runs alike.
TEST(EngineEnv, SeededRandomGivesRepeatableRunIds) {
  const uint32_t seed = 20261130;
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::vector<std::string> ids[2];
  for (auto& out : ids) {
    SimulatedClock clock;
    absl::BitGen gen(std::seed_seq{seed});
    EngineOptions opts;
    opts.env.random = gen;
    opts.enable_sweeper = false;
    Harness h(opts, &clock);
    auto wf = LoadWorkflowYaml(kTwoSteps, "env.yaml");
    ASSERT_OK(wf);
    for (int i = 0; i < 3; ++i) {
      auto started = h.engine->StartRun({.workflow = *wf});
      ASSERT_OK(started);
      out.push_back(started->run.id);
    }
  }
  EXPECT_EQ(ids[0], ids[1]);
  EXPECT_NE(ids[0][0], ids[0][1]);
}

}  // namespace
}  // namespace runloom
