// LlmSlots: the executor side of one provider's concurrency cap. Before each
// model call the llm step takes a slot; it waits while `cap` calls are in
// flight, where `cap` is the controller's published cap while it is fresh
// (re-read every `refresh`) and the provider's static cap when none is (no
// controller, a stopped one, an unreachable board). Finishing a slot reports
// the call's outcome to the controller (Sense).
//
// Who counts the calls in flight: with a board that counts slots (Redis,
// CapBoard::CountsSlots) every call also holds a slot on the board, so the
// cap bounds the calls of all processes together; a caller that finds them
// all taken polls the board (every 5 ms, doubling up to `refresh`), woken
// early by a release in this process. Otherwise (the in-process board, no
// board) this process counts its own calls. When the board cannot be
// reached a call is never failed for it: the process counts its own calls
// (against the static cap, since the cap cannot be read either) and asks
// the board again a second later.
//
// Log lines: (warning) "llm concurrency: provider P: no fresh cap on BOARD;
// using the static cap N" when a published cap goes missing; (info) "...
// following the published cap again" when it comes back; (warning) "...:
// cannot count calls in flight on BOARD (ERROR); counting this process's
// calls only" and (info) "...: counting calls in flight on BOARD again";
// (warning) "...: cannot return a slot to BOARD (ERROR); it expires after
// its TTL".
//
// Thread-safety: all methods are thread-safe. A Slot belongs to one thread.
#pragma once

#include "runloom/clock.h"
#include "runloom/env.h"
#include "runloom/mutex.h"
#include "runloom/step.h"

#include "core/fiber.h"
#include "llm/cap_board.h"
#include "llm/concurrency_controller.h"

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"

#include <cstdint>
#include <deque>
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
    // Reports an answer the provider is about to retry while the call keeps
    // this slot (a 429 it waits out, a 5xx): the controller sees it now, as
    // "cut at once on a 429" asks, not only through the call's final status.
    // Kinds as Finish; the latency is the attempt's. The slot stays held.
    void Report(const absl::Status& status, const RateLimitTelemetry& telemetry);

   private:
    friend class LlmSlots;
    Slot(LlmSlots* owner, Clock* clock, absl::Time started,
         std::shared_ptr<CapBoard> board = nullptr, std::string holder = {})
        : owner_(owner),
          clock_(clock),
          started_(started),
          board_(std::move(board)),
          holder_(std::move(holder)) {}
    LlmSlots* owner_;  // null once released or moved from
    Clock* clock_;
    absl::Time started_;
    absl::Time attempt_started_ = started_;  // the call's current attempt (Report)
    // The board holding this slot (holder_ its id there); null when only
    // this process counts it.
    std::shared_ptr<CapBoard> board_;
    std::string holder_;
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

  // Waits for a slot under the current cap (on the board when it counts
  // slots). kCancelled when ctx stops, kDeadlineExceeded at ctx.deadline();
  // never fails because the board is unreachable.
  absl::StatusOr<Slot> Acquire(StepContext& ctx) ABSL_LOCKS_EXCLUDED(mu_);
  // A slot if one is free now (simulations drive this on their own clock).
  std::optional<Slot> TryAcquire(Clock* clock) ABSL_LOCKS_EXCLUDED(mu_);

  // The cap in force now (published or static), re-reading when due.
  int Cap(Clock* clock) ABSL_LOCKS_EXCLUDED(mu_);
  // Calls in flight in this process.
  int in_flight() const ABSL_LOCKS_EXCLUDED(mu_);
  const std::string& provider() const { return provider_; }
  const ConcurrencyOptions& options() const { return options_; }

 private:
  // One try at a slot under `cap`: `slot` when taken; `shared_full` when
  // this process had room but the board's slots were all taken.
  struct Attempt {
    std::optional<Slot> slot;
    bool shared_full = false;
  };
  Attempt TryTake(Clock* clock, int cap) ABSL_LOCKS_EXCLUDED(mu_);
  void Release(const Slot& slot, std::optional<CallOutcome::Kind> kind,
               const RateLimitTelemetry& telemetry) ABSL_LOCKS_EXCLUDED(mu_);
  // Hands `outcome` to the controller, if one is attached.
  void Observe(const CallOutcome& outcome) ABSL_LOCKS_EXCLUDED(mu_);

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
  bool waited_ ABSL_GUARDED_BY(mu_) = false;   // a caller found every slot taken
  int64_t releases_ ABSL_GUARDED_BY(mu_) = 0;  // wakes callers polling the board
  // Fibers waiting for a slot (core/fiber.h), oldest first; a release wakes
  // one. Some may have been woken by their timer already.
  std::deque<fiber::Waker> waiters_ ABSL_GUARDED_BY(mu_);
  size_t compact_waiters_at_ ABSL_GUARDED_BY(mu_) = 64;
  // The board's slots could not be reached: count locally until then.
  absl::Time shared_down_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool shared_warned_ ABSL_GUARDED_BY(mu_) = false;  // said "cannot count" already
};

}  // namespace runloom
