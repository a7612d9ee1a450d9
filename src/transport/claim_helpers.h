// Pieces every Transport implementation shares: the argument check of Claim
// and the wait loop of WaitForMessages (a wake-up counter plus polling).
//
// Thread-safety: CheckClaimArgs is a pure function; a SignalWaiter may be
// used by many threads at once.
#pragma once

#include "runloom/mutex.h"

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <cstdint>
#include <string>

namespace runloom::transport_internal {

// kInvalidArgument for an empty consumer, max < 1 or visibility <= 0 (the
// codes Transport::Claim documents).
absl::Status CheckClaimArgs(const std::string& consumer, int max, absl::Duration visibility);

// WaitForMessages for a transport whose wake-ups are a counter (bumped by
// NOTIFY, a local enqueue, or Interrupt) and whose other news must be polled.
class SignalWaiter {
 public:
  // What one poll saw: the time authority's now, and whether a claim could
  // get a message.
  struct Poll {
    absl::Time now;
    bool visible = false;
  };

  // Returns when signals() moved since the last Wait returned (on any
  // thread), when `poll` says a message may be there or fails (Claim then
  // reports the error), or when the authority's time reaches `deadline`.
  // Between polls, waits up to `interval` in `await(seen, local_deadline)`
  // (local_deadline on RealClock).
  void Wait(absl::Time deadline, absl::Duration interval, absl::FunctionRef<uint64_t()> signals,
            absl::FunctionRef<absl::StatusOr<Poll>()> poll,
            absl::FunctionRef<void(uint64_t seen, absl::Time local_deadline)> await)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  runloom::Mutex mu_;
  uint64_t last_seen_ ABSL_GUARDED_BY(mu_) = 0;  // signals() when the last wait returned
};

}  // namespace runloom::transport_internal
