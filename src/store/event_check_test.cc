// Events are validated on the store's write path in test builds
// (store/event_check.h), and only there.
#include "store/event_check.h"

#include "runloom/events.h"
#include "runloom/sqlite.h"
#include "runloom/store.h"

#include "core/ids.h"
#include "testing/status_matchers.h"

#include "absl/random/random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <string>

namespace runloom::store_internal {
namespace {

using ::runloom::testing::StatusIs;

constexpr char kDigest[] =
    "sha256:0000000000000000000000000000000000000000000000000000000000000000";

class EventCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Backend> b = OpenSqlite(":memory:", SqliteOptions{});
    ASSERT_OK(b);
    store_ = std::move(b->store);
  }
  NewRun MakeRun() {
    NewRun r;
    r.id = NewRunId(absl::FromUnixSeconds(1'800'000'000), gen_);
    r.workflow_name = "wf";
    r.workflow_version = 1;
    r.workflow_digest = kDigest;
    r.inputs_digest = kDigest;
    return r;
  }
  absl::BitGen gen_;
  std::unique_ptr<Store> store_;
};

TEST_F(EventCheckTest, AValidEventIsStored) {
  NewRun run = MakeRun();
  Event created = RunCreatedEvent(run.id, {.workflow = "wf",
                                           .workflow_version = 1,
                                           .workflow_digest = kDigest,
                                           .inputs_digest = kDigest});
  ASSERT_OK(ValidateEvent(created));
  EXPECT_OK(store_->CreateRun(run, {created}));
}

TEST_F(EventCheckTest, AnInvalidEventIsRefusedInTestBuildsOnly) {
  NewRun run = MakeRun();
  Event created = RunCreatedEvent(run.id, {.workflow = "wf"});  // no version, no digests
  ASSERT_FALSE(ValidateEvent(created).ok());
  absl::StatusOr<CreateRunResult> r = store_->CreateRun(run, {created});
#ifdef RUNLOOM_TESTING
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(store_->GetRun(run.id), StatusIs(absl::StatusCode::kNotFound)) << "nothing written";
#else
  EXPECT_OK(r) << "Release builds do not check";
#endif
}

TEST_F(EventCheckTest, TheConformanceSuitesCanTurnItOff) {
  TEST_SetEventCheckOnWrite(false);
  NewRun run = MakeRun();
  EXPECT_OK(store_->CreateRun(run, {RunCreatedEvent(run.id, {.workflow = "wf"})}));
  TEST_SetEventCheckOnWrite(true);
}

}  // namespace
}  // namespace runloom::store_internal
