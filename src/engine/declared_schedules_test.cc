// Declared schedules (a workflow's `schedules:`, DeclaredSchedules): each
// registration brings the stored schedules "workflow:<name>:<entry>" in step
// with the workflow's latest catalog version, once however many processes
// register the file at the same moment, and each tick of such a schedule
// starts one run however many processes fire it.
#include "testing/engine_test_util.h"
#include "testing/status_matchers.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <set>
#include <thread>

namespace runloom {
namespace {

using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kDigest[] = R"(
name: digest
inputs:
  region: {type: string, default: eu}
steps:
  - {id: a, kind: noop}
schedules:
  - {name: minutely, cron: "* * * * *", inputs: {region: us}, overlap: allow}
  - {cron: "0 2 * * *", timezone: Europe/Paris}
)";

Workflow MustLoad(const std::string& yaml) {
  absl::StatusOr<Workflow> wf = LoadWorkflowYaml(yaml, "digest.yaml");
  EXPECT_OK(wf);
  return wf.ok() ? *std::move(wf) : Workflow{};
}

// Processes on one SQLite file and one clock; none runs background threads.
struct SharedDb {
  SharedDb() : path(TempDb()) {}

  std::unique_ptr<Engine> Open() { return OpenSharedTestEngine(path, &clock); }

  std::vector<ScheduleRecord> Schedules(Engine& e) {
    absl::StatusOr<std::vector<ScheduleRecord>> all = e.ListSchedules("", 100);
    EXPECT_OK(all);
    return all.ok() ? *all : std::vector<ScheduleRecord>{};
  }

  const std::string path;
  SimulatedClock clock;
};

std::vector<std::string> Ids(const std::vector<ScheduleRecord>& all) {
  std::vector<std::string> out;
  for (const ScheduleRecord& s : all) out.push_back(s.id);
  return out;
}

// Two processes registering the same file at once store each declared
// schedule once; both fire every tick, and each tick starts one run.
TEST(DeclaredSchedules, TwoProcessesRegisteringTheFileStoreOneScheduleAndFireEachTickOnce) {
  SharedDb db;
  std::vector<std::unique_ptr<Engine>> engines;
  engines.push_back(db.Open());
  engines.push_back(db.Open());
  const Workflow wf = MustLoad(kDigest);
  std::vector<std::thread> registering;
  for (auto& e : engines) {
    registering.emplace_back([&e, &wf] { EXPECT_OK(e->RegisterWorkflow(wf).status()); });
  }
  for (std::thread& t : registering) t.join();
  std::vector<ScheduleRecord> all = db.Schedules(*engines[0]);
  EXPECT_THAT(Ids(all), ::testing::ElementsAre("workflow:digest:1", "workflow:digest:minutely"));
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].timezone, "Europe/Paris");
  EXPECT_EQ(all[0].overlap, "skip");
  EXPECT_EQ(all[1].inputs, (nlohmann::json{{"region", "us"}}));
  EXPECT_EQ(all[1].overlap, "allow");

  constexpr int kTicks = 30;
  for (int tick = 0; tick < kTicks; ++tick) {
    db.clock.Advance(absl::Minutes(1));
    std::vector<std::thread> firing;
    for (auto& e : engines) {
      firing.emplace_back([&e] { EXPECT_OK(e->FireSchedulesOnce().status()); });
    }
    for (std::thread& t : firing) t.join();
  }
  RunFilter f;
  f.workflow_name = "digest";
  f.limit = 1000;
  absl::StatusOr<std::vector<RunRecord>> runs = engines[0]->store()->ListRuns(f);
  ASSERT_OK(runs);
  std::set<std::string> keys;
  for (const RunRecord& r : *runs) {
    if (absl::StartsWith(r.idempotency_key, "schedule:workflow:digest:minutely:")) {
      keys.insert(r.idempotency_key);
    }
  }
  // The 02:00 Paris schedule fires at most once in 30 minutes; the
  // minutely one once a tick.
  EXPECT_EQ(keys.size(), static_cast<size_t>(kTicks));
  EXPECT_LE(runs->size(), static_cast<size_t>(kTicks + 1));
}

