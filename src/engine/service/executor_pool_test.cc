// The executor pool on a real SQLite store: many runs exactly once each,
// batch scheduling, Stop() releasing held runs.
#include "runloom/engine.h"

#include "engine/run/run_execution.h"
#include "testing/engine_test_util.h"
#include "testing/status_matchers.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>

namespace runloom {
namespace {

using ::runloom::testing::StatusIs;

TEST(Engine, PoolExecutesManyRunsExactlyOnceEach) {
  EngineOptions opts;
  opts.executors = 4;
  opts.idle_poll = absl::Milliseconds(5);
  Harness h(opts);
  auto wf = LoadWorkflowYaml(
      "name: many\nsteps:\n  - {id: a, kind: count}\n  - {id: b, kind: noop}\n", "many.yaml");
  ASSERT_OK(wf);
  std::vector<std::string> ids;
  for (int i = 0; i < 50; ++i) {
    auto r = h.engine->StartRun({.workflow = *wf});
    ASSERT_OK(r);
    ids.push_back(r->run.id);
  }
  h.engine->Start();
  for (const std::string& id : ids) {
    auto done = h.engine->AwaitRun(id, RealClock()->Now() + absl::Seconds(30));
    ASSERT_OK(done);
    EXPECT_EQ(done->status, RunStatus::kCompleted);
  }
  h.engine->Stop();
  EXPECT_EQ(h.kind->count.load(), 50);
}

TEST(Engine, ExecutorThreadsRunUnderBatchSchedulingUnlessTurnedOff) {
  for (bool batch : {true, false}) {
    EngineOptions opts;
    opts.executors = 1;
    opts.idle_poll = absl::Milliseconds(5);
    opts.batch_scheduling = batch;
    Harness h(opts);
    auto wf = LoadWorkflowYaml("name: policy\nsteps:\n  - {id: a, kind: count}\n", "p.yaml");
    ASSERT_OK(wf);
    auto r = h.engine->StartRun({.workflow = *wf});
    ASSERT_OK(r);
    h.engine->Start();
    auto done = h.engine->AwaitRun(r->run.id, RealClock()->Now() + absl::Seconds(30));
    h.engine->Stop();
    ASSERT_OK(done);
    EXPECT_EQ(h.Steps(r->run.id)["a"].output["sched_policy"], batch ? SCHED_BATCH : SCHED_OTHER)
        << "batch_scheduling=" << batch;
  }
}

TEST(Engine, StopReleasesHeldRunsToTheQueue) {
  EngineOptions opts;
  opts.executors = 1;
  opts.drain_timeout = absl::Milliseconds(100);
  opts.idle_poll = absl::Milliseconds(5);
  Harness h(opts);
  auto wf = LoadWorkflowYaml(R"(
name: drain
steps:
  - {id: nap, kind: sleep, duration: 60s}
)",
                             "drain.yaml");
  ASSERT_OK(wf);
  auto started = h.engine->StartRun({.workflow = *wf});
  ASSERT_OK(started);
  h.engine->Start();
  for (int i = 0; i < 500 && h.engine->ActiveRuns() == 0; ++i) {
    RealClock()->SleepFor(absl::Milliseconds(5));
  }
  h.engine->Stop();
  auto run = h.engine->store()->GetRun(started->run.id);
  ASSERT_OK(run);
  EXPECT_EQ(run->status, RunStatus::kQueued);
  EXPECT_TRUE(run->lease_token.empty());
  EXPECT_EQ(h.engine->stats().runs_released, 1);
}

// EngineOptions::runs_in_flight (core/fiber.h): a run that sleeps gives its
// executor back, so one executor holds ten sleeping runs at once; a run
// that blocks its executor (an exec step) keeps the dispatcher from
// claiming more, whatever runs_in_flight allows.
TEST(Engine, OneExecutorHoldsManyWaitingRunsButNoMoreBlockingOnes) {
  EngineOptions opts;
  opts.executors = 1;
  opts.runs_in_flight = 10;
  opts.idle_poll = absl::Milliseconds(5);
  Harness h(opts);
  auto sleepy = LoadWorkflowYaml(R"(
name: sleepy
steps:
  - {id: nap, kind: sleep, duration: 2s}
  - {id: b, kind: noop}
)",
                                 "sleepy.yaml");
  auto blocking = LoadWorkflowYaml(R"(
name: blocking
steps:
  - {id: work, kind: exec, command: [sleep, "0.2"]}
)",
                                   "blocking.yaml");
  ASSERT_OK(sleepy);
  ASSERT_OK(blocking);
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) {
    auto r = h.engine->StartRun({.workflow = *sleepy});
    ASSERT_OK(r);
    ids.push_back(r->run.id);
  }
  h.engine->Start();
  int peak = 0;
  for (int i = 0; i < 1000 && peak < 10; ++i) {
    peak = std::max(peak, h.engine->ActiveRuns());
    RealClock()->SleepFor(absl::Milliseconds(2));
  }
  EXPECT_EQ(peak, 10);
  for (const std::string& id : ids) {
    auto done = h.engine->AwaitRun(id, RealClock()->Now() + absl::Seconds(30));
    ASSERT_OK(done);
    EXPECT_EQ(done->status, RunStatus::kCompleted);
  }
  ids.clear();
  for (int i = 0; i < 5; ++i) {
    auto r = h.engine->StartRun({.workflow = *blocking});
    ASSERT_OK(r);
    ids.push_back(r->run.id);
  }
  peak = 0;
  for (int i = 0; i < 15000 && h.engine->stats().runs_finished < 15; ++i) {
    peak = std::max(peak, h.engine->ActiveRuns());
    RealClock()->SleepFor(absl::Milliseconds(2));
  }
  EXPECT_EQ(peak, 1);
  for (const std::string& id : ids) {
    EXPECT_EQ(h.engine->store()->GetRun(id)->status, RunStatus::kCompleted);
  }
  h.engine->Stop();
}

// Stop() drains the runs held on suspended fibers: each wakes from its
// sleep, releases its run to the queue, and the executors end.
TEST(Engine, StopReleasesRunsWaitingOnFibers) {
  EngineOptions opts;
  opts.executors = 1;
  opts.runs_in_flight = 5;
  opts.drain_timeout = absl::Milliseconds(100);
  opts.idle_poll = absl::Milliseconds(5);
  Harness h(opts);
  auto wf = LoadWorkflowYaml("name: drain\nsteps:\n  - {id: nap, kind: sleep, duration: 60s}\n",
                             "drain.yaml");
  ASSERT_OK(wf);
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    auto r = h.engine->StartRun({.workflow = *wf});
    ASSERT_OK(r);
    ids.push_back(r->run.id);
  }
  h.engine->Start();
  for (int i = 0; i < 2500 && h.engine->ActiveRuns() < 5; ++i) {
    RealClock()->SleepFor(absl::Milliseconds(2));
  }
  ASSERT_EQ(h.engine->ActiveRuns(), 5);
  h.engine->Stop();
  for (const std::string& id : ids) {
    auto run = h.engine->store()->GetRun(id);
    ASSERT_OK(run);
    EXPECT_EQ(run->status, RunStatus::kQueued);
    EXPECT_TRUE(run->lease_token.empty());
  }
  EXPECT_EQ(h.engine->stats().runs_released, 5);
}

}  // namespace
}  // namespace runloom
