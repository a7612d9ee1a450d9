// The run state machine checked against two things outside itself: the golden
// copy tests/golden/transitions.txt (so that no transition is added or removed
// by accident), and the invariants of reference 003.
#include "runloom/status.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace runloom {
namespace {

constexpr RunStatus kAllStatuses[] = {
    RunStatus::kQueued,        RunStatus::kRunning,  RunStatus::kPaused,     RunStatus::kWaiting,
    RunStatus::kCompleted,     RunStatus::kRejected, RunStatus::kUnresolved, RunStatus::kFailed,
    RunStatus::kBudgetStopped, RunStatus::kCancelled};
constexpr Party kAllParties[] = {Party::kAdmission, Party::kExecutor, Party::kSweeper,
                                 Party::kDecision,  Party::kCancel,   Party::kRerun,
                                 Party::kAdmin,     Party::kTimer,    Party::kSignal};

std::string GoldenPath() {
  const char* dir = std::getenv("RUNLOOM_SOURCE_DIR");
  return std::string(dir != nullptr ? dir : RUNLOOM_SOURCE_DIR_DEFAULT) +
         "/tests/golden/transitions.txt";
}

// One row as the golden file writes it, columns separated by single spaces.
std::string Row(const Transition& t) {
  return absl::StrFormat("%s %s %s %s", t.from ? ToString(*t.from) : "-", ToString(t.to),
                         ToString(t.party), t.needs_lease_token ? "must match" : "-");
}

// The golden file's rows, whitespace runs collapsed, comments dropped.
std::vector<std::string> GoldenRows() {
  std::ifstream in(GoldenPath());
  EXPECT_TRUE(in.good()) << "cannot read " << GoldenPath();
  std::vector<std::string> rows;
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text.front() == '#') continue;
    rows.push_back(absl::StrJoin(absl::StrSplit(text, ' ', absl::SkipEmpty()), " "));
  }
  return rows;
}

std::vector<std::string> TableRows() {
  std::vector<std::string> rows;
  for (const Transition& t : TransitionTable()) rows.push_back(Row(t));
  return rows;
}

TEST(Transitions, TableMatchesGoldenFile) {
  std::vector<std::string> golden = GoldenRows();
  std::vector<std::string> table = TableRows();
  std::sort(golden.begin(), golden.end());
  std::sort(table.begin(), table.end());
  std::vector<std::string> only_table, only_golden;
  std::set_difference(table.begin(), table.end(), golden.begin(), golden.end(),
                      std::back_inserter(only_table));
  std::set_difference(golden.begin(), golden.end(), table.begin(), table.end(),
                      std::back_inserter(only_golden));
  EXPECT_THAT(only_table, ::testing::IsEmpty())
      << "in src/core/transitions.cc but not in " << GoldenPath()
      << ": a transition was added; add it to the golden file too if that was meant";
  EXPECT_THAT(only_golden, ::testing::IsEmpty())
      << "in " << GoldenPath()
      << " but not in src/core/transitions.cc: a transition was removed; remove it from the "
         "golden file too if that was meant";
  EXPECT_EQ(table.size(), golden.size()) << "a row is duplicated";
}

TEST(Transitions, NoDuplicateRows) {
  std::set<std::string> seen;
  for (const std::string& r : TableRows()) EXPECT_TRUE(seen.insert(r).second) << r;
}

// Reference 003: a terminal status ends the run; only a rerun (a new
// revision) or the admin reset may move it again.
TEST(Transitions, TerminalStatusesAreLeftOnlyByRerunAndAdmin) {
  for (const Transition& t : TransitionTable()) {
    if (!t.from || !IsTerminal(*t.from)) continue;
    EXPECT_TRUE(t.party == Party::kRerun || t.party == Party::kAdmin) << Row(t);
  }
}

// Reference 003: the lease token is the executor's; no other party has one.
TEST(Transitions, OnlyTheExecutorWritesWithALeaseToken) {
  for (const Transition& t : TransitionTable()) {
    if (t.needs_lease_token) {
      EXPECT_EQ(t.party, Party::kExecutor) << Row(t);
    }
  }
}

// An executor write that ends or gives back a run must carry the token.
TEST(Transitions, ExecutorWritesFromRunningCarryTheToken) {
  for (const Transition& t : TransitionTable()) {
    if (t.party == Party::kExecutor && t.from == RunStatus::kRunning &&
        t.to != RunStatus::kRunning) {
      EXPECT_TRUE(t.needs_lease_token) << Row(t);
    }
  }
}

TEST(Transitions, OnlyAdmissionCreatesAndOnlyAsQueued) {
  for (const Transition& t : TransitionTable()) {
    if (!t.from) {
      EXPECT_EQ(t.party, Party::kAdmission) << Row(t);
      EXPECT_EQ(t.to, RunStatus::kQueued) << Row(t);
    }
    if (t.party == Party::kAdmission) {
      EXPECT_FALSE(t.from.has_value()) << Row(t);
    }
  }
}

TEST(Transitions, EveryStatusIsReachableFromQueued) {
  std::set<RunStatus> reached = {RunStatus::kQueued};
  std::deque<RunStatus> todo = {RunStatus::kQueued};
  while (!todo.empty()) {
    const RunStatus s = todo.front();
    todo.pop_front();
    for (const Transition& t : TransitionTable()) {
      if (t.from == s && reached.insert(t.to).second) todo.push_back(t.to);
    }
  }
  for (RunStatus s : kAllStatuses) EXPECT_TRUE(reached.count(s)) << ToString(s) << " unreachable";
}

// What the store asks (FindTransition) agrees with the golden file for every
// (from, to, party) triple, "no row yet" included as a from.
TEST(Transitions, FindTransitionAcceptsExactlyTheGoldenRows) {
  std::set<std::string> golden;  // "from to party"
  for (const std::string& row : GoldenRows()) {
    std::vector<std::string> cols = absl::StrSplit(row, ' ');
    ASSERT_GE(cols.size(), 4u) << row;
    golden.insert(absl::StrJoin({cols[0], cols[1], cols[2]}, " "));
  }
  std::vector<std::optional<RunStatus>> froms = {std::nullopt};
  for (RunStatus s : kAllStatuses) froms.push_back(s);
  for (const std::optional<RunStatus>& from : froms) {
    for (RunStatus to : kAllStatuses) {
      for (Party p : kAllParties) {
        const std::string key =
            absl::StrFormat("%s %s %s", from ? ToString(*from) : "-", ToString(to), ToString(p));
        EXPECT_EQ(FindTransition(from, to, p) != nullptr, golden.count(key) == 1) << key;
      }
    }
  }
}

TEST(Transitions, StatusNamesRoundTrip) {
  for (RunStatus s : kAllStatuses) EXPECT_EQ(ParseRunStatus(ToString(s)), s);
  EXPECT_EQ(ParseRunStatus("bogus"), std::nullopt);
}

}  // namespace
}  // namespace runloom