// Registering again writes nothing; a new version replaces what changed
// (keeping an operator's pause), adds what is new and deletes what it no
// longer declares; an older file registered later does not turn it back.
TEST(DeclaredSchedules, TheStoredSchedulesFollowTheLatestVersion) {
  SharedDb db;
  std::unique_ptr<Engine> a = db.Open();
  ASSERT_OK(a->RegisterWorkflow(MustLoad(kDigest)));
  ASSERT_OK(a->PauseSchedule("workflow:digest:minutely"));
  absl::StatusOr<ScheduleRecord> nightly = a->GetSchedule("workflow:digest:1");
  ASSERT_OK(nightly);
  db.clock.Advance(absl::Seconds(10));
  std::unique_ptr<Engine> b = db.Open();  // another process, same file
  ASSERT_OK(b->RegisterWorkflow(MustLoad(kDigest)));
  absl::StatusOr<ScheduleRecord> again = b->GetSchedule("workflow:digest:1");
  ASSERT_OK(again);
  EXPECT_EQ(again->updated_at, nightly->updated_at);  // nothing written
  EXPECT_TRUE(b->GetSchedule("workflow:digest:minutely")->paused);

  // v2: the minutely entry every 5 minutes, the unnamed one gone, a new one.
  std::string v2 = kDigest;
  v2.replace(v2.find("\"* * * * *\""), 11, "\"*/5 * * * *\"");
  v2.replace(v2.find("  - {cron: \"0 2"), std::string::npos,
             "  - {name: weekly, cron: \"0 6 * * MON\"}\n");
  ASSERT_OK(b->RegisterWorkflow(MustLoad(v2)));
  std::vector<ScheduleRecord> all = db.Schedules(*b);
  EXPECT_THAT(Ids(all),
              ::testing::ElementsAre("workflow:digest:minutely", "workflow:digest:weekly"));
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].cron, "*/5 * * * *");
  EXPECT_TRUE(all[0].paused);  // the pause outlives the change

  // An old file run again (by a fresh process) registers the old version,
  // which is not the latest: the schedules stay v2's.
  std::unique_ptr<Engine> c = db.Open();
  absl::StatusOr<WorkflowVersion> old = c->RegisterWorkflow(MustLoad(kDigest));
  ASSERT_OK(old);
  EXPECT_EQ(old->version, 1);
  EXPECT_THAT(Ids(db.Schedules(*c)),
              ::testing::ElementsAre("workflow:digest:minutely", "workflow:digest:weekly"));

  // Deleted through the API, a declared schedule is back when a process
  // that has not applied this version registers the workflow.
  ASSERT_OK(c->DeleteSchedule("workflow:digest:weekly"));
  std::unique_ptr<Engine> d = db.Open();
  ASSERT_OK(d->RegisterWorkflow(MustLoad(v2)));
  EXPECT_OK(d->GetSchedule("workflow:digest:weekly"));

  // v3 declares none: every declared schedule of `digest` goes; one
  // created by hand stays.
  ScheduleRequest by_hand{.id = "by-hand", .workflow = "digest", .cron = "@daily"};
  ASSERT_OK(d->CreateSchedule(by_hand));
  std::string v3 = v2.substr(0, v2.find("schedules:"));
  ASSERT_OK(d->RegisterWorkflow(MustLoad(v3)));
  EXPECT_THAT(Ids(db.Schedules(*d)), ::testing::ElementsAre("by-hand"));
}

TEST(DeclaredSchedules, TheirIdsAreNotForScheduleCreate) {
  SharedDb db;
  std::unique_ptr<Engine> e = db.Open();
  ASSERT_OK(e->RegisterWorkflow(MustLoad(kDigest)));
  ScheduleRequest r{.id = "workflow:digest:mine", .workflow = "digest", .cron = "@daily"};
  EXPECT_THAT(e->CreateSchedule(r), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("id: 'workflow:digest:mine' starts with "
                                                       "'workflow:', which is kept for")));
}

}  // namespace
}  // namespace runloom
