// The retention sweep (retention_sweep.h) on a real SQLite store and a
// SimulatedClock: what a pass deletes as the clock moves, per-workflow
// keep_runs, batches, and a policy that keeps everything.
#include "engine/service/retention_sweep.h"

#include "runloom/sqlite.h"

#include "core/ids.h"
#include "store/event_check.h"
#include "testing/status_matchers.h"

#include "absl/random/random.h"
#include "gtest/gtest.h"

#include <string>
#include <vector>

namespace runloom::engine_internal {
namespace {

constexpr absl::Duration kDay = absl::Hours(24);

class RetentionSweepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_internal::TEST_SetEventCheckOnWrite(false);  // synthetic events
    SqliteOptions o;
    o.clock = &clock_;
    o.watch_other_processes = false;
    absl::StatusOr<Backend> b = OpenSqlite(":memory:", o);
    ASSERT_OK(b);
    backend_ = std::move(*b);
  }
  Store* store() { return backend_.store.get(); }

  // A run of `workflow` moved to `end` now (or left queued).
  std::string Run(const std::string& workflow,
                  std::optional<RunStatus> end = RunStatus::kCompleted) {
    NewRun r;
    r.id = NewRunId(clock_.Now(), gen_);
    r.workflow_name = workflow;
    r.workflow_version = 1;
    r.workflow_digest = "sha256:abc";
    r.inputs_digest = "sha256:def";
    Event created;
    created.type = "run.created";
    EXPECT_OK(store()->CreateRun(r, {created}));
    if (!end.has_value()) return r.id;
    absl::StatusOr<Lease> lease = store()->AcquireLease(r.id, "w", absl::Seconds(30), {});
    EXPECT_OK(lease);
    if (!lease.ok()) return r.id;
    RunWrite w{.run_id = r.id, .lease_token = lease->token};
    w.new_status = *end;
    EXPECT_OK(store()->Commit(w));
    return r.id;
  }
  bool Exists(const std::string& id) { return store()->GetRun(id).ok(); }

  SimulatedClock clock_;
  absl::BitGen gen_;
  Backend backend_;
};

TEST_F(RetentionSweepTest, APassDeletesTheRunsPastKeepRunsAsTheClockMoves) {
  RetentionPolicy policy;
  policy.keep_runs = 30 * kDay;
  RetentionSweep sweep(store(), &clock_, policy, nullptr);
  const std::string done = Run("blog");
  const std::string failed = Run("blog", RunStatus::kFailed);
  const std::string queued = Run("blog", std::nullopt);
  clock_.Advance(29 * kDay);
  absl::StatusOr<PruneResult> got = sweep.PassOnce();
  ASSERT_OK(got);
  EXPECT_EQ(got->runs, 0);  // 29 days: kept
  clock_.Advance(kDay + absl::Seconds(1));
  got = sweep.PassOnce();
  ASSERT_OK(got);
  EXPECT_EQ(got->runs, 2);
  EXPECT_GT(got->rows, 2);  // their events too
  EXPECT_FALSE(Exists(done));
  EXPECT_FALSE(Exists(failed));
  EXPECT_TRUE(Exists(queued));  // never: it is not finished
}

TEST_F(RetentionSweepTest, AWorkflowsOwnKeepRunsComesFirstAndNoneKeepsForever) {
  RetentionPolicy policy;
  policy.keep_runs = 30 * kDay;
  policy.keep_runs_by_workflow = {{"chat", kDay}, {"audit", absl::InfiniteDuration()}};
  RetentionSweep sweep(store(), &clock_, policy, nullptr);
  const std::string chat = Run("chat");
  const std::string audit = Run("audit");
  const std::string blog = Run("blog");
  clock_.Advance(2 * kDay);
  ASSERT_OK(sweep.PassOnce());
  EXPECT_FALSE(Exists(chat));
  EXPECT_TRUE(Exists(blog));
  EXPECT_TRUE(Exists(audit));
  clock_.Advance(400 * kDay);
  ASSERT_OK(sweep.PassOnce());
  EXPECT_FALSE(Exists(blog));
  EXPECT_TRUE(Exists(audit));  // none: kept forever, not swept by the default
}

TEST_F(RetentionSweepTest, APassTakesBoundedBatchesUpToItsCap) {
  RetentionPolicy policy;
  policy.keep_runs = kDay;
  policy.batch_runs = 2;
  policy.max_batches_per_pass = 2;
  RetentionSweep sweep(store(), &clock_, policy, nullptr);
  for (int i = 0; i < 7; ++i) Run("blog");
  clock_.Advance(2 * kDay);
  absl::StatusOr<PruneResult> got = sweep.PassOnce();
  ASSERT_OK(got);
  EXPECT_EQ(got->runs, 4);  // 2 batches of 2: the rest is the next pass's
  got = sweep.PassOnce();
  ASSERT_OK(got);
  EXPECT_EQ(got->runs, 3);
}

TEST_F(RetentionSweepTest, APassPastItsTimeStillTakesOneBatchForEachWorkflow) {
  RetentionPolicy policy;
  policy.keep_runs = kDay;
  policy.keep_runs_by_workflow["chat"] = kDay;
  policy.batch_runs = 2;
  policy.max_pass_time = absl::ZeroDuration();  // past its time at once
  RetentionSweep sweep(store(), &clock_, policy, nullptr);
  for (int i = 0; i < 5; ++i) {
    Run("blog");
    Run("chat");
  }
  clock_.Advance(2 * kDay);
  absl::StatusOr<PruneResult> got = sweep.PassOnce();
  ASSERT_OK(got);
  EXPECT_EQ(got->runs, 4);  // one batch of 2 for chat, one for the rest
  for (int pass = 0; pass < 2; ++pass) ASSERT_OK(sweep.PassOnce());
  got = sweep.PassOnce();
  ASSERT_OK(got);
  EXPECT_EQ(got->runs, 0);  // 4 + 4 + 2: all ten gone in three passes
}

TEST_F(RetentionSweepTest, TheDefaultPolicyKeepsEverything) {
  RetentionPolicy policy;  // the library's default
  EXPECT_FALSE(policy.enabled());
  RetentionSweep sweep(store(), &clock_, policy, nullptr);
  const std::string id = Run("blog");
  clock_.Advance(10000 * kDay);
  absl::StatusOr<PruneResult> got = sweep.PassOnce();
  ASSERT_OK(got);
  EXPECT_EQ(got->runs, 0);
  EXPECT_TRUE(Exists(id));
  sweep.Start();  // starts no thread
  sweep.Stop();
}

}  // namespace
}  // namespace runloom::engine_internal
