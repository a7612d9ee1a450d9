// Lost and poisoned messages, caused on purpose: a consumer that claims a
// run's message and dies before taking the lease, over and over, until the
// transport dead-letters it; and a message acked without a lease (lost).
// Invariants: a dead-lettered run is visible as such and never re-enqueued
// by the sweeper; a redrive runs it to completion; a lost message is
// reconciled from the store's state.
#include "runloom/backend.h"
#include "runloom/engine.h"
#include "runloom/workflow.h"

#include "testing/status_matchers.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <string>
#include <vector>

namespace runloom {
namespace {

using ::runloom::testing::IsOkAndHolds;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr char kWorkflow[] = R"(
name: dead-letters
steps:
  - id: a
    kind: noop
)";

class DeadLetterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BackendOptions bo;
    bo.clock = &clock_;
    bo.transport.max_deliveries = 2;
    absl::StatusOr<Backend> b = OpenBackend("sqlite::memory:", bo);
    ASSERT_OK(b);
    EngineOptions eo;
    eo.enable_sweeper = false;  // the test sweeps
    eo.queued_grace = absl::Seconds(30);
    absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Open(eo, *std::move(b));
    ASSERT_OK(e);
    engine_ = *std::move(e);
  }

  std::string Start() {
    absl::StatusOr<Workflow> wf = LoadWorkflowYaml(kWorkflow, "dead-letters.yaml");
    EXPECT_OK(wf);
    StartRunRequest req;
    req.workflow = *wf;
    absl::StatusOr<CreateRunResult> r = engine_->StartRun(req);
    EXPECT_OK(r);
    return r.ok() ? r->run.id : "";
  }

  // A consumer that claims and dies before taking the lease.
  int ClaimAndDie() {
    absl::StatusOr<std::vector<QueueMessage>> m =
        engine_->transport()->Claim("dies", 10, absl::Seconds(5));
    EXPECT_OK(m);
    clock_.Advance(absl::Seconds(5));
    return m.ok() ? static_cast<int>(m->size()) : -1;
  }

  SimulatedClock clock_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(DeadLetterTest, APoisonedRunIsDeadLetteredNeverSweptAndRunsAfterARedrive) {
  const std::string id = Start();
  EXPECT_EQ(ClaimAndDie(), 1);
  EXPECT_EQ(ClaimAndDie(), 1);
  EXPECT_EQ(ClaimAndDie(), 0) << "the third delivery is past the cap of 2";

  // Visible as such: in the run's events and the dead-letter list.
  absl::StatusOr<std::vector<Event>> events = engine_->store()->ListEvents(id, 0, 0);
  ASSERT_OK(events);
  ASSERT_FALSE(events->empty());
  EXPECT_EQ(events->back().type, "run.dead_lettered");
  EXPECT_THAT(engine_->transport()->ListDeadLetters(0),
              IsOkAndHolds(ElementsAre(Field(&DeadLetter::run_id, id))));

  // Long past the grace, the sweeper leaves it alone, sweep after sweep.
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(absl::Minutes(5));
    EXPECT_THAT(engine_->SweepOnce(), IsOkAndHolds(0));
    EXPECT_EQ(ClaimAndDie(), 0);
  }
  absl::StatusOr<RunRecord> run = engine_->store()->GetRun(id);
  ASSERT_OK(run);
  EXPECT_EQ(run->status, RunStatus::kQueued);

  // A redrive sends it again, and it runs to the end.
  EXPECT_THAT(engine_->transport()->RedriveAll(), IsOkAndHolds(1));
  EXPECT_THAT(engine_->transport()->ListDeadLetters(0), IsOkAndHolds(IsEmpty()));
  absl::StatusOr<std::vector<QueueMessage>> m =
      engine_->transport()->Claim("worker", 10, absl::Seconds(60));
  ASSERT_OK(m);
  ASSERT_THAT(*m, ElementsAre(Field(&QueueMessage::run_id, id)));
  ASSERT_OK(engine_->transport()->Ack((*m)[0]));
  absl::StatusOr<RunRecord> done = engine_->ExecuteRun(id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCompleted);
}

TEST_F(DeadLetterTest, ALostMessageIsReconciledFromTheStore) {
  const std::string lost = Start();
  const std::string waiting = Start();
  // `lost`'s message is acked by a consumer that never took the lease.
  absl::StatusOr<std::vector<QueueMessage>> m =
      engine_->transport()->Claim("acks-and-dies", 1, absl::Seconds(60));
  ASSERT_OK(m);
  ASSERT_THAT(*m, ElementsAre(Field(&QueueMessage::run_id, lost)));
  ASSERT_OK(engine_->transport()->Ack((*m)[0]));
  EXPECT_THAT(engine_->SweepOnce(), IsOkAndHolds(0)) << "within the grace";
  clock_.Advance(absl::Minutes(1));
  // `waiting` still has its message: only `lost` is enqueued again.
  EXPECT_THAT(engine_->SweepOnce(), IsOkAndHolds(1));
  EXPECT_THAT(engine_->SweepOnce(), IsOkAndHolds(0)) << "its message is pending now";
  m = engine_->transport()->Claim("worker", 10, absl::Seconds(60));
  ASSERT_OK(m);
  EXPECT_THAT(*m, SizeIs(2));
}

}  // namespace
}  // namespace runloom
