// StateGauges (service/): the gauges of what the store holds, for every
// process that exports metrics (`serve`, `worker --metrics-listen`):
//   runloom_runs_active{status}          runs queued (the queue depth),
//                                        running, paused and waiting
//   runloom_dead_letters                 queue messages dead-lettered and not
//                                        redriven (Transport::CountDeadLetters)
//   runloom_budget_limit_micros{tenant}  a tenant's limit (tenants with one)
//   runloom_budget_spent_micros{tenant}  booked: settled and charged calls
//   runloom_budget_reserved_micros{tenant}  open reservations: calls in flight
//   runloom_budget_left_micros{tenant}   limit - spent - reserved (with a limit)
//   runloom_state_gauges_errors_total    refreshes that could not read the store
// They describe the whole deployment, not this process: every process
// exports the same figures (take max() across them). They are refreshed every
// `period` (10 s by default) on a thread of their own, never at scrape time,
// so a scrape costs the store nothing; each refresh is one index read of the
// runs in flight, one of the tenants (at most kTenantBound) and one of the
// dead letters.
//
// Thread-safety: Start() and Stop() may be called from any thread; the
// refresh runs on the task's thread (prometheus-cpp's gauges are atomic).
#pragma once

#include "runloom/clock.h"
#include "runloom/env.h"
#include "runloom/store.h"
#include "runloom/transport.h"

#include "core/periodic_task.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <memory>
#include <string>

namespace prometheus {
class Counter;
class Gauge;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace runloom::engine_internal {

class StateGauges {
 public:
  static constexpr int kTenantBound = 1'000;

  // Registers the families on `registry` (null: the result does nothing)
  // and reads the store once. Every pointer must outlive the result. kInvalidArgument when the
  // registry refuses them (prometheus-cpp throws; this returns).
  static absl::StatusOr<std::unique_ptr<StateGauges>> Create(prometheus::Registry* registry,
                                                             Store* store, Transport* transport,
                                                             Clock* clock, Logger* logger,
                                                             absl::Duration period);
  StateGauges(const StateGauges&) = delete;
  StateGauges& operator=(const StateGauges&) = delete;
  ~StateGauges();

  void Start();
  void Stop();
  // One refresh now, on the caller's thread. Create does one; Start's
  // first tick is one period later.
  void RefreshOnce();

 private:
  StateGauges() = default;

  Store* store_ = nullptr;
  Transport* transport_ = nullptr;
  Logger* logger_ = nullptr;
  prometheus::Family<prometheus::Gauge>* runs_ = nullptr;  // null: nothing to do
  prometheus::Gauge* dead_letters_ = nullptr;
  prometheus::Family<prometheus::Gauge>* limit_ = nullptr;
  prometheus::Family<prometheus::Gauge>* spent_ = nullptr;
  prometheus::Family<prometheus::Gauge>* reserved_ = nullptr;
  prometheus::Family<prometheus::Gauge>* left_ = nullptr;
  prometheus::Counter* errors_ = nullptr;
  std::unique_ptr<PeriodicTask> task_;
};

}  // namespace runloom::engine_internal
