// The lease keeper on a real SQLite store: a failed renewal stops the
// executor at once.
#include "runloom/engine.h"

#include "engine/run/run_execution.h"
#include "testing/engine_test_util.h"
#include "testing/status_matchers.h"

#include "gtest/gtest.h"

#include <atomic>
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

}  // namespace
}  // namespace runloom
