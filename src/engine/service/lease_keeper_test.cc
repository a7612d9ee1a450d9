// The lease keeper on a real SQLite store: a failed renewal stops the
// executor at once.
#include "runloom/engine.h"

#include "engine/run/run_execution.h"
#include "engine/service/lease_keeper.h"
#include "testing/engine_test_util.h"
#include "testing/status_matchers.h"

#include "gtest/gtest.h"

#include <atomic>
#include <map>
#include <set>
#include <filesystem>
#include <thread>

namespace runloom {
namespace {

using ::runloom::testing::StatusIs;

TEST(Engine, FailedRenewalStopsTheExecutorAtOnce) {
  EngineOptions opts;
  opts.lease_ttl = absl::Milliseconds(300);
  opts.enable_sweeper = false;
  Harness h(opts);
  auto wf = LoadWorkflowYaml(R"(
name: renew
steps:
  - {id: nap, kind: sleep, duration: 60s}
  - {id: after, kind: count}
)",
                             "renew.yaml");
  ASSERT_OK(wf);
  auto started = h.engine->StartRun({.workflow = *wf});
  ASSERT_OK(started);
  const std::string id = started->run.id;
  std::thread exec([&] { (void)h.engine->ExecuteRun(id); });
  // Wait for the step to start, then take the lease away (as an admin reset
  // or another executor would) so the next renewal fails.
  AwaitLastEvent(h.engine->store(), id, "step.started");
  RunWrite w;
  w.run_id = id;
  w.party = Party::kAdmin;
  w.new_status = RunStatus::kCancelled;
  ASSERT_OK(h.engine->store()->Commit(w));
  exec.join();  // returns long before the 60 s sleep would end
  EXPECT_EQ(h.kind->count.load(), 0);
  EXPECT_EQ(h.engine->stats().leases_lost, 1);
}

// More runs held than one renewer takes (runs_in_flight): the keeper's
// helper threads renew every lease, heartbeat after heartbeat. Each run's
// lease expiry is seen to move forward (waited for, not timed), and none is
// lost; Stop() then releases them all.
TEST(Engine, ManyHeldRunsKeepTheirLeases) {
  constexpr int kRuns = static_cast<int>(engine_internal::LeaseKeeper::kRunsPerRenewer) + 44;
  EngineOptions opts;
  opts.executors = 2;
  opts.runs_in_flight = kRuns;
  opts.heartbeat = absl::Milliseconds(200);
  opts.drain_timeout = absl::Milliseconds(100);
  opts.idle_poll = absl::Milliseconds(5);
  Harness h(opts);
  auto wf = LoadWorkflowYaml("name: held\nsteps:\n  - {id: nap, kind: sleep, duration: 4m}\n",
                             "held.yaml");
  ASSERT_OK(wf);
  std::vector<std::string> ids;
  for (int i = 0; i < kRuns; ++i) {
    auto r = h.engine->StartRun({.workflow = *wf});
    ASSERT_OK(r);
    ids.push_back(r->run.id);
  }
  h.engine->Start();
  const absl::Time give_up = RealClock()->Now() + absl::Seconds(120);
  while (h.engine->ActiveRuns() < kRuns && RealClock()->Now() < give_up - absl::Seconds(100)) {
    RealClock()->SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(h.engine->ActiveRuns(), kRuns)
      << "the first run: " << ToString(h.engine->store()->GetRun(ids[0])->status) << " "
      << h.engine->store()->GetRun(ids[0])->error;
  // Every lease as first taken, then until each has been renewed.
  std::map<std::string, absl::Time> first;
  for (const std::string& id : ids) {
    auto run = h.engine->store()->GetRun(id);
    ASSERT_OK(run);
    ASSERT_TRUE(run->lease_expires_at.has_value()) << id;
    first[id] = *run->lease_expires_at;
  }
  std::set<std::string> waiting(ids.begin(), ids.end());
  while (!waiting.empty() && RealClock()->Now() < give_up) {
    RealClock()->SleepFor(absl::Milliseconds(50));
    for (auto it = waiting.begin(); it != waiting.end();) {
      auto run = h.engine->store()->GetRun(*it);
      ASSERT_OK(run);
      it = run->lease_expires_at.value_or(absl::InfinitePast()) > first[*it] ? waiting.erase(it)
                                                                              : std::next(it);
    }
  }
  EXPECT_TRUE(waiting.empty()) << waiting.size() << " leases never renewed";
  h.engine->Stop();
  EXPECT_EQ(h.engine->stats().leases_lost, 0);
  EXPECT_EQ(h.engine->stats().runs_released, kRuns);
}

}  // namespace
}  // namespace runloom
