#include "llm/llm_slots.h"

#include "core/log.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <utility>

namespace runloom {

LlmSlots::Slot::Slot(Slot&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      clock_(other.clock_),
      started_(other.started_) {}

LlmSlots::Slot::~Slot() {
  if (owner_ != nullptr) owner_->Release(*this, std::nullopt, {});
}

void LlmSlots::Slot::Finish(CallOutcome::Kind kind, const RateLimitTelemetry& telemetry) {
  if (owner_ == nullptr) return;
  std::exchange(owner_, nullptr)->Release(*this, kind, telemetry);
}

void LlmSlots::Slot::Finish(const absl::Status& status, const RateLimitTelemetry& telemetry) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return Finish(CallOutcome::Kind::kOk, telemetry);
    case absl::StatusCode::kResourceExhausted:
      return Finish(CallOutcome::Kind::kRateLimited, telemetry);
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kInternal:
      return Finish(CallOutcome::Kind::kError, telemetry);
    default:
      if (owner_ != nullptr) std::exchange(owner_, nullptr)->Release(*this, std::nullopt, {});
  }
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

std::optional<LlmSlots::Slot> LlmSlots::TryAcquire(Clock* clock) {
  const int cap = Cap(clock);
  runloom::MutexLock l(&mu_);
  if (in_flight_ >= cap) {
    waited_ = true;
    return std::nullopt;
  }
  ++in_flight_;
  return Slot(this, clock, clock->Now());
}

absl::StatusOr<LlmSlots::Slot> LlmSlots::Acquire(StepContext& ctx) {
  Clock* clock = ctx.clock();
  while (true) {
    const int cap = Cap(clock);
    {
      runloom::MutexLock l(&mu_);
      if (in_flight_ < cap) {
        ++in_flight_;
        return Slot(this, clock, clock->Now());
      }
      waited_ = true;
      // Wake on a release, or re-read the cap after `refresh`.
      auto free = [this, cap]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ < cap; };
      clock->AwaitWithDeadline(&mu_, absl::Condition(&free),
                               std::min(ctx.deadline(), clock->Now() + options_.refresh));
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
  std::shared_ptr<ConcurrencyController> controller;
  CallOutcome outcome;
  {
    runloom::MutexLock l(&mu_);
    --in_flight_;
    if (!kind) return;
    controller = controller_;
    outcome.waited = std::exchange(waited_, false);
  }
  if (controller == nullptr) return;
  outcome.kind = *kind;
  outcome.started = slot.started_;
  outcome.latency = slot.clock_->Now() - slot.started_;
  outcome.telemetry = telemetry;
  controller->Observe(outcome);
  if (*kind == CallOutcome::Kind::kRateLimited) {
    // The controller cut the cap at once: read it again on the next call.
    runloom::MutexLock l(&mu_);
    read_at_ = absl::InfinitePast();
  }
}

}  // namespace runloom
