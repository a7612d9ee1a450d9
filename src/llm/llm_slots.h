// LlmSlots: the executor side of one provider's concurrency cap. Before each
// model call the llm step takes a slot; it waits while this process already
// has `cap` calls in flight, where `cap` is the controller's published cap
// while it is fresh (re-read every `refresh`) and the provider's static cap
// when none is (no controller, a stopped one, an unreachable board).
// Finishing a slot reports the call's outcome to the controller (Sense).
//
// Log lines: (warning) "llm concurrency: provider P: no fresh cap on BOARD;
// using the static cap N" when a published cap goes missing; (info) "...
// following the published cap again" when it comes back.
//
// Thread-safety: all methods are thread-safe. A Slot belongs to one thread.
#pragma once

#include "runloom/clock.h"
#include "runloom/env.h"
#include "runloom/mutex.h"
#include "runloom/step.h"

#include "llm/cap_board.h"
#include "llm/concurrency_controller.h"

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"

#include <memory>
#include <optional>
#include <string>

namespace runloom {

class LlmSlots {
 public:
  class Slot {
   public:
    Slot(Slot&& other) noexcept;
    Slot& operator=(Slot&&) = delete;
    Slot(const Slot&) = delete;
    ~Slot();  // releases without reporting when Finish was not called
    // Releases the slot and reports the call to the controller.
    void Finish(CallOutcome::Kind kind, const RateLimitTelemetry& telemetry);
    // Finish with the kind a provider's answer means: OK -> kOk,
    // kResourceExhausted -> kRateLimited, kUnavailable, kDeadlineExceeded,
    // kUnknown, kInternal -> kError; anything else (a stop, a bad request)
    // says nothing about the provider's load and is not reported.
    void Finish(const absl::Status& status, const RateLimitTelemetry& telemetry);

   private:
    friend class LlmSlots;
    Slot(LlmSlots* owner, Clock* clock, absl::Time started)
        : owner_(owner), clock_(clock), started_(started) {}
    LlmSlots* owner_;  // null once released or moved from
    Clock* clock_;
    absl::Time started_;
  };

  // `logger` nullptr = DefaultLogger().
  LlmSlots(std::string provider, ConcurrencyOptions options, Logger* logger = nullptr);
  LlmSlots(const LlmSlots&) = delete;
  LlmSlots& operator=(const LlmSlots&) = delete;

  // Follow `board` and report to `controller` (either may be null); Detach
  // goes back to the static cap. Calls in flight are unaffected.
  void Attach(std::shared_ptr<CapBoard> board, std::shared_ptr<ConcurrencyController> controller)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Detach() ABSL_LOCKS_EXCLUDED(mu_) { Attach(nullptr, nullptr); }

  // Waits for a slot under the current cap. kCancelled when ctx stops,
  // kDeadlineExceeded at ctx.deadline().
  absl::StatusOr<Slot> Acquire(StepContext& ctx) ABSL_LOCKS_EXCLUDED(mu_);
  // A slot if one is free now (simulations drive this on their own clock).
  std::optional<Slot> TryAcquire(Clock* clock) ABSL_LOCKS_EXCLUDED(mu_);

  // The cap in force now (published or static), re-reading when due.
  int Cap(Clock* clock) ABSL_LOCKS_EXCLUDED(mu_);
  int in_flight() const ABSL_LOCKS_EXCLUDED(mu_);
  const std::string& provider() const { return provider_; }
  const ConcurrencyOptions& options() const { return options_; }

 private:
  void Release(const Slot& slot, std::optional<CallOutcome::Kind> kind,
               const RateLimitTelemetry& telemetry) ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  const std::string provider_;
  const ConcurrencyOptions options_;
  Logger* const logger_;

  mutable runloom::Mutex mu_;
  std::shared_ptr<CapBoard> board_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<ConcurrencyController> controller_ ABSL_GUARDED_BY(mu_);
  int cap_ ABSL_GUARDED_BY(mu_);
  bool published_ ABSL_GUARDED_BY(mu_) = false;  // cap_ is a fresh published cap
  bool warned_ ABSL_GUARDED_BY(mu_) = false;     // said "no fresh cap" already
  absl::Time read_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool waited_ ABSL_GUARDED_BY(mu_) = false;  // a caller found every slot taken
};

}  // namespace runloom
