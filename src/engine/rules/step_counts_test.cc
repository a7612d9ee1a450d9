#include "engine/rules/step_counts.h"

#include "gtest/gtest.h"

#include <string>
#include <vector>

namespace runloom::engine_internal {
namespace {

StepRecord Record(int64_t revision, const std::string& path, StepState state, int attempt = 1) {
  StepRecord r;
  r.revision = revision;
  r.path = path;
  r.state = state;
  r.attempt = attempt;
  return r;
}

TEST(StepCounts, CountsDistinctPathsOfTheRevisionByState) {
  const std::vector<StepRecord> records = {Record(1, "a", StepState::kSucceeded),
                                           Record(1, "b", StepState::kFailed),
                                           Record(1, "c", StepState::kSkipped),
                                           Record(2, "a", StepState::kSucceeded),
                                           Record(2, "refine[1]/w", StepState::kSucceeded),
                                           Record(2, "refine[2]/w", StepState::kFailed)};
  const StepCounts one = CountSteps(records, 1);
  EXPECT_EQ(one.revision, 1);
  EXPECT_EQ(one.succeeded, 1);
  EXPECT_EQ(one.failed, 1);
  EXPECT_EQ(one.skipped, 1);
  EXPECT_EQ(one.total(), 3);
  const StepCounts two = CountSteps(records, 2);
  EXPECT_EQ(two.succeeded, 2);
  EXPECT_EQ(two.failed, 1);
  EXPECT_EQ(two.skipped, 0);
  EXPECT_EQ(CountSteps(records, 3).total(), 0);
}

// A step delivered and executed again (a redelivery, a takeover after a
// crash, a Commit retried after its reply was lost) is one step: a second
// record of the same (revision, path), whatever its attempt, adds nothing.
TEST(StepCounts, ARepeatedRecordOfOnePathCountsOnce) {
  std::vector<StepRecord> records = {Record(1, "a", StepState::kSucceeded),
                                     Record(1, "b", StepState::kSucceeded)};
  const StepCounts before = CountSteps(records, 1);
  records.push_back(Record(1, "a", StepState::kSucceeded, 2));
  records.push_back(Record(1, "b", StepState::kFailed, 3));
  const StepCounts after = CountSteps(records, 1);
  EXPECT_EQ(after.succeeded, before.succeeded);
  EXPECT_EQ(after.failed, 0);
  EXPECT_EQ(after.total(), 2);
}

}  // namespace
}  // namespace runloom::engine_internal
