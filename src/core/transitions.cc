// The run state machine as data. docs/architecture.md prints this table; a
// test checks every row and that nothing outside it is accepted.
#include "runloom/run.h"
#include "runloom/status.h"

#include <array>

namespace runloom {
namespace {

using S = RunStatus;
using P = Party;

constexpr std::array<S, 6> kTerminal = {S::kCompleted,     S::kRejected, S::kUnresolved,
                                        S::kBudgetStopped, S::kFailed,   S::kCancelled};

const std::array kTable = {
    // Admission creates the row.
    Transition{std::nullopt, S::kQueued, P::kAdmission, false},
    // The executor takes the lease: from queued, or from running whose lease
    // expired (lease expiry is not a transition; the store checks expiry).
    Transition{S::kQueued, S::kRunning, P::kExecutor, false},
    Transition{S::kRunning, S::kRunning, P::kExecutor, false},
    // The lease holder gives a run back (worker shutdown) or ends it.
    Transition{S::kRunning, S::kQueued, P::kExecutor, true},
    Transition{S::kRunning, S::kPaused, P::kExecutor, true},
    Transition{S::kRunning, S::kWaiting, P::kExecutor, true},
    Transition{S::kRunning, S::kCompleted, P::kExecutor, true},
    Transition{S::kRunning, S::kRejected, P::kExecutor, true},
    Transition{S::kRunning, S::kUnresolved, P::kExecutor, true},
    Transition{S::kRunning, S::kBudgetStopped, P::kExecutor, true},
    Transition{S::kRunning, S::kFailed, P::kExecutor, true},
    Transition{S::kRunning, S::kCancelled, P::kExecutor, true},
    // The sweeper fails a run whose lease expired at the attempt cap (a
    // queued run past it is failed by the executor that leases it).
    Transition{S::kRunning, S::kFailed, P::kSweeper, false},
    // A human decision resumes a paused run.
    Transition{S::kPaused, S::kQueued, P::kDecision, false},
    // The timer sweep queues a waiting run once the store's clock passes
    // its wake time.
    Transition{S::kWaiting, S::kQueued, P::kTimer, false},
    // A signal queues the run waiting for it, in the commit that keeps the
    // signal and marks it consumed by that wait (SignalStore::SendSignal).
    Transition{S::kWaiting, S::kQueued, P::kSignal, false},
    // Cancel: queued and paused at once; running is only *requested* (a flag
    // the executor reads on its heartbeat) and the executor writes cancelled.
    Transition{S::kQueued, S::kCancelled, P::kCancel, false},
    Transition{S::kPaused, S::kCancelled, P::kCancel, false},
    Transition{S::kWaiting, S::kCancelled, P::kCancel, false},
    // Rerun from a phase starts a new revision of a finished, paused or
    // waiting run.
    Transition{S::kPaused, S::kQueued, P::kRerun, false},
    Transition{S::kWaiting, S::kQueued, P::kRerun, false},
    Transition{S::kCompleted, S::kQueued, P::kRerun, false},
    Transition{S::kRejected, S::kQueued, P::kRerun, false},
    Transition{S::kUnresolved, S::kQueued, P::kRerun, false},
    Transition{S::kFailed, S::kQueued, P::kRerun, false},
    Transition{S::kBudgetStopped, S::kQueued, P::kRerun, false},
    // Admin reset cancels every unfinished run, whoever holds it.
    Transition{S::kQueued, S::kCancelled, P::kAdmin, false},
    Transition{S::kRunning, S::kCancelled, P::kAdmin, false},
    Transition{S::kPaused, S::kCancelled, P::kAdmin, false},
    Transition{S::kWaiting, S::kCancelled, P::kAdmin, false},
};

}  // namespace

std::string_view ToString(RunStatus s) {
  switch (s) {
    case S::kQueued:
      return "queued";
    case S::kRunning:
      return "running";
    case S::kPaused:
      return "paused";
    case S::kWaiting:
      return "waiting";
    case S::kCompleted:
      return "completed";
    case S::kRejected:
      return "rejected";
    case S::kUnresolved:
      return "unresolved";
    case S::kBudgetStopped:
      return "budget_stopped";
    case S::kFailed:
      return "failed";
    case S::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

std::string_view ToString(Party p) {
  switch (p) {
    case P::kAdmission:
      return "admission";
    case P::kExecutor:
      return "executor";
    case P::kSweeper:
      return "sweeper";
    case P::kDecision:
      return "decision";
    case P::kCancel:
      return "cancel";
    case P::kRerun:
      return "rerun";
    case P::kAdmin:
      return "admin";
    case P::kTimer:
      return "timer";
    case P::kSignal:
      return "signal";
  }
  return "unknown";
}

std::optional<RunStatus> ParseRunStatus(std::string_view s) {
  for (S v : kAllRunStatuses) {
    if (ToString(v) == s) return v;
  }
  return std::nullopt;
}

bool IsTerminal(RunStatus s) {
  for (S t : kTerminal) {
    if (t == s) return true;
  }
  return false;
}

std::span<const Transition> TransitionTable() { return kTable; }

const Transition* FindTransition(std::optional<RunStatus> from, RunStatus to, Party party) {
  for (const Transition& t : kTable) {
    if (t.from == from && t.to == to && t.party == party) return &t;
  }
  return nullptr;
}

}  // namespace runloom

namespace runloom {

std::string_view ToString(StepState s) {
  switch (s) {
    case StepState::kSucceeded:
      return "succeeded";
    case StepState::kFailed:
      return "failed";
    case StepState::kSkipped:
      return "skipped";
  }
  return "unknown";
}

std::optional<StepState> ParseStepState(std::string_view s) {
  for (StepState v : {StepState::kSucceeded, StepState::kFailed, StepState::kSkipped}) {
    if (ToString(v) == s) return v;
  }
  return std::nullopt;
}

std::string_view ToString(RunEntry e) {
  switch (e) {
    case RunEntry::kFresh:
      return "fresh";
    case RunEntry::kResume:
      return "resume";
    case RunEntry::kRerun:
      return "rerun";
    case RunEntry::kRevision:
      return "revision";
  }
  return "unknown";
}

std::optional<RunEntry> ParseRunEntry(std::string_view s) {
  for (RunEntry e : {RunEntry::kFresh, RunEntry::kResume, RunEntry::kRerun, RunEntry::kRevision}) {
    if (ToString(e) == s) {
      return e;
    }
  }
  return std::nullopt;
}

}  // namespace runloom
