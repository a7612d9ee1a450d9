#include "runloom/clock.h"
#include "runloom/step.h"

#include "steps/builtin_steps.h"
#include "testing/status_matchers.h"
#include "testing/step_test_util.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <memory>
#include <string>
#include <thread>

namespace runloom {
namespace {

using ::runloom::steps_testing::MakeDef;
using ::runloom::steps_testing::TestStepContext;
using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;
using json = nlohmann::json;

// Issue 25, bounded steps: each built-in kind's default timeout, as
// docs/formats/workflow-yaml.md ("Timeouts") lists them.
TEST(StepRegistryTest, EveryBuiltinKindHasTheDocumentedDefaultTimeout) {
  std::unique_ptr<StepRegistry> registry = StepRegistry::WithBuiltins();
  const std::pair<const char*, absl::Duration> kDefaults[] = {
      {"exec", absl::Hours(1)},
      {"http", absl::Seconds(30)},
      {"llm", absl::Minutes(10)},
      {"noop", absl::InfiniteDuration()},
      {"fail", absl::InfiniteDuration()},
      {"sleep", absl::InfiniteDuration()},
  };
  for (const auto& [kind, timeout] : kDefaults) {
    ASSERT_NE(registry->Find(kind), nullptr) << kind;
    EXPECT_EQ(registry->Find(kind)->DefaultTimeout(), timeout) << kind;
  }
  EXPECT_EQ(StepKind::kDefaultStepTimeout, absl::Hours(1));  // a registered kind's
}

TEST(StepRegistryTest, WithBuiltinsHasEveryBuiltinKind) {
  std::unique_ptr<StepRegistry> registry = StepRegistry::WithBuiltins();
  for (const char* kind : {"exec", "noop", "sleep", "fail", "llm"}) {
    EXPECT_NE(registry->Find(kind), nullptr) << kind;
  }
  EXPECT_EQ(registry->Find("loop"), nullptr);
  EXPECT_EQ(registry->Find("nope"), nullptr);
}

TEST(StepRegistryTest, RegisterAddsAndReplaces) {
  StepRegistry registry;
  std::shared_ptr<StepKind> a = NewNoopStep();
  std::shared_ptr<StepKind> b = NewFailStep();
  registry.Register("custom", a);
  EXPECT_EQ(registry.Find("custom"), a);
  registry.Register("custom", b);
  EXPECT_EQ(registry.Find("custom"), b);
}

TEST(StepRegistryDeathTest, LoopAndParallelAreReserved) {
  StepRegistry registry;
  EXPECT_DEATH(registry.Register("loop", NewNoopStep()), "reserved");
  EXPECT_DEATH(registry.Register("parallel", NewNoopStep()), "reserved");
}

TEST(NoopStepTest, ReturnsItsOutput) {
  std::shared_ptr<StepKind> noop = NewNoopStep();
  SimulatedClock clock;
  TestStepContext ctx(&clock);
  absl::StatusOr<StepOutput> out = noop->Execute(ctx, json::object());
  ASSERT_OK(out);
  EXPECT_EQ(out->output, json::object());
  out = noop->Execute(ctx, {{"output", {{"approved", true}}}});
  ASSERT_OK(out);
  EXPECT_EQ(out->output, json({{"approved", true}}));
  EXPECT_THAT(noop->Execute(ctx, {{"output", 3}}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(noop->Validate(MakeDef("noop", {{"outptu", json::object()}})),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_OK(noop->Validate(MakeDef("noop", {{"output", "{{ steps.a.output }}"}})));
}

class SleepStepTest : public ::testing::Test {
 protected:
  SimulatedClock clock_;
  TestStepContext ctx_{&clock_};
  std::shared_ptr<StepKind> sleep_ = NewSleepStep();
};

TEST_F(SleepStepTest, SleepsOnTheStepClock) {
  const absl::Time start = clock_.Now();
  absl::StatusOr<StepOutput> out;
  std::thread runner([&] { out = sleep_->Execute(ctx_, {{"duration", "2s"}}); });
  EXPECT_EQ(ctx_.AwaitSleeping(), start + absl::Seconds(2));
  clock_.Advance(absl::Seconds(1));
  clock_.Advance(absl::Seconds(1));
  runner.join();
  ASSERT_OK(out);
  EXPECT_EQ(out->output, json({{"slept_ms", 2000}}));
}

TEST_F(SleepStepTest, StopEndsTheSleepWithCancelled) {
  absl::StatusOr<StepOutput> out;
  std::thread runner([&] { out = sleep_->Execute(ctx_, {{"duration", "1h"}}); });
  ctx_.AwaitSleeping();
  ctx_.Stop();
  runner.join();
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kCancelled));
}

TEST_F(SleepStepTest, ATimeoutShorterThanTheSleepIsDeadlineExceeded) {
  ctx_.set_deadline(clock_.Now() + absl::Seconds(1));
  absl::StatusOr<StepOutput> out;
  std::thread runner([&] { out = sleep_->Execute(ctx_, {{"duration", "5s"}}); });
  EXPECT_EQ(ctx_.AwaitSleeping(), ctx_.deadline());
  clock_.Advance(absl::Seconds(1));
  runner.join();
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kDeadlineExceeded));
}

TEST_F(SleepStepTest, ValidateRequiresADuration) {
  EXPECT_OK(sleep_->Validate(MakeDef("sleep", {{"duration", "250ms"}})));
  EXPECT_OK(sleep_->Validate(MakeDef("sleep", {{"duration", "{{ inputs.wait }}"}})));
  absl::Status s = sleep_->Validate(MakeDef("sleep", json::object()));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(s.message()), HasSubstr("missing required key 'duration'"));
  s = sleep_->Validate(MakeDef("sleep", {{"duration", "soon"}}));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(s.message()), HasSubstr("key 'duration'"));
  EXPECT_THAT(sleep_->Validate(MakeDef("sleep", {{"duration", 2}})),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(sleep_->Validate(MakeDef("sleep", {{"duration", "1s"}, {"x", 1}})),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // `until:` (issue 23): an ISO 8601 time with its offset, or a template;
  // never with `duration:`.
  EXPECT_OK(sleep_->Validate(MakeDef("sleep", {{"until", "2026-12-24T18:00:00Z"}})));
  EXPECT_OK(sleep_->Validate(MakeDef("sleep", {{"until", "2026-12-24T19:00:00.5+01:00"}})));
  EXPECT_OK(sleep_->Validate(MakeDef("sleep", {{"until", "{{ inputs.at }}"}})));
  s = sleep_->Validate(MakeDef("sleep", {{"until", "2026-12-24 18:00"}}));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(s.message()), HasSubstr("key 'until'"));
  EXPECT_THAT(sleep_->Validate(MakeDef("sleep", {{"until", std::string(10000, '9')}})),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      sleep_->Validate(MakeDef("sleep", {{"duration", "1s"}, {"until", "2026-12-24T18:00:00Z"}})),
      StatusIs(absl::StatusCode::kInvalidArgument));
}

