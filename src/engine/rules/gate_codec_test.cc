// PendingGate (runloom/gate.h): its JSON form keeps the keys clients and old
// runs have; the run-context accessors are the only readers and writers.
#include "runloom/gate.h"

#include "engine/run/approval_gate.h"
#include "testing/status_matchers.h"

#include "gtest/gtest.h"

namespace runloom {
namespace {

using ::runloom::testing::StatusIs;

PendingGate Sample() {
  PendingGate g;
  g.step_path = "refine[2]/review";
  g.step_id = "review";
  g.phase = "review";
  g.proposal = {{"text", "draft 1"}};
  g.proposal_digest = "sha256:00";
  g.allowed_decisions = {"approve", "reject"};
  g.revision_phase = "drafting";
  g.title = "Review the draft";
  return g;
}

TEST(PendingGate, JsonFormKeepsItsKeys) {
  EXPECT_EQ(PendingGateToJson(Sample()), nlohmann::json::parse(R"({
    "path": "refine[2]/review", "step_id": "review", "phase": "review",
    "proposal": {"text": "draft 1"}, "proposal_digest": "sha256:00",
    "allow": ["approve", "reject"], "revision_phase": "drafting",
    "title": "Review the draft"})"));
}

TEST(PendingGate, RoundTripsAndReadsMissingKeysAsDefaults) {
  absl::StatusOr<PendingGate> back = PendingGateFromJson(PendingGateToJson(Sample()));
  ASSERT_OK(back);
  EXPECT_EQ(PendingGateToJson(*back), PendingGateToJson(Sample()));
  absl::StatusOr<PendingGate> empty = PendingGateFromJson(nlohmann::json::object());
  ASSERT_OK(empty);
  EXPECT_EQ(empty->step_path, "");
  EXPECT_TRUE(empty->proposal.is_null());
  EXPECT_TRUE(empty->allowed_decisions.empty());
}

TEST(PendingGate, MalformedIsDataLoss) {
  EXPECT_THAT(PendingGateFromJson(nlohmann::json::array()), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(PendingGateFromJson({{"path", 3}}), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(PendingGateFromJson({{"allow", "approve"}}), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(PendingGateFromJson({{"allow", {1}}}), StatusIs(absl::StatusCode::kDataLoss));
}

TEST(PendingGate, Allows) {
  PendingGate g = Sample();
  EXPECT_TRUE(g.Allows("approve"));
  EXPECT_FALSE(g.Allows("edit"));
}

TEST(PendingGate, RunContextAccessors) {
  RunRecord run;
  run.id = "r1";
  run.context = {{"feedback", "more"}};
  EXPECT_THAT(PendingGateOf(run), StatusIs(absl::StatusCode::kNotFound));
  run.context = ContextWithPendingGate(run.context, Sample());
  EXPECT_EQ(run.context["feedback"], "more");
  absl::StatusOr<PendingGate> g = PendingGateOf(run);
  ASSERT_OK(g);
  EXPECT_EQ(g->proposal_digest, "sha256:00");
  run.context = ContextWithoutPendingGate(run.context);
  EXPECT_THAT(PendingGateOf(run), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(run.context, nlohmann::json({{"feedback", "more"}}));
}

TEST(PendingGate, MadeFromAnApprovalStep) {
  StepDef step;
  step.id = "review";
  step.kind = "approval";
  step.phase = "review";
  step.config = {{"proposal", "x"}};
  PendingGate g = engine_internal::MakePendingGate(step, "review", "the proposal");
  EXPECT_EQ(g.title, "review");  // defaults to the step id
  EXPECT_EQ(g.allowed_decisions,
            std::vector<std::string>(std::begin(kDecisions), std::end(kDecisions)));
  EXPECT_EQ(g.proposal, "the proposal");
  EXPECT_EQ(g.proposal_digest.rfind("sha256:", 0), 0u);
  step.config["allow"] = {"approve"};
  step.config["title"] = "Check";
  g = engine_internal::MakePendingGate(step, "review", "the proposal");
  EXPECT_EQ(g.allowed_decisions, std::vector<std::string>{"approve"});
  EXPECT_EQ(g.title, "Check");
}

TEST(PendingGate, RejectionIsADecidedRejectOnAnApprovalStep) {
  StepDef step;
  step.kind = "approval";
  engine_internal::StepResult r;
  r.output = {{"decision", "reject"}};
  EXPECT_TRUE(engine_internal::IsRejection(step, r));
  r.output = {{"decision", "approve"}};
  EXPECT_FALSE(engine_internal::IsRejection(step, r));
  r.output = {{"decision", "reject"}};
  r.state = StepState::kFailed;
  EXPECT_FALSE(engine_internal::IsRejection(step, r));
  r.state = StepState::kSucceeded;
  step.kind = "exec";
  EXPECT_FALSE(engine_internal::IsRejection(step, r));
}

}  // namespace
}  // namespace runloom
