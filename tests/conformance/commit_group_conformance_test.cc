// Concurrent fenced commits on many runs (which a backend may apply in one
// group transaction, as PostgreSQL's PgCommitGroup and SQLite's WriteQueue
// do): every write gets its own outcome, a stale one is refused alone.
#include "conformance_fixture.h"

#include <set>
#include <thread>

namespace runloom::conformance {
namespace {

using ::runloom::testing::IsOkAndHolds;
using ::runloom::testing::StatusIs;
using ::testing::SizeIs;

constexpr int kRuns = 24;
constexpr int kRounds = 3;

class CommitGroupConformanceTest : public ConformanceTest {
 protected:
  // `base` plus one succeeded step record and its event.
  static RunWrite StepWrite(const RunWrite& base, int round) {
    RunWrite w = base;
    StepRecord s;
    s.path = absl::StrCat("step", round);
    s.step_id = s.path;
    s.state = StepState::kSucceeded;
    w.steps = {s};
    w.events = {Ev("step.finished", {{"path", s.path}})};
    return w;
  }
};

TEST_P(CommitGroupConformanceTest, ConcurrentCommitsEachGetTheirOwnOutcome) {
  std::vector<Lease> leases(kRuns);
  std::vector<std::string> ids;
  for (int i = 0; i < kRuns; ++i) ids.push_back(DriveTo(RunStatus::kRunning, &leases[i]));
  std::vector<RunWrite> bases;
  for (int i = 0; i < kRuns; ++i) bases.push_back(ExecutorWrite(leases[i]));
  // Every third run's writer holds a stale token, and run 5 is missing.
  for (int i = 0; i < kRuns; i += 3) bases[i].lease_token = "stale";
  bases[5].run_id = "r_missing";
  std::vector<std::vector<absl::Status>> got(kRuns, std::vector<absl::Status>(kRounds));
  std::vector<std::thread> threads;
  for (int i = 0; i < kRuns; ++i) {
    threads.emplace_back([&, i] {
      for (int round = 0; round < kRounds; ++round) {
        got[i][round] = store_->Commit(StepWrite(bases[i], round));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kRuns; ++i) {
    for (int round = 0; round < kRounds; ++round) {
      if (i == 5) {
        EXPECT_THAT(got[i][round], StatusIs(absl::StatusCode::kNotFound));
      } else if (i % 3 == 0) {
        EXPECT_THAT(got[i][round], StatusIs(absl::StatusCode::kAborted)) << i;
      } else {
        EXPECT_OK(got[i][round]) << i;
      }
    }
    const bool kept = i != 5 && i % 3 != 0;
    // DriveTo's two events, then one per kept write, in order.
    EXPECT_THAT(store_->ListEvents(ids[i], 0, 0), IsOkAndHolds(SizeIs(kept ? 2 + kRounds : 2)));
    EXPECT_THAT(store_->ListSteps(ids[i], std::nullopt), IsOkAndHolds(SizeIs(kept ? kRounds : 0)));
    absl::StatusOr<RunRecord> r = store_->GetRun(ids[i]);
    ASSERT_OK(r);
    EXPECT_EQ(r->status, RunStatus::kRunning);
    EXPECT_EQ(r->last_event_seq, kept ? 2 + kRounds : 2);
  }
}

TEST_P(CommitGroupConformanceTest, ConcurrentTerminalWritesReleaseEachRun) {
  std::vector<Lease> leases(kRuns);
  std::vector<std::string> ids;
  for (int i = 0; i < kRuns; ++i) ids.push_back(DriveTo(RunStatus::kRunning, &leases[i]));
  std::vector<absl::Status> got(kRuns);
  std::vector<std::thread> threads;
  for (int i = 0; i < kRuns; ++i) {
    threads.emplace_back([&, i] {
      RunWrite w = ExecutorWrite(leases[i]);
      w.new_status = RunStatus::kCompleted;
      w.outcome = absl::StrCat("done", i);
      w.events = {Ev("run.finished", {{"status", "completed"}})};
      got[i] = store_->Commit(w);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kRuns; ++i) {
    EXPECT_OK(got[i]);
    absl::StatusOr<RunRecord> r = store_->GetRun(ids[i]);
    ASSERT_OK(r);
    EXPECT_EQ(r->status, RunStatus::kCompleted);
    EXPECT_EQ(r->outcome, absl::StrCat("done", i));
    EXPECT_EQ(r->lease_token, "");
    EXPECT_EQ(r->last_event_seq, 3);
  }
}

// Concurrent admissions (which PostgreSQL's PgAdmitGroup applies in one
// statement): each gets its own outcome; one whose id is taken is refused
// alone, and every other run has its row, its events and its one message.
TEST_P(CommitGroupConformanceTest, ConcurrentAdmissionsEachGetTheirOwnOutcome) {
  const std::string taken = Create();
  ASSERT_THAT(ClaimAll("first"), SizeIs(1));
  std::vector<std::vector<NewRun>> runs(kRuns);
  for (int i = 0; i < kRuns; ++i) {
    for (int round = 0; round < kRounds; ++round) runs[i].push_back(MakeRun());
  }
  runs[7][1].id = taken;
  std::vector<std::vector<absl::Status>> got(kRuns, std::vector<absl::Status>(kRounds));
  std::vector<std::thread> threads;
  for (int i = 0; i < kRuns; ++i) {
    threads.emplace_back([&, i] {
      for (int round = 0; round < kRounds; ++round) {
        got[i][round] =
            store_->CreateRun(runs[i][round], {Ev("run.created"), Ev("run.queued", {{"n", i}})})
                .status();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::set<std::string> created;
  for (int i = 0; i < kRuns; ++i) {
    for (int round = 0; round < kRounds; ++round) {
      const std::string& id = runs[i][round].id;
      if (id == taken) {
        EXPECT_THAT(got[i][round], StatusIs(absl::StatusCode::kAlreadyExists));
        continue;
      }
      EXPECT_OK(got[i][round]) << id;
      created.insert(id);
      absl::StatusOr<std::vector<Event>> events = store_->ListEvents(id, 0, 0);
      ASSERT_OK(events);
      ASSERT_THAT(*events, SizeIs(2));
      EXPECT_EQ((*events)[0].type, "run.created");
      EXPECT_EQ((*events)[1].seq, 2);
      EXPECT_EQ((*events)[1].data, (nlohmann::json{{"n", i}}));
      EXPECT_EQ(StatusOf(id), RunStatus::kQueued);
    }
  }
  EXPECT_THAT(created, SizeIs(kRuns * kRounds - 1));
  // The taken id's run is untouched: its one event, no second message.
  EXPECT_THAT(store_->ListEvents(taken, 0, 0), IsOkAndHolds(SizeIs(1)));
  std::set<std::string> messages;
  for (const QueueMessage& m : ClaimAll("second")) {
    EXPECT_TRUE(messages.insert(m.run_id).second) << "two messages for " << m.run_id;
  }
  EXPECT_EQ(messages, created);
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Backends, CommitGroupConformanceTest,
                         ::testing::ValuesIn(AllBackendsUnderTest()), FactoryName);

}  // namespace runloom::conformance
