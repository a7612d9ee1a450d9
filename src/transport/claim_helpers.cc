#include "transport/claim_helpers.h"

#include "runloom/clock.h"

#include "absl/strings/str_cat.h"

#include <algorithm>

namespace runloom::transport_internal {

absl::Status CheckClaimArgs(const std::string& consumer, int max, absl::Duration visibility) {
  if (consumer.empty()) return absl::InvalidArgumentError("queue consumer name is empty");
  if (max <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("Claim max must be positive, got ", max));
  }
  if (visibility <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Claim visibility must be positive, got ", absl::FormatDuration(visibility)));
  }
  return absl::OkStatus();
}

void SignalWaiter::Wait(absl::Time deadline, absl::Duration interval,
                        absl::FunctionRef<uint64_t()> signals,
                        absl::FunctionRef<absl::StatusOr<Poll>()> poll,
                        absl::FunctionRef<void(uint64_t, absl::Time)> await) {
  uint64_t seen;
  {
    runloom::MutexLock l(&mu_);
    seen = last_seen_;
  }
  while (true) {
    const uint64_t now_seen = signals();
    if (now_seen != seen) {
      runloom::MutexLock l(&mu_);
      last_seen_ = now_seen;
      return;
    }
    // The deadline is in the authority's time: look at it, and for news.
    absl::StatusOr<Poll> p = poll();
    if (!p.ok() || p->visible || p->now >= deadline) return;
    await(seen, RealClock()->Now() + std::min(interval, deadline - p->now));
  }
}

}  // namespace runloom::transport_internal
