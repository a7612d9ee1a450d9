// The deterministic simulation (src/sim/sim.h, docs/reliability.md): one
// seed replays byte for byte; a bounded campaign holds every invariant; and
// each bug injected on purpose (core/injected_bug.h) is caught within the
// seeds this test runs.
#include "sim/sim.h"

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace runloom::sim {
namespace {

// The seeds the test command runs. The long campaign's figures are in
// docs/reliability.md (runloom-sim --seed 1 --seeds 100000).
constexpr uint64_t kSeeds = 300;
// The campaign's seeds under a sanitizer (the ASan and TSan builds, about 7
// times slower): what they are for is memory and thread errors, which the
// first 100 seeds' paths show; the Release build runs all kSeeds.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr uint64_t kCampaignSeeds = 100;
#else
constexpr uint64_t kCampaignSeeds = kSeeds;
#endif

// Where each injected bug was caught (runloom-sim --seed 1 --seeds 300
// --bug NAME): that seed is tried first, so that a bug costs one seed and
// not every seed before it (write_key_ignores_decision: 123 s under ASan in
// seed order). Only an order, as check_model.py's MUTANT_CAUGHT_IN: a bug
// caught at another seed within kSeeds is caught all the same, and a bug
// missing here is searched in seed order.
uint64_t CaughtAt(InjectedBug bug) {
  const std::string name(ToString(bug));
  if (name == "rerun_keeps_cancel") return 285;
  if (name == "catalog_error_fails_run") return 134;
  if (name == "park_ignores_mailbox") return 50;
  if (name == "lease_ignores_concurrency_limit") return 43;
  if (name == "write_key_ignores_decision") return 19;
  if (name == "store_skips_token_check") return 17;
  if (name == "release_frees_unsettled_calls") return 10;
  if (name == "lost_answer_booked_free") return 8;
  if (name == "reservation_kept_on_takeover") return 6;
  if (name == "write_intent_not_recorded") return 5;
  if (name == "lease_taken_while_live") return 4;
  if (name == "timer_due_early") return 3;
  if (name == "child_key_per_execution") return 3;
  if (name == "cap_publish_ignores_lease") return 2;
  if (name == "default_timeout_ignored") return 2;
  return 1;
}

std::string Tail(const SimResult& r) {
  const size_t n = r.history.size();
  std::string out;
  for (size_t i = n > 40 ? n - 40 : 0; i < n; ++i) out += r.history[i] + "\n";
  return out;
}

TEST(Simulation, OneSeedReplaysByteForByte) {
  for (uint64_t seed : {7u, 42u}) {
    SimResult a = RunSimulation({.seed = seed});
    SimResult b = RunSimulation({.seed = seed});
    ASSERT_TRUE(a.ok()) << a.violation << "\n" << Tail(a);
    EXPECT_GT(a.runs, 0);
    EXPECT_GT(a.operations, 0);
    EXPECT_EQ(absl::StrJoin(a.history, "\n"), absl::StrJoin(b.history, "\n")) << "seed " << seed;
    EXPECT_EQ(a.operations, b.operations);
  }
}

TEST(Simulation, EverySeedHoldsEveryInvariant) {
  int64_t runs = 0, crashes = 0, faults = 0, ended = 0, kept = 0, resolved = 0, scheduled = 0,
          children = 0;
  int64_t keyed = 0, over_limit = 0, pruned = 0, ended_early = 0, crashed_holding_many = 0;
  int most_held = 0;
  for (uint64_t seed = 1; seed <= kCampaignSeeds; ++seed) {
    SimResult r = RunSimulation({.seed = seed});
    ASSERT_TRUE(r.ok()) << "seed " << seed << ": " << r.violation << "\n"
                        << Tail(r) << "replay: runloom-sim --seed " << seed << " --history";
    runs += r.runs;
    crashes += r.crashes;
    faults += r.faults;
    ended += r.runs_ended + r.runs_at_gate + r.runs_at_wait;
    kept += r.signals_kept;
    resolved += r.signals_resolved;
    scheduled += r.schedule_runs;
    children += r.child_runs;
    keyed += r.keyed_leases;
    over_limit += r.over_limit;
    pruned += r.runs_pruned;
    ended_early += r.leases_ended;
    most_held = std::max(most_held, r.most_held);
    crashed_holding_many += r.crashes_holding_many;
  }
  // Not vacuous: the campaign started runs, crashed processes, injected
  // faults, sent signals that waits consumed (some resolving a resting
  // wait, some kept until the run reached its wait), and brought every run
  // to rest.
  EXPECT_GT(runs, static_cast<int64_t>(kCampaignSeeds));
  EXPECT_GT(crashes, static_cast<int64_t>(kCampaignSeeds));
  EXPECT_GT(faults, static_cast<int64_t>(kCampaignSeeds));
  EXPECT_EQ(ended, runs);
  EXPECT_GT(resolved, 0);
  EXPECT_GT(scheduled, 0);  // schedules fired (a third of the seeds has one)
  EXPECT_GT(children, 0);   // run steps started children (a third of the seeds)
  EXPECT_GT(kept, resolved);
  EXPECT_GT(keyed, 0);       // runs with a concurrency key ran (half the workflows have one)
  // And some lease found its key full: a rare path (seeds 206, 241 and 293 of
  // the 300, measured on 634838e), so only the Release build's campaign,
  // which runs all of them, can require it.
  if (kCampaignSeeds == kSeeds) {
    EXPECT_GT(over_limit, 0);
  }
  EXPECT_GT(pruned, 0);      // retention deleted finished runs (issue 25), each seen finished
  EXPECT_GT(ended_early, 0);  // a restarted life ended its dead predecessor's leases (issue 27)
  // Runs in flight (issue 27): some life held more runs at once than any
  // process has executors (2), and some crashed holding them.
  EXPECT_GT(most_held, 2);
  EXPECT_GT(crashed_holding_many, 0);
}

class InjectedBugCaught : public ::testing::TestWithParam<InjectedBug> {};

TEST_P(InjectedBugCaught, WithinTheTestSeeds) {
#ifndef RUNLOOM_TESTING
  GTEST_SKIP() << "injected bugs are compiled only with RUNLOOM_TESTING (the ASan build)";
#endif
  const uint64_t first = CaughtAt(GetParam());
  for (uint64_t i = 0; i < kSeeds; ++i) {
    const uint64_t seed = (first - 1 + i) % kSeeds + 1;  // first, ..., kSeeds, 1, ..., first - 1
    SimResult r = RunSimulation({.seed = seed, .bugs = {GetParam()}});
    if (!r.ok()) {
      SUCCEED() << ToString(GetParam()) << " caught at seed " << seed << ": " << r.violation;
      return;
    }
  }
  FAIL() << ToString(GetParam()) << " was not caught in seeds 1.." << kSeeds;
}

INSTANTIATE_TEST_SUITE_P(Simulation, InjectedBugCaught, ::testing::ValuesIn(AllInjectedBugs()),
                         [](const ::testing::TestParamInfo<InjectedBug>& info) {
                           return std::string(ToString(info.param));
                         });

}  // namespace
}  // namespace runloom::sim
