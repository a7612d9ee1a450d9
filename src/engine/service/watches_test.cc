// Engine watches on a real SQLite file: WatchEvents, AwaitRun, WatchRuns and
// AwaitIdle wake on a commit (in this process or another engine on the same
// file), never by polling.
#include "runloom/engine.h"

#include "testing/engine_test_util.h"
#include "testing/status_matchers.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace runloom {
namespace {

using ::runloom::testing::StatusIs;

std::string Queue(Engine* engine) {
  auto wf = LoadWorkflowYaml("name: w\nsteps:\n  - {id: a, kind: count}\n", "w.yaml");
  EXPECT_OK(wf);
  auto started = engine->StartRun({.workflow = *wf});
  EXPECT_OK(started);
  return started->run.id;
}

int64_t LastSeq(Engine* engine, const std::string& id) {
  auto evs = engine->store()->ListEvents(id, 0, 10000);
  EXPECT_OK(evs);
  return evs->empty() ? 0 : evs->back().seq;
}

TEST(Engine, OpenRefusesABackendWithoutAnEventBus) {
  auto backend = OpenSqlite(TempDb(), {});
  ASSERT_OK(backend);
  backend->events = nullptr;
  auto e = Engine::Open({}, *std::move(backend));
  EXPECT_THAT(e.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(e.status().message().find("event bus"), std::string::npos);
}

TEST(Engine, WatchEventsReturnsAtOnceWhenEventsExist) {
  Harness h;
  std::string id = Queue(h.engine.get());
  auto evs = h.engine->WatchEvents(id, 0, absl::InfiniteFuture());
  ASSERT_OK(evs);
  EXPECT_FALSE(evs->empty());
}

TEST(Engine, WatchEventsNotFoundForUnknownRun) {
  Harness h;
  EXPECT_THAT(h.engine->WatchEvents("no-such-run", 0, absl::InfiniteFuture()).status(),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST(Engine, WatchEventsBlocksAndWakesOnCommit) {
  Harness h;
  std::string id = Queue(h.engine.get());
  int64_t after = LastSeq(h.engine.get(), id);
  std::atomic<bool> returned{false};
  std::thread watcher([&] {
    auto evs = h.engine->WatchEvents(id, after, absl::Now() + absl::Seconds(30));
    EXPECT_OK(evs);
    EXPECT_FALSE(evs->empty());
    returned = true;
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(returned.load());
  ASSERT_OK(h.engine->Cancel(id, "test"));
  watcher.join();
  EXPECT_TRUE(returned.load());
}

TEST(Engine, WatchEventsReturnsEmptyAtTheDeadline) {
  SimulatedClock clock;
  Harness h({}, &clock);
  std::string id = Queue(h.engine.get());
  int64_t after = LastSeq(h.engine.get(), id);
  std::atomic<bool> returned{false};
  std::thread watcher([&] {
    auto evs = h.engine->WatchEvents(id, after, clock.Now() + absl::Seconds(10));
    EXPECT_OK(evs);
    EXPECT_TRUE(evs->empty());
    returned = true;
  });
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_FALSE(returned.load());
  clock.Advance(absl::Seconds(11));
  watcher.join();
  EXPECT_TRUE(returned.load());
}

TEST(Engine, AwaitRunWakesOnAChangeFromAnotherEngineOnTheSameFile) {
  Harness h;
  std::string id = Queue(h.engine.get());
  auto other_backend = OpenSqlite(h.path, {});
  ASSERT_OK(other_backend);
  auto other = Engine::Open({}, *std::move(other_backend));
  ASSERT_OK(other);
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(50));
    EXPECT_OK((*other)->Cancel(id, "test"));
  });
  auto done = h.engine->AwaitRun(id, absl::Now() + absl::Seconds(10));
  canceller.join();
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCancelled);
}

TEST(Engine, WatchRunsSeesEveryRunsStatusChange) {
  Harness h;
  std::string id = Queue(h.engine.get());
  runloom::Mutex mu;
  std::vector<RunChange> seen;
  auto sub = h.engine->WatchRuns([&](const RunChange& c) {
    runloom::MutexLock l(&mu);
    seen.push_back(c);
  });
  ASSERT_OK(h.engine->Cancel(id, "test"));
  auto cancelled = [&] {
    runloom::MutexLock l(&mu);
    for (const RunChange& c : seen) {
      if (c.run_id == id && c.status == RunStatus::kCancelled) return true;
    }
    return false;
  };
  // The bus may publish on the store's writer thread just after Cancel returns.
  for (int i = 0; i < 200 && !cancelled(); ++i) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_TRUE(cancelled());
}

TEST(Engine, AwaitIdleWaitsForQueuedRunsToEnd) {
  Harness h;
  EXPECT_OK(h.engine->AwaitIdle(absl::Now()));
  std::string id = Queue(h.engine.get());
  EXPECT_THAT(h.engine->AwaitIdle(absl::Now() + absl::Milliseconds(20)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  h.engine->Start();
  EXPECT_OK(h.engine->AwaitIdle(absl::Now() + absl::Seconds(10)));
  auto run = h.engine->store()->GetRun(id);
  ASSERT_OK(run);
  EXPECT_EQ(run->status, RunStatus::kCompleted);
  h.engine->Stop();
}

// Acceptance: a status change reaches a blocked watcher within 5 ms (median).
TEST(Engine, StatusChangeReachesAWatcherWithin5ms) {
  Harness h;
  std::vector<double> ms;
  for (int trial = 0; trial < 21; ++trial) {
    std::string id = Queue(h.engine.get());
    std::atomic<bool> waiting{false};
    std::chrono::steady_clock::time_point woke;
    std::thread watcher([&] {
      waiting = true;
      auto done = h.engine->AwaitRun(id, absl::Now() + absl::Seconds(10));
      woke = std::chrono::steady_clock::now();
      EXPECT_OK(done);
    });
    while (!waiting.load()) std::this_thread::yield();
    absl::SleepFor(absl::Milliseconds(5));  // let the watcher subscribe and block
    auto start = std::chrono::steady_clock::now();
    ASSERT_OK(h.engine->Cancel(id, "test"));
    watcher.join();
    ms.push_back(std::chrono::duration<double, std::milli>(woke - start).count());
  }
  std::sort(ms.begin(), ms.end());
  double median = ms[ms.size() / 2];
  double p90 = ms[ms.size() * 9 / 10];
  std::printf("watcher latency over %zu trials: median %.3f ms, p90 %.3f ms\n", ms.size(), median,
              p90);
  EXPECT_LT(median, 5.0);
}

}  // namespace
}  // namespace runloom
