#include "llm/llm_slots.h"

#include "core/log.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <utility>

namespace runloom {
namespace {

// Polling a board whose slots are all taken: the first wait, doubled up to
// options.refresh. A release in this process wakes the pollers at once.
constexpr absl::Duration kFirstPoll = absl::Milliseconds(5);
// How long a process counts its own calls after the board failed to answer
// before it asks the board again.
constexpr absl::Duration kSharedRetry = absl::Seconds(1);

}  // namespace

LlmSlots::Slot::Slot(Slot&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      clock_(other.clock_),
      started_(other.started_),
      attempt_started_(other.attempt_started_),
      board_(std::move(other.board_)),
      holder_(std::move(other.holder_)) {}

LlmSlots::Slot::~Slot() {
  if (owner_ != nullptr) owner_->Release(*this, std::nullopt, {});
}

void LlmSlots::Slot::Finish(CallOutcome::Kind kind, const RateLimitTelemetry& telemetry) {
  if (owner_ == nullptr) return;
  std::exchange(owner_, nullptr)->Release(*this, kind, telemetry);
}

namespace {

// What a provider's answer says about its load; nullopt = nothing (a stop,
// a bad request).
std::optional<CallOutcome::Kind> KindOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return CallOutcome::Kind::kOk;
    case absl::StatusCode::kResourceExhausted:
      return CallOutcome::Kind::kRateLimited;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kInternal:
      return CallOutcome::Kind::kError;
    default:
      return std::nullopt;
  }
}

}  // namespace

void LlmSlots::Slot::Finish(const absl::Status& status, const RateLimitTelemetry& telemetry) {
  if (std::optional<CallOutcome::Kind> kind = KindOf(status)) return Finish(*kind, telemetry);
  if (owner_ != nullptr) std::exchange(owner_, nullptr)->Release(*this, std::nullopt, {});
}

void LlmSlots::Slot::Report(const absl::Status& status, const RateLimitTelemetry& telemetry) {
  const absl::Time now = clock_->Now();
  const absl::Time began = std::exchange(attempt_started_, now);
  const std::optional<CallOutcome::Kind> kind = KindOf(status);
  if (owner_ == nullptr || !kind.has_value()) return;
  owner_->Observe(
      CallOutcome{.kind = *kind, .started = began, .latency = now - began, .telemetry = telemetry});
}

LlmSlots::LlmSlots(std::string provider, ConcurrencyOptions options, Logger* logger)
    : provider_(std::move(provider)),
      options_(options),
      logger_(logger != nullptr ? logger : DefaultLogger()),
      cap_(std::max(1, options.static_cap)) {}

void LlmSlots::Attach(std::shared_ptr<CapBoard> board,
                      std::shared_ptr<ConcurrencyController> controller) {
  runloom::MutexLock l(&mu_);
  board_ = std::move(board);
  controller_ = std::move(controller);
  cap_ = std::max(1, options_.static_cap);
  published_ = false;
  warned_ = false;
  read_at_ = absl::InfinitePast();
  shared_down_until_ = absl::InfinitePast();
  shared_warned_ = false;
}

int LlmSlots::Cap(Clock* clock) {
  const absl::Time now = clock->Now();
  std::shared_ptr<CapBoard> board;
  {
    runloom::MutexLock l(&mu_);
    if (board_ == nullptr || now - read_at_ < options_.refresh) return cap_;
    board = board_;
    read_at_ = now;  // one reader per refresh period
  }
  absl::StatusOr<std::optional<int>> read = board->Read(provider_);
  runloom::MutexLock l(&mu_);
  if (board_ != board) return cap_;  // re-attached meanwhile
  if (read.ok() && read->has_value()) {
    if (!published_ && warned_) {
      Log(logger_, LogLevel::kInfo, "llm concurrency: provider ", provider_,
          ": following the published cap again (", **read, ")");
    }
    cap_ = std::max(1, **read);
    published_ = true;
    warned_ = false;
    return cap_;
  }
  if (!warned_) {
    Log(logger_, LogLevel::kWarning, "llm concurrency: provider ", provider_, ": no fresh cap on ",
        board->Describe(), read.ok() ? "" : absl::StrCat(" (", read.status().ToString(), ")"),
        "; using the static cap ", options_.static_cap, " until the controller publishes again");
    warned_ = true;
  }
  cap_ = std::max(1, options_.static_cap);
  published_ = false;
  return cap_;
}

LlmSlots::Attempt LlmSlots::TryTake(Clock* clock, int cap) {
  std::shared_ptr<CapBoard> board;
  {
    runloom::MutexLock l(&mu_);
    if (in_flight_ >= cap) {
      waited_ = true;
      return {};
    }
    // Counted here before the board answers, so this process never asks
    // for more than `cap` at once; undone when the board refuses.
    ++in_flight_;
    if (board_ == nullptr || !board_->CountsSlots() || clock->Now() < shared_down_until_) {
      return {Slot(this, clock, clock->Now())};
    }
    board = board_;
  }
  absl::StatusOr<std::optional<std::string>> taken = board->TakeSlot(provider_, cap);
  runloom::MutexLock l(&mu_);
  if (taken.ok() && taken->has_value()) {
    if (shared_warned_) {
      Log(logger_, LogLevel::kInfo, "llm concurrency: provider ", provider_,
          ": counting calls in flight on ", board->Describe(), " again");
      shared_warned_ = false;
    }
    return {Slot(this, clock, clock->Now(), std::move(board), **std::move(taken))};
  }
  if (taken.ok()) {
    --in_flight_;
    waited_ = true;
    return {.shared_full = true};
  }
  // A model call never fails because the board is down: count this
  // process's calls (the cap is the static one: it cannot be read either).
  if (!shared_warned_) {
    Log(logger_, LogLevel::kWarning, "llm concurrency: provider ", provider_,
        ": cannot count calls in flight on ", board->Describe(), " (", taken.status().ToString(),
        "); counting this process's calls only, against the cap ", cap, ", until it answers");
    shared_warned_ = true;
  }
  shared_down_until_ = clock->Now() + kSharedRetry;
  return {Slot(this, clock, clock->Now())};
}

