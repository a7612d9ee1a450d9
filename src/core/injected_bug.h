// Bugs injected on purpose, to show that the deterministic simulation
// (src/sim/, docs/reliability.md) catches each class of defect it claims to.
// Compiled only with RUNLOOM_TESTING (the ASan and TSan builds): without it,
// RUNLOOM_INJECTED_BUG(b) is the constant false and the code it guards is
// dead, so a production build cannot carry one.
//
//   if (RUNLOOM_INJECTED_BUG(InjectedBug::kDecisionIgnoresDigest)) { ... }
//
// The simulator switches them on one at a time (runloom-sim --bug NAME); a
// test asserts that each is caught within the seeds the test command runs.
//
// Thread-safety: SetInjectedBugs and the check are thread-safe (an atomic).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace runloom {

enum class InjectedBug : uint32_t {
  // The store applies a fenced write without comparing its lease token.
  kStoreSkipsTokenCheck,
  // A decision is accepted whatever proposal digest it names.
  kDecisionIgnoresDigest,
  // An http write is sent without its intent recorded first (and without
  // reconciling an intent left open by an earlier attempt).
  kWriteIntentNotRecorded,
  // The store hands out a lease while another one is still live.
  kLeaseTakenWhileLive,
  // A rerun keeps the cancel request of the execution that finished.
  kRerunKeepsCancel,
  // A takeover keeps the budget reservations of the lease before it (the
  // executor's release, and the sweeper's).
  kReservationKeptOnTakeover,
  // Releasing an open reservation gives its amount back uncharged, though
  // its call may have been answered and paid (a late settle, or a settle
  // that never came).
  kReleaseFreesUnsettledCalls,
  // A write's key leaves out the decision it carries out (as before issue
  // 22.1): a rerun approved by another reviewer is refused as another
  // request under the same key.
  kWriteKeyIgnoresDecision,
  // A store error reading a run's pinned workflow (the database away for a
  // moment) fails the run closed, as poison does (as before issue 22.6).
  kCatalogErrorFailsRun,
  // The cap board publishes an LLM cap whoever asks, not only the holder of
  // the controller lease (as before issue 22.2, every process's controller
  // wrote the cap): a controller stopped past its lease overwrites the
  // cap its successor decided.
  kCapPublishIgnoresLease,
  // A run's terminal stage event (reference 004) goes out before its
  // terminal status commits, so a subscriber hears of an end that a failed
  // commit or a takeover then undoes.
  kStageEventBeforeCommit,
  // The store names every waiting run as due, whatever its wake time (a
  // timer compared with the wrong clock, or not at all).
  kTimerDueEarly,
  // A move to waiting for a signal is accepted while the run's mailbox
  // holds one of that name (the store skips the check between the
  // executor's read of the mailbox and its park), so a signal sent in
  // between is never consumed: the run rests waiting for what it has.
  kParkIgnoresMailbox,
  // A run step admits its child under a key that names the execution (its
  // lease), not only the parent's step and attempt: a parent that resumes
  // (after a crash, or woken by its poll) starts a second child.
  kChildKeyPerExecution,
  // The lease of a queued run with a concurrency key does not count its
  // key's running runs (issue 23): two claimers that each claimed a run of
  // a key with one slot both lease. The claims' own room filter stays.
  kLeaseIgnoresConcurrencyLimit,
  // The schedule firer keys a tick's run by the moment it fires (the
  // store's now, in seconds) instead of by the tick: a process that fires a
  // tick late (stopped between starting the run and moving the tick on, or
  // catching up) starts a run under another key, so one tick starts two.
  kScheduleKeyedByFireTime,
  // A step that sets no timeout runs unbounded, as before issue 25 (no
  // default per kind): a hung step holds its run, renewing its lease,
  // forever.
  kDefaultTimeoutIgnored,
  // A model call whose answer was lost after its request was sent (a
  // timeout, a cancel mid-flight, a cut connection) is settled at 0, as
  // before: the provider may have billed it, and a settle after recovery
  // charged the reservation replaces that charge with nothing.
  kLostAnswerBookedFree,
  // A run's span (issue 25, traces) goes out before its terminal status
  // commits, so a collector hears of an end that a refused commit (a lost
  // lease) undoes, and the run's real end sends a second one.
  kRunSpanBeforeCommit,
  // The sweeper ends every live lease it lists (issue 27, restart
  // recovery) without asking whether its holder is provably dead, so a
  // live process loses its runs mid-step.
  kLeasesEndedUnchecked,
};

// "store_skips_token_check", ... (the enumerator in snake case).
std::string_view ToString(InjectedBug b);
std::optional<InjectedBug> ParseInjectedBug(std::string_view name);
std::span<const InjectedBug> AllInjectedBugs();

// Switches the bugs in `bugs` on and every other off (empty = none).
void SetInjectedBugs(std::span<const InjectedBug> bugs);

namespace core_internal {
bool BugInjected(InjectedBug b);
}  // namespace core_internal

}  // namespace runloom

#ifdef RUNLOOM_TESTING
#define RUNLOOM_INJECTED_BUG(b) ::runloom::core_internal::BugInjected(b)
#else
#define RUNLOOM_INJECTED_BUG(b) false
#endif
