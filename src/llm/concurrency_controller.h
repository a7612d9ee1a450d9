// ConcurrencyController: the control loop that sets one provider's cap on
// model calls in flight (DESIGN.md "LLM calls"; reference 002, "Layer 4").
// Every process that executes steps runs one per provider; they meet on the
// CapBoard, never directly.
//
// Sense   Observe() gets every call's outcome from LlmSlots: latency, a 429,
//         another error, and the rate-limit telemetry the provider sent,
//         into this tick's window. It never fails and never blocks on I/O
//         except the cut at once after a 429 (CapBoard::Cut, bounded by the
//         board's own timeout: any process lowers the cap at once). Each
//         Tick() reports the window, the store pool's use since the last
//         tick and the CPU to the board (CapBoard::Report; a failed report
//         is one tick of telemetry lost, never a failed call).
// Decide  one controller per provider decides: the holder of the board's
//         lease (CapBoard::Lead, renewed every tick, `lease` long, so when
//         its process dies another takes over within `lease` + `tick`,
//         starting from the cap in force). Each tick it reads every
//         process's reports and takes the minimum of the limiters:
//           aimd       +additive_increase per tick while healthy and in
//                      demand (a call somewhere waited for a slot); times
//                      error_backoff when the error rate (EWMA over every
//                      process's calls) passes error_threshold; cut at once
//                      on a 429 (to the telemetry limit when its headers
//                      carry one, else times rate_limit_backoff), once per
//                      overshoot (not again for calls sent before the cut).
//           telemetry  x-ratelimit-limit-requests per second times the mean
//                      latency (Little's law), and one below the cap at
//                      the last 429; each while younger than telemetry_ttl.
//           pool       measured, not assumed: when more than pool_wait_high
//                      of the stores' connection acquisitions waited for a
//                      connection in a tick, or any gave up, the pool binds:
//                      the limit becomes pool_backoff times the calls in
//                      flight (or the limit already in force, if lower);
//                      each tick without pool pressure it rises by
//                      additive_increase, and is dropped above max_cap.
//                      (002: "the pool limiter, not the provider, is the
//                      binding constraint in practice".)
//           cpu        when a machine's CPUs are busier than cpu_high: the
//                      calls in flight scaled down by cpu_high / busy.
//           max_cap    a ceiling.
// Actuate the leader publishes the cap on the board with `ttl`, fenced by
//         its lease (a controller that lost it writes nothing); if every
//         controller stops, the cap expires and executors fall back to
//         static_cap on their own.
//
// Log lines (info): "llm concurrency: provider P cap A -> B (aimd .., ...)"
// on every change the leader decides; "llm concurrency: provider P: this
// process decides the cap now (ID)" on taking the lease and "...: ID decides
// the cap now" on losing it; (warning) when the board cannot be written.
//
// Thread-safety: Observe() from any thread; Tick() from one thread at a time
// (the task Start() runs, or a test).
#pragma once

#include "runloom/clock.h"
#include "runloom/env.h"
#include "runloom/mutex.h"
#include "runloom/pool_use.h"

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
#include <vector>

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
  // The deciding controller's lease: another process takes over this long
  // after the holder stopped renewing it (> tick; < ttl keeps a cap fresh
  // across a takeover).
  absl::Duration lease = absl::Seconds(3);
  double pool_wait_high = 0.8;  // share of acquisitions that waited
  double pool_backoff = 0.95;
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
  int cap = 0;          // the minimum, as published; a follower: the cap it read
  bool leader = false;  // this controller decided it
  int in_flight = 0;    // calls in flight in every process that reported
};

// "aimd 2, telemetry -, pool -, cpu 1": the limiters a cap is the minimum
// of, as the controller logs a change and the cap history shows it.
std::string DescribeCapLimits(const CapLimits& limits);

struct ControllerDeps {
  Clock* clock = nullptr;           // required
  Logger* logger = nullptr;         // nullptr = DefaultLogger()
  std::shared_ptr<CapBoard> board;  // required
  // This controller's id on the board; "" = NewControllerId().
  std::string id;
  // What the store's connection pool did so far (runloom/pool_use.h);
  // nullptr or size 0 = this process reports no pool.
  std::function<PoolUse()> pool;
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
  // Reports, then (as the leader) decides and publishes once; returns what
  // it published, or (a follower) the cap it read.
  CapLimits Tick() ABSL_LOCKS_EXCLUDED(mu_);

  // Ticks every options.tick on deps.clock until Stop(). The first
  // publication is at Start (the static cap), so executors see a fresh cap.
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  void Stop();

  const std::string& provider() const { return provider_; }
  // This controller's id on the board (the lease names it).
  const std::string& id() const { return id_; }
  CapLimits limits() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // This process's report for the tick (takes the window).
  SenseReport TakeReport() ABSL_LOCKS_EXCLUDED(mu_);
  // The leader's decision over the reports of this tick.
  CapLimits DecideLocked(const runloom::MutexLock&, const std::vector<SenseReport>& reports,
                         absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Logs the board's failure once (`what` failed), and its recovery: a
  // tick (`tick`) whose every call to the board succeeded.
  void NoteBoard(const absl::Status& s, const char* what, bool tick) ABSL_LOCKS_EXCLUDED(mu_);
  std::optional<int> TelemetryLimitLocked(const runloom::MutexLock&, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const std::string provider_;
  const std::string id_;
  const ConcurrencyOptions options_;
  const ControllerDeps deps_;
  Logger* const logger_;
  PeriodicTask task_;

  mutable runloom::Mutex mu_;
  // This tick's window: what this process's calls saw since the last
  // report (the counts of a SenseReport).
  SenseReport window_ ABSL_GUARDED_BY(mu_);
  // Local Sense: the latency this process's calls see (for a cut at once
  // to the telemetry limit) and the last pool reading.
  std::optional<absl::Duration> local_latency_ ABSL_GUARDED_BY(mu_);
  PoolUse pool_seen_ ABSL_GUARDED_BY(mu_);
  bool pool_baseline_ ABSL_GUARDED_BY(mu_) = false;  // pool_seen_ was read
  // Decide (meaningful while leading).
  bool leading_ ABSL_GUARDED_BY(mu_) = false;
  std::string holder_ ABSL_GUARDED_BY(mu_);  // the lease's holder last seen
  std::string cursor_ ABSL_GUARDED_BY(mu_);  // the last report read
  std::optional<int> pool_limit_ ABSL_GUARDED_BY(mu_);
  double aimd_ ABSL_GUARDED_BY(mu_);
  double error_ewma_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<absl::Duration> latency_ewma_ ABSL_GUARDED_BY(mu_);
  std::optional<int64_t> telemetry_rpm_ ABSL_GUARDED_BY(mu_);
  absl::Time telemetry_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time last_cut_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::optional<int> ceiling_ ABSL_GUARDED_BY(mu_);  // last 429's cap - 1
  absl::Time ceiling_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool board_failing_ ABSL_GUARDED_BY(mu_) = false;
  bool reports_malformed_ ABSL_GUARDED_BY(mu_) = false;  // said so already
  CapLimits last_ ABSL_GUARDED_BY(mu_);
};

}  // namespace runloom
