#include "core/injected_bug.h"

#include <array>
#include <atomic>

namespace runloom {
namespace {

constexpr std::array kAllBugs = {
    InjectedBug::kStoreSkipsTokenCheck,       InjectedBug::kDecisionIgnoresDigest,
    InjectedBug::kWriteIntentNotRecorded,     InjectedBug::kLeaseTakenWhileLive,
    InjectedBug::kRerunKeepsCancel,           InjectedBug::kReservationKeptOnTakeover,
    InjectedBug::kReleaseFreesUnsettledCalls, InjectedBug::kWriteKeyIgnoresDecision,
    InjectedBug::kCatalogErrorFailsRun,       InjectedBug::kCapPublishIgnoresLease,
    InjectedBug::kStageEventBeforeCommit,     InjectedBug::kTimerDueEarly,
    InjectedBug::kParkIgnoresMailbox,         InjectedBug::kChildKeyPerExecution,
    InjectedBug::kLeaseIgnoresConcurrencyLimit, InjectedBug::kScheduleKeyedByFireTime,
    InjectedBug::kDefaultTimeoutIgnored,      InjectedBug::kLostAnswerBookedFree,
    InjectedBug::kRunSpanBeforeCommit,        InjectedBug::kLeasesEndedUnchecked,
};

std::atomic<uint32_t> injected_bugs{0};

uint32_t InjectedBit(InjectedBug b) { return uint32_t{1} << static_cast<uint32_t>(b); }

}  // namespace

std::string_view ToString(InjectedBug b) {
  switch (b) {
    case InjectedBug::kStoreSkipsTokenCheck:
      return "store_skips_token_check";
    case InjectedBug::kDecisionIgnoresDigest:
      return "decision_ignores_digest";
    case InjectedBug::kWriteIntentNotRecorded:
      return "write_intent_not_recorded";
    case InjectedBug::kLeaseTakenWhileLive:
      return "lease_taken_while_live";
    case InjectedBug::kRerunKeepsCancel:
      return "rerun_keeps_cancel";
    case InjectedBug::kReservationKeptOnTakeover:
      return "reservation_kept_on_takeover";
    case InjectedBug::kReleaseFreesUnsettledCalls:
      return "release_frees_unsettled_calls";
    case InjectedBug::kWriteKeyIgnoresDecision:
      return "write_key_ignores_decision";
    case InjectedBug::kCatalogErrorFailsRun:
      return "catalog_error_fails_run";
    case InjectedBug::kCapPublishIgnoresLease:
      return "cap_publish_ignores_lease";
    case InjectedBug::kStageEventBeforeCommit:
      return "stage_event_before_commit";
    case InjectedBug::kTimerDueEarly:
      return "timer_due_early";
    case InjectedBug::kParkIgnoresMailbox:
      return "park_ignores_mailbox";
    case InjectedBug::kChildKeyPerExecution:
      return "child_key_per_execution";
    case InjectedBug::kLeaseIgnoresConcurrencyLimit:
      return "lease_ignores_concurrency_limit";
    case InjectedBug::kScheduleKeyedByFireTime:
      return "schedule_keyed_by_fire_time";
    case InjectedBug::kDefaultTimeoutIgnored:
      return "default_timeout_ignored";
    case InjectedBug::kLostAnswerBookedFree:
      return "lost_answer_booked_free";
    case InjectedBug::kRunSpanBeforeCommit:
      return "run_span_before_commit";
    case InjectedBug::kLeasesEndedUnchecked:
      return "leases_ended_unchecked";
  }
  return "unknown";
}

std::optional<InjectedBug> ParseInjectedBug(std::string_view name) {
  for (InjectedBug b : kAllBugs) {
    if (ToString(b) == name) return b;
  }
  return std::nullopt;
}

std::span<const InjectedBug> AllInjectedBugs() { return kAllBugs; }

void SetInjectedBugs(std::span<const InjectedBug> bugs) {
  uint32_t mask = 0;
  for (InjectedBug b : bugs) mask |= InjectedBit(b);
  injected_bugs.store(mask, std::memory_order_relaxed);
}

namespace core_internal {
bool BugInjected(InjectedBug b) {
  return (injected_bugs.load(std::memory_order_relaxed) & InjectedBit(b)) != 0;
}
}  // namespace core_internal

}  // namespace runloom