std::optional<LlmSlots::Slot> LlmSlots::TryAcquire(Clock* clock) {
  return TryTake(clock, Cap(clock)).slot;
}

absl::StatusOr<LlmSlots::Slot> LlmSlots::Acquire(StepContext& ctx) {
  Clock* clock = ctx.clock();
  absl::Duration poll = kFirstPoll;
  while (true) {
    const int cap = Cap(clock);
    Attempt attempt = TryTake(clock, cap);
    if (attempt.slot.has_value()) return *std::move(attempt.slot);
    // Other processes hold the slots (shared_full): ask the board again
    // after `poll` (backing off), or at once when a call here ends. Else
    // wake on a release, or re-read the cap after `refresh`.
    const absl::Time until =
        std::min(ctx.deadline(), clock->Now() + (attempt.shared_full ? poll : options_.refresh));
    if (attempt.shared_full) poll = std::min(poll * 2, std::max(kFirstPoll, options_.refresh));
    if (clock == RealClock() && fiber::OnFiber()) {
      // A fiber must not block its thread here: the calls that would free
      // a slot may be fibers waiting for that thread (core/fiber.h).
      fiber::Suspend([&](const fiber::Waker& w) {
        bool queued = false;
        {
          runloom::MutexLock l(&mu_);
          if (attempt.shared_full || in_flight_ >= cap) {
            if (waiters_.size() >= compact_waiters_at_) {  // drop waits their timer ended
              std::erase_if(waiters_, [](const fiber::Waker& x) { return x.ended(); });
              compact_waiters_at_ = std::max<size_t>(64, 2 * waiters_.size());
            }
            waiters_.push_back(w);
            queued = true;
          }
        }
        if (!queued) w.Wake();  // a slot came free since TryTake: try again at once
        fiber::WakeAt(until, w);
      });
    } else {
      runloom::MutexLock l(&mu_);
      if (attempt.shared_full) {
        const int64_t seen = releases_;
        auto released = [this, seen]()
                            ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return releases_ != seen; };
        clock->AwaitWithDeadline(&mu_, absl::Condition(&released), until);
      } else {
        auto free = [this, cap]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ < cap; };
        clock->AwaitWithDeadline(&mu_, absl::Condition(&free), until);
      }
    }
    if (ctx.Stopping()) {
      return absl::CancelledError(
          absl::StrCat("llm call to provider ", provider_, " cancelled while waiting for a slot"));
    }
    if (clock->Now() >= ctx.deadline()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "llm call to provider ", provider_, ": no slot under the concurrency cap ", cap,
          " before the step deadline; raise the step's timeout or the provider's cap"));
    }
  }
}

int LlmSlots::in_flight() const {
  runloom::MutexLock l(&mu_);
  return in_flight_;
}

void LlmSlots::Release(const Slot& slot, std::optional<CallOutcome::Kind> kind,
                       const RateLimitTelemetry& telemetry) {
  if (slot.board_ != nullptr) {
    // Before this process's count drops, so a caller woken here finds the
    // board's slot free too.
    absl::Status returned = slot.board_->ReturnSlot(provider_, slot.holder_);
    if (!returned.ok()) {
      Log(logger_, LogLevel::kWarning, "llm concurrency: provider ", provider_,
          ": cannot return a slot to ", slot.board_->Describe(), " (", returned.ToString(),
          "); it expires after its TTL");
    }
  }
  CallOutcome outcome;
  std::deque<fiber::Waker> waiters;
  {
    runloom::MutexLock l(&mu_);
    --in_flight_;
    ++releases_;
    waiters.swap(waiters_);
    if (kind) outcome.waited = std::exchange(waited_, false);
  }
  // One fiber waiting for a slot takes this one (waits already ended by
  // their timer are skipped); the others wait on.
  while (!waiters.empty() && !waiters.front().Wake()) waiters.pop_front();
  if (!waiters.empty()) waiters.pop_front();
  if (!waiters.empty()) {
    runloom::MutexLock l(&mu_);
    waiters_.insert(waiters_.begin(), waiters.begin(), waiters.end());
  }
  if (!kind) return;
  outcome.kind = *kind;
  outcome.started = slot.attempt_started_;  // the last attempt (earlier ones: Report)
  outcome.latency = slot.clock_->Now() - slot.attempt_started_;
  outcome.telemetry = telemetry;
  Observe(outcome);
}

void LlmSlots::Observe(const CallOutcome& outcome) {
  std::shared_ptr<ConcurrencyController> controller;
  {
    runloom::MutexLock l(&mu_);
    controller = controller_;
  }
  if (controller == nullptr) return;
  controller->Observe(outcome);
  if (outcome.kind == CallOutcome::Kind::kRateLimited) {
    // The controller cut the cap at once: read it again on the next call.
    runloom::MutexLock l(&mu_);
    read_at_ = absl::InfinitePast();
  }
}

}  // namespace runloom
