// Trigger rules as a pure function: every rule's branches and skip reasons.
#include "engine/rules/trigger_rules.h"

#include "gtest/gtest.h"

namespace runloom::engine_internal {
namespace {

constexpr StepState kOk = StepState::kSucceeded;
constexpr StepState kFail = StepState::kFailed;
constexpr StepState kSkip = StepState::kSkipped;

TEST(TriggerRules, AllSuccessRunsOnlyWhenEveryNeedSucceeded) {
  EXPECT_TRUE(EvaluateTrigger(TriggerRule::kAllSuccess, {}).run);
  EXPECT_TRUE(EvaluateTrigger(TriggerRule::kAllSuccess, {{"a", kOk}, {"b", kOk}}).run);
  TriggerDecision d = EvaluateTrigger(TriggerRule::kAllSuccess, {{"a", kOk}, {"b", kFail}});
  EXPECT_FALSE(d.run);
  EXPECT_EQ(d.skip_reason, "trigger all_success: upstream b failed");
  // The first need that did not succeed is the one named.
  d = EvaluateTrigger(TriggerRule::kAllSuccess, {{"a", kSkip}, {"b", kFail}});
  EXPECT_FALSE(d.run);
  EXPECT_EQ(d.skip_reason, "trigger all_success: upstream a skipped");
}

TEST(TriggerRules, AllDoneAlwaysRuns) {
  EXPECT_TRUE(EvaluateTrigger(TriggerRule::kAllDone, {}).run);
  EXPECT_TRUE(EvaluateTrigger(TriggerRule::kAllDone, {{"a", kFail}, {"b", kSkip}}).run);
  EXPECT_EQ(EvaluateTrigger(TriggerRule::kAllDone, {{"a", kFail}}).skip_reason, "");
}

TEST(TriggerRules, NoneFailedMinOneSuccess) {
  const TriggerRule r = TriggerRule::kNoneFailedMinOneSuccess;
  EXPECT_TRUE(EvaluateTrigger(r, {}).run);
  EXPECT_TRUE(EvaluateTrigger(r, {{"a", kOk}, {"b", kSkip}}).run);
  TriggerDecision d = EvaluateTrigger(r, {{"a", kOk}, {"b", kFail}});
  EXPECT_FALSE(d.run);
  EXPECT_EQ(d.skip_reason, "trigger none_failed_min_one_success: upstream b failed");
  d = EvaluateTrigger(r, {{"a", kSkip}, {"b", kSkip}});
  EXPECT_FALSE(d.run);
  EXPECT_EQ(d.skip_reason, "trigger none_failed_min_one_success: no upstream succeeded");
}

TEST(TriggerRules, OneSuccess) {
  const TriggerRule r = TriggerRule::kOneSuccess;
  EXPECT_TRUE(EvaluateTrigger(r, {}).run);
  EXPECT_TRUE(EvaluateTrigger(r, {{"a", kFail}, {"b", kOk}}).run);
  TriggerDecision d = EvaluateTrigger(r, {{"a", kFail}, {"b", kSkip}});
  EXPECT_FALSE(d.run);
  EXPECT_EQ(d.skip_reason, "trigger one_success: no upstream succeeded");
}

}  // namespace
}  // namespace runloom::engine_internal
