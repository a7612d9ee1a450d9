// LlmCaps: an engine's part in the adaptive LLM concurrency cap. In a
// process that executes steps it starts the controllers of the llm step's
// caps (steps/builtin_steps.h LlmConcurrencyOf) on the engine's clock and
// logger, publishing to the backend's cap board (a Redis key with a Redis
// queue, where every worker's calls in flight are counted together; else
// in-process), with the store's pool and this machine's CPU as
// limiters; Stop() stops them (executors then fall back to static caps).
//
// Metrics on env.metrics (docs/operations.md):
//   runloom_llm_concurrency_cap{provider}   the cap last decided
//   runloom_llm_calls_in_flight{provider}   model calls in flight here
//   runloom_llm_concurrency_leader{provider} 1 while this process decides
//
// It also keeps, per cap, the last kMaxLlmCapHistory changes of the cap this
// process's controller saw (time, cap, the limiters), in memory: what
// GET /api/v1/llm/caps shows as the cap's history. Per process and bounded;
// a restart forgets it.
//
// Thread-safety: Start() and Stop() may be called from any thread.
#pragma once

#include "runloom/clock.h"
#include "runloom/engine.h"
#include "runloom/env.h"
#include "runloom/mutex.h"

#include "llm/cap_board.h"
#include "llm/cpu_load.h"
#include "llm/llm_concurrency.h"

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace prometheus {
class Gauge;
template <typename T>
class Family;
}  // namespace prometheus

namespace runloom::engine_internal {

class LlmCaps {
 public:
  // `caps` null: nothing to do. `board` null: in-process. `pool_use` null:
  // no pool to report (the pool limiter then senses other processes' only).
  // kInvalidArgument when the metrics registry refuses the gauges.
  static absl::StatusOr<std::unique_ptr<LlmCaps>> Create(LlmConcurrency* caps,
                                                         std::shared_ptr<CapBoard> board,
                                                         std::function<PoolUse()> pool_use,
                                                         const Env& env);
  ~LlmCaps() { Stop(); }
  LlmCaps(const LlmCaps&) = delete;
  LlmCaps& operator=(const LlmCaps&) = delete;

  // Idempotent.
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // Every cap (LlmConcurrency::Caps) with the changes recorded for it.
  std::vector<LlmCapInfo> Snapshot() const ABSL_LOCKS_EXCLUDED(history_mu_);

  // Records `limits` for `provider` at `at` when its cap differs from the
  // last one recorded; keeps the newest kMaxLlmCapHistory.
  void Record(const std::string& provider, const CapLimits& limits, absl::Time at)
      ABSL_LOCKS_EXCLUDED(history_mu_);

 private:
  LlmCaps() = default;

  // Constant after Create.
  LlmConcurrency* caps_ = nullptr;
  std::shared_ptr<CapBoard> board_;
  std::function<PoolUse()> pool_use_;
  Clock* clock_ = nullptr;
  Logger* logger_ = nullptr;
  std::unique_ptr<CpuLoad> cpu_;
  prometheus::Family<prometheus::Gauge>* cap_gauge_ = nullptr;
  prometheus::Family<prometheus::Gauge>* in_flight_gauge_ = nullptr;
  prometheus::Family<prometheus::Gauge>* leader_gauge_ = nullptr;

  runloom::Mutex mu_;
  std::unique_ptr<LlmConcurrency::Running> running_ ABSL_GUARDED_BY(mu_);

  // Written by the controllers' ticks, read by Snapshot().
  mutable runloom::Mutex history_mu_;
  std::map<std::string, std::deque<LlmCapDecision>> history_ ABSL_GUARDED_BY(history_mu_);
};

}  // namespace runloom::engine_internal
