// Schedules (issue 23): a new schedule is checked field by field; each tick
// starts exactly one run however many engines fire it; the catch-up and
// overlap policies. Time is a SimulatedClock shared by the engines (the
// store's clock), so a tick is due exactly when the test says.
#include "testing/engine_test_util.h"
#include "testing/status_matchers.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <algorithm>
#include <set>
#include <thread>

namespace runloom {
namespace {

using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kReport[] = R"(
name: report
inputs:
  scope: {type: string, default: all}
  token: {type: string, secret: true, required: false}
steps:
  - {id: a, kind: noop}
)";

// Engines on one SQLite file and one clock, as processes sharing a
// database; none runs background threads, so the test decides who fires.
struct Processes {
  explicit Processes(int n) {
    const std::string path = TempDb();
    for (int i = 0; i < n; ++i) engines.push_back(OpenSharedTestEngine(path, &clock));
    absl::StatusOr<Workflow> wf = LoadWorkflowYaml(kReport, "report.yaml");
    EXPECT_OK(wf);
    EXPECT_OK(engines[0]->RegisterWorkflow(*wf).status());
  }

  // Every run of `report`, oldest first.
  std::vector<RunRecord> Runs() {
    std::vector<RunRecord> out;
    RunFilter f;
    f.workflow_name = "report";
    f.limit = 1000;
    for (;;) {
      absl::StatusOr<std::vector<RunRecord>> page = engines[0]->store()->ListRuns(f);
      EXPECT_OK(page);
      if (!page.ok() || page->empty()) break;
      out.insert(out.end(), page->begin(), page->end());
      f.after = RunPosition{.created_at = page->back().created_at, .id = page->back().id};
    }
    std::reverse(out.begin(), out.end());
    return out;
  }

