// The sweeper on a real SQLite store: expired leases re-enqueued, the
// attempt cap.
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

TEST(Engine, SweeperReenqueuesExpiredLeaseAndWorkerFinishes) {
  SimulatedClock clock;
  EngineOptions opts;
  opts.lease_ttl = absl::Seconds(10);
  opts.enable_sweeper = false;
  Harness h(opts, &clock);
  auto wf = LoadWorkflowYaml("name: sweep\nsteps:\n  - {id: a, kind: count}\n", "sweep.yaml");
  ASSERT_OK(wf);
  auto started = h.engine->StartRun({.workflow = *wf});
  ASSERT_OK(started);
  const std::string id = started->run.id;
  Store* store = h.engine->store();
  // An executor takes the run and dies without a trace.
  auto msgs = h.engine->transport()->Claim("dead", 10, absl::Seconds(600));
  ASSERT_OK(msgs);
  ASSERT_EQ(msgs->size(), 1u);
  ASSERT_OK(h.engine->transport()->Ack((*msgs)[0]));
  ASSERT_OK(store->AcquireLease(id, "dead", absl::Seconds(10), {}));
  // Not expired yet: nothing to do.
  EXPECT_EQ(*h.engine->SweepOnce(), 0);
  clock.Advance(absl::Seconds(11));
  EXPECT_EQ(*h.engine->SweepOnce(), 1);
  auto again = h.engine->transport()->Claim("live", 10, absl::Seconds(60));
  ASSERT_OK(again);
  ASSERT_EQ(again->size(), 1u);
  auto done = h.engine->ExecuteRun(id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCompleted);
  EXPECT_EQ(done->attempts, 2);
  bool saw_expiry = false;
  for (const Event& e : h.Events(id)) saw_expiry = saw_expiry || e.type == "run.lease_expired";
  EXPECT_TRUE(saw_expiry);
}

TEST(Engine, SweeperFailsRunPastAttemptCap) {
  SimulatedClock clock;
  EngineOptions opts;
  opts.lease_ttl = absl::Seconds(10);
  opts.max_attempts = 2;
  opts.enable_sweeper = false;
  Harness h(opts, &clock);
  auto wf = LoadWorkflowYaml("name: cap\nsteps:\n  - {id: a, kind: count}\n", "cap.yaml");
  ASSERT_OK(wf);
  auto started = h.engine->StartRun({.workflow = *wf});
  ASSERT_OK(started);
  const std::string id = started->run.id;
  Store* store = h.engine->store();
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK(store->AcquireLease(id, "crashy", absl::Seconds(10), {}));
    clock.Advance(absl::Seconds(11));
  }
  EXPECT_EQ(*h.engine->SweepOnce(), 1);
  auto run = store->GetRun(id);
  ASSERT_OK(run);
  EXPECT_EQ(run->status, RunStatus::kFailed);
  EXPECT_NE(run->error.find("attempt cap"), std::string::npos);
  EXPECT_EQ(h.kind->count.load(), 0);
}

}  // namespace
}  // namespace runloom
