#include "llm/concurrency_controller.h"

#include "core/check.h"
#include "core/log.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <cmath>

namespace runloom {
namespace {

std::string Show(const std::optional<int>& v) { return v ? absl::StrCat(*v) : "-"; }

}  // namespace

ConcurrencyController::ConcurrencyController(std::string provider, ConcurrencyOptions options,
                                             ControllerDeps deps)
    : provider_(std::move(provider)),
      options_(options),
      deps_(std::move(deps)),
      logger_(deps_.logger != nullptr ? deps_.logger : DefaultLogger()),
      task_(deps_.clock, options_.tick, [this] { Tick(); }),
      aimd_(std::clamp(options_.static_cap, options_.min_cap, options_.max_cap)) {
  RUNLOOM_CHECK(deps_.clock != nullptr && deps_.board != nullptr)
      << "ConcurrencyController needs a clock and a cap board";
  RUNLOOM_CHECK(options_.min_cap >= 1 && options_.min_cap <= options_.max_cap)
      << "concurrency caps: need 1 <= min_cap <= max_cap";
  last_.aimd = last_.cap = static_cast<int>(aimd_);
}

void ConcurrencyController::Observe(const CallOutcome& outcome) {
  const absl::Time now = deps_.clock->Now();
  std::optional<int> cut_to;
  {
    runloom::MutexLock l(&mu_);
    if (outcome.waited) waited_ = true;
    const double w = options_.error_ewma_weight;
    const bool error = outcome.kind == CallOutcome::Kind::kError;
    error_ewma_ = (1 - w) * error_ewma_ + (error ? w : 0.0);
    if (outcome.kind == CallOutcome::Kind::kOk) {
      latency_ewma_ =
          latency_ewma_ ? *latency_ewma_ * (1 - w) + outcome.latency * w : outcome.latency;
    }
    if (outcome.telemetry.limit_requests) {
      telemetry_rpm_ = outcome.telemetry.limit_requests;
      telemetry_at_ = now;
    }
    if (outcome.kind == CallOutcome::Kind::kRateLimited) {
      rate_limited_ = true;
      // One cut per overshoot: calls sent before the last cut were sent
      // under the old cap, and their 429s say nothing about the new one.
      if (outcome.started >= last_cut_) {
        // A 429 at cap C says the limit is below C: remember that for
        // telemetry_ttl, so AIMD does not probe straight back into it.
        ceiling_ = std::max(options_.min_cap, last_.cap - 1);
        ceiling_at_ = now;
        std::optional<int> advertised = TelemetryLimitLocked(l, now);
        double next = outcome.telemetry.limit_requests && advertised
                          ? *advertised
                          : std::floor(aimd_ * options_.rate_limit_backoff);
        aimd_ = std::max<double>(options_.min_cap, std::min<double>(next, aimd_));
        last_cut_ = now;
        const int cap = std::min(last_.cap, static_cast<int>(aimd_));
        if (cap != last_.cap) {
          Log(logger_, LogLevel::kInfo, "llm concurrency: provider ", provider_, " cap ", last_.cap,
              " -> ", cap, " at once (429: ", outcome.telemetry.ToString(), ")");
          last_.cap = cap;
          last_.aimd = static_cast<int>(aimd_);
          cut_to = cap;
        }
      }
    }
  }
  if (cut_to) Publish(*cut_to);
}

std::optional<int> ConcurrencyController::TelemetryLimitLocked(const runloom::MutexLock&,
                                                               absl::Time now) const {
  std::optional<int> out;
  if (ceiling_ && now - ceiling_at_ <= options_.telemetry_ttl) out = ceiling_;
  if (telemetry_rpm_ && latency_ewma_ && now - telemetry_at_ <= options_.telemetry_ttl) {
    // Little's law: calls in flight = arrival rate * time in the system.
    const double per_second = static_cast<double>(*telemetry_rpm_) / 60.0;
    const double calls = per_second * absl::ToDoubleSeconds(*latency_ewma_);
    const int advertised = std::max(options_.min_cap, static_cast<int>(std::lround(calls)));
    out = out ? std::min(*out, advertised) : advertised;
  }
  return out;
}

CapLimits ConcurrencyController::Tick() {
  const absl::Time now = deps_.clock->Now();
  std::optional<int> pool;
  if (deps_.pool_connections) {
    const int connections = deps_.pool_connections();
    if (connections > 0) pool = connections * options_.calls_per_connection;
  }
  std::optional<int> cpu;
  if (deps_.cpu != nullptr) {
    std::optional<double> busy = deps_.cpu->Busy();
    if (busy && *busy > options_.cpu_high) {
      const int in_flight = deps_.in_flight ? deps_.in_flight() : 0;
      cpu = std::max(options_.min_cap,
                     static_cast<int>(std::floor(in_flight * options_.cpu_high / *busy)));
    }
  }
  CapLimits limits;
  int before = 0;
  {
    runloom::MutexLock l(&mu_);
    before = last_.cap;
    if (error_ewma_ > options_.error_threshold) {
      aimd_ = std::max<double>(options_.min_cap, std::floor(aimd_ * options_.error_backoff));
      error_ewma_ = 0;  // judge the new cap on fresh calls
    } else if (!rate_limited_ && waited_) {
      aimd_ += options_.additive_increase;
    }
    limits.telemetry = TelemetryLimitLocked(l, now);
    limits.pool = pool;
    limits.cpu = cpu;
    int cap = std::min(static_cast<int>(aimd_), options_.max_cap);
    for (const std::optional<int>& other : {limits.telemetry, limits.pool, limits.cpu}) {
      if (other) cap = std::min(cap, *other);
    }
    cap = std::max(cap, options_.min_cap);
    // Another limiter binds: AIMD stays within one step of it, so it probes
    // upward from there when that limiter lets go, not from far above.
    aimd_ = std::min<double>(aimd_, cap + options_.additive_increase);
    limits.aimd = static_cast<int>(aimd_);
    limits.cap = cap;
    last_ = limits;
    waited_ = false;
    rate_limited_ = false;
  }
  if (limits.cap != before) {
    Log(logger_, LogLevel::kInfo, "llm concurrency: provider ", provider_, " cap ", before, " -> ",
        limits.cap, " (aimd ", limits.aimd, ", telemetry ", Show(limits.telemetry), ", pool ",
        Show(limits.pool), ", cpu ", Show(limits.cpu), ")");
  }
  Publish(limits.cap);
  if (deps_.on_tick) deps_.on_tick(limits);
  return limits;
}

void ConcurrencyController::Publish(int cap) {
  const absl::Status s = deps_.board->Publish(provider_, cap, options_.ttl);
  runloom::MutexLock l(&mu_);
  if (!s.ok() && !board_failing_) {
    Log(logger_, LogLevel::kWarning, "llm concurrency: provider ", provider_,
        ": cannot publish the cap to ", deps_.board->Describe(), ": ", s.ToString(),
        "; executors fall back to the static cap ", options_.static_cap, " after ",
        absl::FormatDuration(options_.ttl));
  } else if (s.ok() && board_failing_) {
    Log(logger_, LogLevel::kInfo, "llm concurrency: provider ", provider_, ": cap published to ",
        deps_.board->Describe(), " again");
  }
  board_failing_ = !s.ok();
}

void ConcurrencyController::Start() {
  int cap = 0;
  {
    runloom::MutexLock l(&mu_);
    cap = last_.cap;
  }
  Publish(cap);
  task_.Start();
}

void ConcurrencyController::Stop() { task_.Stop(); }

CapLimits ConcurrencyController::limits() const {
  runloom::MutexLock l(&mu_);
  return last_;
}

}  // namespace runloom
