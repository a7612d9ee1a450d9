// Timers (issue 23): a long sleep parks its run `waiting` with no lease and
// no executor; the sweeper queues it once the store's clock passes the wake
// time, and the next execution finishes the sleep and the run. Shorter
// sleeps, and sleeps in a parallel branch, sleep in place. Cancel acts on a
// waiting run at once.
#include "testing/engine_test_util.h"
#include "testing/status_matchers.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace runloom {
namespace {

using ::runloom::testing::StatusIs;

constexpr char kNap[] = R"(
name: nap
steps:
  - {id: before, kind: noop, phase: start}
  - {id: nap, kind: sleep, duration: 10m, phase: rest}
  - {id: after, kind: noop, phase: end}
)";

struct Parked {
  std::string id;
  RunRecord run;
};

Parked StartToWait(Harness& h, const std::string& yaml) {
  auto wf = LoadWorkflowYaml(yaml, "nap.yaml");
  EXPECT_OK(wf);
  auto started = h.engine->StartRun({.workflow = *wf});
  EXPECT_OK(started);
  auto r = h.engine->ExecuteRun(started->run.id);
  EXPECT_OK(r);
  return {started->run.id, r.ok() ? *r : RunRecord{}};
}

TEST(Timers, ALongSleepParksTheRunAndTheSweeperWakesItWhenDue) {
  SimulatedClock clock;
  Harness h({}, &clock);
  Parked p = StartToWait(h, kNap);
  ASSERT_EQ(p.run.status, RunStatus::kWaiting);
  EXPECT_TRUE(p.run.lease_token.empty());
  ASSERT_TRUE(p.run.wake_at.has_value());
  EXPECT_EQ(*p.run.wake_at, clock.Now() + absl::Minutes(10));
  EXPECT_EQ(h.Steps(p.id).count("before"), 1u);
  EXPECT_EQ(h.Steps(p.id).count("nap"), 0u);  // not recorded until it is over
  std::vector<Event> events = h.Events(p.id);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().type, "run.waiting");
  EXPECT_EQ(events.back().data["step_path"], "nap");
  // Not leasable, not due: the sweeper leaves it.
  EXPECT_THAT(h.engine->ExecuteRun(p.id), StatusIs(absl::StatusCode::kFailedPrecondition));
  clock.Advance(absl::Minutes(9));
  ASSERT_OK(h.engine->SweepOnce());
  EXPECT_EQ(h.engine->store()->GetRun(p.id)->status, RunStatus::kWaiting);
  clock.Advance(absl::Minutes(1));
  // This sweep, or the engine's own timer thread (ExecuteRun started it, on
  // this clock), queues it: whichever comes first; the other finds it gone.
  ASSERT_OK(h.engine->SweepOnce());
  absl::StatusOr<RunRecord> queued = h.engine->store()->GetRun(p.id);
  ASSERT_OK(queued);
  EXPECT_EQ(queued->status, RunStatus::kQueued);
  EXPECT_EQ(queued->attempts, 0);  // the wait spent no attempt
  absl::StatusOr<RunRecord> done = h.engine->ExecuteRun(p.id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCompleted);
  std::map<std::string, StepRecord> steps = h.Steps(p.id);
  ASSERT_EQ(steps.count("nap"), 1u);
  EXPECT_EQ(steps["nap"].state, StepState::kSucceeded);
  EXPECT_EQ(steps["after"].state, StepState::kSucceeded);
  EXPECT_EQ(steps["before"].attempt, 1);  // not run again
}