  SimulatedClock clock;
  std::vector<std::unique_ptr<Engine>> engines;
};

ScheduleRequest Every(const std::string& cron) {
  ScheduleRequest r;
  r.id = "rep";
  r.workflow = "report";
  r.cron = cron;
  return r;
}

TEST(Schedules, ANewScheduleIsCheckedFieldByFieldAndNothingBadIsKept) {
  Processes p(1);
  Engine& e = *p.engines[0];
  auto refused = [&](ScheduleRequest r, absl::StatusCode code, const std::string& says) {
    absl::Status s = e.CreateSchedule(r).status();
    EXPECT_THAT(s, StatusIs(code)) << says;
    EXPECT_THAT(std::string(s.message()), HasSubstr(says));
  };
  ScheduleRequest r = Every("0 3 * * *");
  r.id = "no spaces";
  refused(r, absl::StatusCode::kInvalidArgument, "id:");
  refused(Every("0 3 32 * *"), absl::StatusCode::kInvalidArgument, "cron: cron field 3");
  r = Every("0 3 * * *");
  r.timezone = "Europe/Pariss";
  refused(r, absl::StatusCode::kInvalidArgument, "timezone: time zone 'Europe/Pariss' is unknown");
  r = Every("0 3 * * *");
  r.overlap = "sometimes";
  refused(r, absl::StatusCode::kInvalidArgument, "overlap: 'sometimes'");
  r = Every("0 3 * * *");
  r.catch_up = "most";
  refused(r, absl::StatusCode::kInvalidArgument, "catch_up: 'most'");
  r = Every("0 3 * * *");
  r.workflow = "nope";
  refused(r, absl::StatusCode::kNotFound, "workflow: 'nope' is not in the catalog");
  r = Every("0 3 * * *");
  r.inputs = {{"unknown", 1}};
  refused(r, absl::StatusCode::kInvalidArgument, "inputs:");
  r = Every("0 3 * * *");
  r.inputs = {{"token", "s3cret"}};
  refused(r, absl::StatusCode::kInvalidArgument, "inputs.token: is secret");
  EXPECT_THAT(e.ListSchedules("", 10), ::runloom::testing::IsOkAndHolds(::testing::IsEmpty()));

  r = Every("0 3 * * *");
  r.timezone = "Europe/Paris";
  r.inputs = {{"token", "secret://REPORT_TOKEN"}};
  absl::StatusOr<ScheduleRecord> made = e.CreateSchedule(r);
  ASSERT_OK(made);
  EXPECT_GT(made->next_fire_at, p.clock.Now());  // 03:00 in Paris, the first after now
  EXPECT_LE(made->next_fire_at, p.clock.Now() + absl::Hours(24));
  EXPECT_EQ(absl::ToCivilMinute(made->next_fire_at, absl::FixedTimeZone(0)).minute(), 0);
  refused(r, absl::StatusCode::kAlreadyExists, "schedule rep already exists");
}

// Issue 23, acceptance 3: three processes fire a 1-second schedule for
// 1,000 ticks, each tick at the same moment in all three: exactly 1,000
// runs, one per tick.
TEST(Schedules, ThreeProcessesFiringOneSecondTicksStartExactlyOneRunPerTick) {
  Processes p(3);
  ScheduleRequest r = Every("* * * * * *");
  r.overlap = "allow";
  ASSERT_OK(p.engines[0]->CreateSchedule(r));
  constexpr int kTicks = 1000;
  for (int tick = 0; tick < kTicks; ++tick) {
    p.clock.Advance(absl::Seconds(1));
    std::vector<std::thread> firing;
    for (auto& e : p.engines) {
      firing.emplace_back([&e] { EXPECT_OK(e->FireSchedulesOnce().status()); });
    }
    for (std::thread& t : firing) t.join();
  }
  std::vector<RunRecord> runs = p.Runs();
  ASSERT_EQ(runs.size(), static_cast<size_t>(kTicks));
  std::set<std::string> keys;
  for (const RunRecord& run : runs) keys.insert(run.idempotency_key);
  EXPECT_EQ(keys.size(), static_cast<size_t>(kTicks));  // one run per tick, no tick twice
  absl::StatusOr<ScheduleRecord> s = p.engines[0]->GetSchedule("rep");
  ASSERT_OK(s);
  EXPECT_GT(s->next_fire_at, p.clock.Now());
  RecordProperty("runs", static_cast<int>(runs.size()));
}

// After a downtime: `latest` fires the last tick missed, `all` each (up to
// its bound), `none` none; the next tick is the first after now.
TEST(Schedules, CatchUpAfterDowntimeFiresTheLatestTickAllOrNone) {
  for (const char* policy : {"latest", "all", "none"}) {
    Processes p(1);
    ScheduleRequest r = Every("* * * * *");  // every minute
    r.catch_up = policy;
    r.overlap = "allow";
    ASSERT_OK(p.engines[0]->CreateSchedule(r));
    p.clock.Advance(absl::Minutes(10) + absl::Seconds(30));
    ASSERT_OK(p.engines[0]->FireSchedulesOnce());
    const size_t want = std::string(policy) == "latest" ? 1 : std::string(policy) == "all" ? 10 : 0;
    EXPECT_EQ(p.Runs().size(), want) << policy;
    absl::StatusOr<ScheduleRecord> s = p.engines[0]->GetSchedule("rep");
    ASSERT_OK(s);
    EXPECT_GT(s->next_fire_at, p.clock.Now()) << policy;
    EXPECT_LE(s->next_fire_at, p.clock.Now() + absl::Minutes(1)) << policy;
    // On time again: the next tick fires whatever the policy.
    p.clock.Advance(absl::Minutes(1));
    ASSERT_OK(p.engines[0]->FireSchedulesOnce());
    EXPECT_EQ(p.Runs().size(), want + 1) << policy;
  }
}

// The previous run unfinished (nobody executes these): `skip` starts
// nothing, `allow` starts another, `cancel` cancels it and starts another.
TEST(Schedules, OverlapSkipsAllowsOrCancelsTheUnfinishedPreviousRun) {
  for (const char* policy : {"skip", "allow", "cancel"}) {
    Processes p(1);
    ScheduleRequest r = Every("* * * * *");
    r.overlap = policy;
    ASSERT_OK(p.engines[0]->CreateSchedule(r));
    p.clock.Advance(absl::Minutes(1));
    ASSERT_OK(p.engines[0]->FireSchedulesOnce());
    ASSERT_EQ(p.Runs().size(), 1u) << policy;
    const std::string first = p.Runs()[0].id;
    p.clock.Advance(absl::Minutes(1));
    ASSERT_OK(p.engines[0]->FireSchedulesOnce());
    std::vector<RunRecord> runs = p.Runs();
    const std::string pol = policy;
    EXPECT_EQ(runs.size(), pol == "skip" ? 1u : 2u) << policy;
    EXPECT_EQ(p.engines[0]->store()->GetRun(first)->status,
              pol == "cancel" ? RunStatus::kCancelled : RunStatus::kQueued)
        << policy;
    absl::StatusOr<ScheduleRecord> s = p.engines[0]->GetSchedule("rep");
    ASSERT_OK(s);
    EXPECT_EQ(s->last_run_id, runs.back().id) << policy;
  }
}

// A tick whose run the engine refuses (the workflow's latest version has no
// input the schedule gives) is skipped, not retried forever; the
// next tick fires when the run can be made again.
TEST(Schedules, ATickWhoseRunIsRefusedIsSkipped) {
  Processes p(1);
  Engine& e = *p.engines[0];
  ScheduleRequest r = Every("* * * * *");
  r.inputs = {{"scope", "weekly"}};
  ASSERT_OK(e.CreateSchedule(r));
  absl::StatusOr<Workflow> v2 =  // no input `scope` any more
      LoadWorkflowYaml("name: report\nsteps:\n  - {id: a, kind: noop}\n", "report.yaml");
  ASSERT_OK(v2);
  ASSERT_OK(e.RegisterWorkflow(*v2));
  p.clock.Advance(absl::Minutes(1));
  EXPECT_THAT(e.FireSchedulesOnce(), ::runloom::testing::IsOkAndHolds(0));
  absl::StatusOr<ScheduleRecord> s = e.GetSchedule("rep");
  ASSERT_OK(s);
  EXPECT_GT(s->next_fire_at, p.clock.Now());  // skipped, not stuck
  EXPECT_TRUE(p.Runs().empty());
  absl::StatusOr<Workflow> v3 = LoadWorkflowYaml(kReport, "report.yaml");
  ASSERT_OK(v3);
  v3->steps[0].id = "b";  // a new version that takes the schedule's inputs again
  ASSERT_OK(e.RegisterWorkflow(*v3));
  p.clock.Advance(absl::Minutes(1));
  EXPECT_THAT(e.FireSchedulesOnce(), ::runloom::testing::IsOkAndHolds(1));
}

// Paused, no tick fires; resumed, the ticks passed meanwhile are not caught
// up; deleted, nothing fires and its runs stay.
TEST(Schedules, PauseResumeAndDelete) {
  Processes p(1);
  Engine& e = *p.engines[0];
  ScheduleRequest r = Every("* * * * *");
  r.catch_up = "all";
  r.overlap = "allow";
  ASSERT_OK(e.CreateSchedule(r));
  ASSERT_OK(e.PauseSchedule("rep"));
  p.clock.Advance(absl::Minutes(5));
  ASSERT_OK(e.FireSchedulesOnce());
  EXPECT_TRUE(p.Runs().empty());
  absl::StatusOr<ScheduleRecord> resumed = e.ResumeSchedule("rep");
  ASSERT_OK(resumed);
  EXPECT_FALSE(resumed->paused);
  EXPECT_GT(resumed->next_fire_at, p.clock.Now());
  ASSERT_OK(e.FireSchedulesOnce());
  EXPECT_TRUE(p.Runs().empty());
  p.clock.Advance(absl::Minutes(1));
  ASSERT_OK(e.FireSchedulesOnce());
  EXPECT_EQ(p.Runs().size(), 1u);
  ASSERT_OK(e.DeleteSchedule("rep"));
  EXPECT_THAT(e.DeleteSchedule("rep"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(e.PauseSchedule("rep"), StatusIs(absl::StatusCode::kNotFound));
  p.clock.Advance(absl::Minutes(1));
  ASSERT_OK(e.FireSchedulesOnce());
  EXPECT_EQ(p.Runs().size(), 1u);
}

}  // namespace
}  // namespace runloom