class FailStepTest : public ::testing::Test {
 protected:
  SimulatedClock clock_;
  TestStepContext ctx_{&clock_};
  std::shared_ptr<StepKind> fail_ = NewFailStep();
};

TEST_F(FailStepTest, FailsWithTheDefaultMessageAndClass) {
  absl::StatusOr<StepOutput> out = fail_->Execute(ctx_, json::object());
  EXPECT_EQ(out.status(), absl::UnknownError("failed on purpose"));
  out = fail_->Execute(ctx_, {{"message", "nope"}});
  EXPECT_EQ(out.status(), absl::UnknownError("nope"));
}

TEST_F(FailStepTest, ClassesMapToStatusCodes) {
  const std::pair<const char*, absl::StatusCode> cases[] = {
      {"error", absl::StatusCode::kUnknown},
      {"timeout", absl::StatusCode::kDeadlineExceeded},
      {"unavailable", absl::StatusCode::kUnavailable},
      {"rate_limited", absl::StatusCode::kResourceExhausted},
      {"invalid", absl::StatusCode::kInvalidArgument},
  };
  for (const auto& [cls, code] : cases) {
    EXPECT_OK(fail_->Validate(MakeDef("fail", {{"class", cls}})));
    EXPECT_THAT(fail_->Execute(ctx_, {{"class", cls}}), StatusIs(code)) << cls;
  }
}

TEST_F(FailStepTest, TimesFailsOnlyTheFirstAttempts) {
  const json config = {{"times", 2}, {"class", "unavailable"}};
  for (int attempt = 1; attempt <= 2; ++attempt) {
    ctx_.set_attempt(attempt);
    EXPECT_THAT(fail_->Execute(ctx_, config), StatusIs(absl::StatusCode::kUnavailable));
  }
  ctx_.set_attempt(3);
  absl::StatusOr<StepOutput> out = fail_->Execute(ctx_, config);
  ASSERT_OK(out);
  EXPECT_EQ(out->output, json({{"attempts", 3}}));
  // A resolved template may give the count as a string.
  EXPECT_OK(fail_->Execute(ctx_, {{"times", "2"}}));
  ctx_.set_attempt(1);
  EXPECT_OK(fail_->Execute(ctx_, {{"times", 0}}));
}

TEST_F(FailStepTest, ValidateRejectsBadKeys) {
  absl::Status s = fail_->Validate(MakeDef("fail", {{"class", "boom"}}));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("allowed: error, timeout, unavailable, rate_limited, invalid"));
  s = fail_->Validate(MakeDef("fail", {{"tims", 1}}));
  EXPECT_EQ(s.message(), "fail step: unknown key 'tims'; allowed keys: class, message, times");
  EXPECT_THAT(fail_->Validate(MakeDef("fail", {{"times", -1}})),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(fail_->Validate(MakeDef("fail", {{"times", "x"}})),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(fail_->Validate(MakeDef("fail", {{"message", 5}})),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_OK(fail_->Validate(MakeDef("fail", {{"times", "{{ inputs.n }}"}})));
}

}  // namespace
}  // namespace runloom