// `until:` (a template giving an ISO 8601 time) parks until that time, on
// the store's clock; a time already past sleeps not at all.
TEST(Timers, ASleepUntilATimeParksUntilThenAndOneInThePastDoesNotWait) {
  SimulatedClock clock;
  Harness h({}, &clock);
  constexpr char kUntil[] = R"(
name: appointment
inputs:
  at: {type: string}
steps:
  - {id: nap, kind: sleep, until: "{{ inputs.at }}"}
  - {id: after, kind: noop}
)";
  auto wf = LoadWorkflowYaml(kUntil, "until.yaml");
  ASSERT_OK(wf);
  const absl::Time at = clock.Now() + absl::Minutes(10);
  const std::string text = absl::FormatTime("%Y-%m-%dT%H:%M:%E6S+01:00", at,
                                            absl::FixedTimeZone(3600));
  auto started = h.engine->StartRun({.workflow = *wf, .inputs = {{"at", text}}});
  ASSERT_OK(started);
  absl::StatusOr<RunRecord> parked = h.engine->ExecuteRun(started->run.id);
  ASSERT_OK(parked);
  ASSERT_EQ(parked->status, RunStatus::kWaiting);
  ASSERT_TRUE(parked->wake_at.has_value());
  EXPECT_EQ(*parked->wake_at, at);
  clock.Advance(absl::Minutes(10));
  ASSERT_OK(h.engine->SweepOnce());
  absl::StatusOr<RunRecord> done = h.engine->ExecuteRun(started->run.id);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCompleted);

  auto past = h.engine->StartRun(
      {.workflow = *wf, .inputs = {{"at", "2001-01-01T00:00:00Z"}}});
  ASSERT_OK(past);
  absl::StatusOr<RunRecord> at_once = h.engine->ExecuteRun(past->run.id);
  ASSERT_OK(at_once);
  EXPECT_EQ(at_once->status, RunStatus::kCompleted);
  for (const Event& e : h.Events(past->run.id)) EXPECT_NE(e.type, "run.waiting");

  auto bad = h.engine->StartRun({.workflow = *wf, .inputs = {{"at", "tomorrow"}}});
  ASSERT_OK(bad);
  absl::StatusOr<RunRecord> failed = h.engine->ExecuteRun(bad->run.id);
  ASSERT_OK(failed);
  EXPECT_EQ(failed->status, RunStatus::kFailed);
  EXPECT_THAT(h.Steps(bad->run.id)["nap"].error, ::testing::HasSubstr("bad time 'tomorrow'"));
}

TEST(Timers, ShortSleepsAndSleepsInAParallelBranchSleepInPlace) {
  EngineOptions o;
  o.park_sleeps_over = absl::Milliseconds(200);
  Harness h(o);
  RunRecord r = h.RunYaml(R"(
name: short
steps:
  - {id: nap, kind: sleep, duration: 20ms}
  - id: both
    kind: parallel
    branches:
      - {name: a, steps: [{id: long, kind: sleep, duration: 300ms}]}
      - {name: b, steps: [{id: quick, kind: noop}]}
)");
  EXPECT_EQ(r.status, RunStatus::kCompleted);
  for (const Event& e : h.Events(r.id)) EXPECT_NE(e.type, "run.waiting");
}

TEST(Timers, CancelAndRerunActOnAWaitingRunAtOnce) {
  SimulatedClock clock;
  Harness h({}, &clock);
  Parked a = StartToWait(h, kNap);
  ASSERT_EQ(a.run.status, RunStatus::kWaiting);
  absl::StatusOr<RunRecord> cancelled = h.engine->Cancel(a.id, "tester");
  ASSERT_OK(cancelled);
  EXPECT_EQ(cancelled->status, RunStatus::kCancelled);
  clock.Advance(absl::Minutes(11));
  ASSERT_OK(h.engine->SweepOnce());
  EXPECT_EQ(h.engine->store()->GetRun(a.id)->status, RunStatus::kCancelled);

  Parked b = StartToWait(h, kNap);
  ASSERT_EQ(b.run.status, RunStatus::kWaiting);
  absl::StatusOr<RunRecord> rerun = h.engine->Rerun(b.id, "start", "", "tester");
  ASSERT_OK(rerun);
  EXPECT_EQ(rerun->status, RunStatus::kQueued);
  EXPECT_EQ(rerun->revision, 2);
  // The new revision sleeps again: its timer is not the old one's.
  absl::StatusOr<RunRecord> again = h.engine->ExecuteRun(b.id);
  ASSERT_OK(again);
  EXPECT_EQ(again->status, RunStatus::kWaiting);
  EXPECT_EQ(*again->wake_at, clock.Now() + absl::Minutes(10));
}

}  // namespace
}  // namespace runloom
