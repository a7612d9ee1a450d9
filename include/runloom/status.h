// Run statuses, the parties that write them, and the transition table.
//
// A run has exactly one row and exactly one status. Every status write names
// the party making it; the store refuses any (from, to, party) triple that is
// not in the table below, so the table is the whole state machine. It is
// plain data: one array in src/core/transitions.cc, printed in
// docs/architecture.md.
//
// Thread-safety: everything here is immutable.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace runloom {

enum class RunStatus {
  kQueued,
  kRunning,
  kPaused,
  kWaiting,  // at a timer: no lease, no executor; the store's clock wakes it
  kCompleted,
  kRejected,
  kUnresolved,
  kBudgetStopped,
  kFailed,
  kCancelled,
};

// Every run status, in the order above: what ParseRunStatus accepts, and
// what a message about a bad status lists.
inline constexpr RunStatus kAllRunStatuses[] = {
    RunStatus::kQueued,    RunStatus::kRunning,  RunStatus::kPaused,     RunStatus::kWaiting,
    RunStatus::kCompleted, RunStatus::kRejected, RunStatus::kUnresolved, RunStatus::kBudgetStopped,
    RunStatus::kFailed,    RunStatus::kCancelled};

// Who writes a status. Executor writes must also carry the current lease token.
enum class Party {
  kAdmission,  // run creation
  kExecutor,   // the lease holder
  kSweeper,    // recovery: attempt cap
  kDecision,   // a human decision on a paused run
  kCancel,     // an operator's cancel
  kRerun,      // rerun from a phase
  kAdmin,      // admin reset
  kTimer,      // the timer sweep: a waiting run whose time came
  kSignal,     // a signal sent to a run waiting for it (issue 23)
};

std::string_view ToString(RunStatus s);
std::string_view ToString(Party p);
std::optional<RunStatus> ParseRunStatus(std::string_view s);

// How a run (or a new lease of it) began.
enum class RunEntry { kFresh, kResume, kRerun, kRevision };
std::string_view ToString(RunEntry e);  // "fresh", "resume", "rerun", "revision"
std::optional<RunEntry> ParseRunEntry(std::string_view s);

// completed, rejected, unresolved, budget_stopped, failed, cancelled.
bool IsTerminal(RunStatus s);

// One allowed write. `from` empty means "no row yet" (creation).
struct Transition {
  std::optional<RunStatus> from;
  RunStatus to;
  Party party;
  bool needs_lease_token;  // the write must match the run's current lease token
};

// The whole table.
std::span<const Transition> TransitionTable();

// The table entry for (from, to, party), or nullptr when the write is not allowed.
const Transition* FindTransition(std::optional<RunStatus> from, RunStatus to, Party party);

}  // namespace runloom
