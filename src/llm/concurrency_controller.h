// ConcurrencyController: the control loop that sets one provider's cap on
// model calls in flight (DESIGN.md "LLM calls").
//
// Sense   Observe() gets every call's outcome from LlmSlots: latency, a 429,
//         another error, and the rate-limit telemetry the provider sent.
//         It never fails and never blocks on I/O except the publication of
//         a cut after a 429 (bounded by the board's own timeout).
// Decide  Tick() (every `tick`) takes the minimum of the limiters:
//           aimd       +additive_increase per tick while healthy and in
//                      demand (some call waited for a slot); times
//                      error_backoff when the error rate (EWMA) passes
//                      error_threshold; cut at once on a 429 (to the
//                      telemetry limit when its headers carry one, else
//                      times rate_limit_backoff), once per overshoot (not
//                      again for calls sent before the cut).
//           telemetry  x-ratelimit-limit-requests per second times the mean
//                      latency (Little's law), and one below the cap at
//                      the last 429; each while younger than telemetry_ttl.
//           pool       the store's connection pool size times
//                      calls_per_connection.
//           cpu        when the CPUs are busier than cpu_high: the calls in
//                      flight scaled down by cpu_high / busy.
//           max_cap    a ceiling.
// Actuate the cap goes on the CapBoard with `ttl`; if this loop stops, it
//         expires and executors fall back to static_cap on their own.
//
// Log lines (info): "llm concurrency: provider P cap A -> B (aimd .., ...)"
// on every change; (warning) when the board cannot be written.
//
// Thread-safety: Observe() from any thread; Tick() from one thread at a time
// (the task Start() runs, or a test).
#pragma once

#include "runloom/clock.h"
#include "runloom/env.h"
#include "runloom/mutex.h"

#include "core/periodic_task.h"
#include "llm/cap_board.h"
#include "llm/cpu_load.h"
#include "llm/rate_limit.h"

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace runloom {

// The knobs of one provider's cap. static_cap comes from the provider's
// config; the rest have defaults the simulation test was tuned with.
struct ConcurrencyOptions {
  int static_cap = 8;  // used when no fresh cap is published; also the start
  int min_cap = 1;
  int max_cap = 256;
  absl::Duration tick = absl::Seconds(1);
  absl::Duration ttl = absl::Seconds(5);  // > several ticks
  absl::Duration telemetry_ttl = absl::Seconds(10);
  int additive_increase = 1;
  double error_backoff = 0.8;
  double error_threshold = 0.1;  // EWMA of the per-call error indicator
  double error_ewma_weight = 0.05;
  double rate_limit_backoff = 0.5;
  int calls_per_connection = 8;
  double cpu_high = 0.9;
  // How often an executor re-reads the published cap.
  absl::Duration refresh = absl::Milliseconds(250);
};

// One call's outcome, as LlmSlots reports it.
struct CallOutcome {
  enum class Kind { kOk, kRateLimited, kError };
  Kind kind = Kind::kOk;
  absl::Time started;  // when the call was sent
  absl::Duration latency;
  RateLimitTelemetry telemetry;
  // The call found every slot taken and waited (the cap binds).
  bool waited = false;
};

// Each limiter's last value; nullopt = not binding / not known.
struct CapLimits {
  int aimd = 0;
  std::optional<int> telemetry;
  std::optional<int> pool;
  std::optional<int> cpu;
  int cap = 0;  // the minimum, as published
};

struct ControllerDeps {
  Clock* clock = nullptr;           // required
  Logger* logger = nullptr;         // nullptr = DefaultLogger()
  std::shared_ptr<CapBoard> board;  // required
  // The store's connection pool size; nullptr or <= 0 = no pool limiter.
  std::function<int()> pool_connections;
  CpuLoad* cpu = nullptr;  // nullptr = no CPU limiter
  // Calls in flight now in this process (for the CPU limiter).
  std::function<int()> in_flight;
  // Hears each tick's decision (metrics); runs on the tick thread.
  std::function<void(const CapLimits&)> on_tick;
};

class ConcurrencyController {
 public:
  // REQUIRES: deps.clock and deps.board set and outliving the controller.
  ConcurrencyController(std::string provider, ConcurrencyOptions options, ControllerDeps deps);
  ~ConcurrencyController() { Stop(); }
  ConcurrencyController(const ConcurrencyController&) = delete;
  ConcurrencyController& operator=(const ConcurrencyController&) = delete;

  void Observe(const CallOutcome& outcome) ABSL_LOCKS_EXCLUDED(mu_);
  // Decides and publishes once; returns what it published.
  CapLimits Tick() ABSL_LOCKS_EXCLUDED(mu_);

  // Ticks every options.tick on deps.clock until Stop(). The first
  // publication is at Start (the static cap), so executors see a fresh cap.
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  void Stop();

  const std::string& provider() const { return provider_; }
  CapLimits limits() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Writes `cap` to the board (outside mu_: it may be a network call).
  void Publish(int cap) ABSL_LOCKS_EXCLUDED(mu_);
  std::optional<int> TelemetryLimitLocked(const runloom::MutexLock&, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const std::string provider_;
  const ConcurrencyOptions options_;
  const ControllerDeps deps_;
  Logger* const logger_;
  PeriodicTask task_;

  mutable runloom::Mutex mu_;
  double aimd_ ABSL_GUARDED_BY(mu_);
  double error_ewma_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<absl::Duration> latency_ewma_ ABSL_GUARDED_BY(mu_);
  std::optional<int64_t> telemetry_rpm_ ABSL_GUARDED_BY(mu_);
  absl::Time telemetry_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time last_cut_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::optional<int> ceiling_ ABSL_GUARDED_BY(mu_);  // last 429's cap - 1
  absl::Time ceiling_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool waited_ ABSL_GUARDED_BY(mu_) = false;        // this tick
  bool rate_limited_ ABSL_GUARDED_BY(mu_) = false;  // this tick
  bool board_failing_ ABSL_GUARDED_BY(mu_) = false;
  CapLimits last_ ABSL_GUARDED_BY(mu_);
};

}  // namespace runloom
