#include "engine/service/state_gauges.h"

#include "runloom/budget_ledger.h"

#include "core/log.h"

#include "absl/strings/str_cat.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

#include <exception>
#include <utility>
#include <vector>

namespace runloom::engine_internal {

absl::StatusOr<std::unique_ptr<StateGauges>> StateGauges::Create(
    prometheus::Registry* registry, Store* store, Transport* transport, Clock* clock,
    Logger* logger, absl::Duration period) {
  std::unique_ptr<StateGauges> out(new StateGauges());
  if (registry == nullptr) return out;
  out->store_ = store;
  out->transport_ = transport;
  out->logger_ = logger;
  try {
    out->runs_ = &prometheus::BuildGauge()
                      .Name("runloom_runs_active")
                      .Help("Runs in each status that is not terminal (queued: the queue depth)")
                      .Register(*registry);
    out->dead_letters_ = &prometheus::BuildGauge()
                              .Name("runloom_dead_letters")
                              .Help("Queue messages dead-lettered and not yet redriven")
                              .Register(*registry)
                              .Add({});
    out->limit_ = &prometheus::BuildGauge()
                       .Name("runloom_budget_limit_micros")
                       .Help("A tenant's budget limit, in millionths of the price unit")
                       .Register(*registry);
    out->spent_ = &prometheus::BuildGauge()
                       .Name("runloom_budget_spent_micros")
                       .Help("What a tenant's settled and charged model calls booked")
                       .Register(*registry);
    out->reserved_ = &prometheus::BuildGauge()
                          .Name("runloom_budget_reserved_micros")
                          .Help("A tenant's open reservations: model calls in flight")
                          .Register(*registry);
    out->left_ = &prometheus::BuildGauge()
                      .Name("runloom_budget_left_micros")
                      .Help("A tenant's limit less spent and reserved (tenants with a limit)")
                      .Register(*registry);
    out->errors_ = &prometheus::BuildCounter()
                        .Name("runloom_state_gauges_errors_total")
                        .Help("Refreshes of the state gauges that could not read the store")
                        .Register(*registry)
                        .Add({});
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("state gauges: ", e.what()));
  }
  StateGauges* self = out.get();
  out->task_ = std::make_unique<PeriodicTask>(clock, period, [self] { self->RefreshOnce(); });
  // Read once now: a scrape that comes before the engine starts (the
  // metrics endpoint may listen first) finds the figures, not empty families.
  out->RefreshOnce();
  return out;
}

StateGauges::~StateGauges() { Stop(); }

void StateGauges::Start() {
  if (task_ != nullptr) task_->Start();
}

void StateGauges::Stop() {
  if (task_ != nullptr) task_->Stop();
}

void StateGauges::RefreshOnce() {
  if (runs_ == nullptr) return;
  // Each figure is set when its read succeeds: a failed read leaves the
  // last value (and counts the failure) rather than report a false zero.
  bool failed = false;
  absl::StatusOr<ActiveRunCounts> counts = store_->CountActiveRuns();
  if (counts.ok()) {
    runs_->Add({{"status", "queued"}}).Set(static_cast<double>(counts->queued));
    runs_->Add({{"status", "running"}}).Set(static_cast<double>(counts->running));
    runs_->Add({{"status", "paused"}}).Set(static_cast<double>(counts->paused));
    runs_->Add({{"status", "waiting"}}).Set(static_cast<double>(counts->waiting));
  } else {
    failed = true;
    Log(logger_, LogLevel::kWarning, "state gauges: counting runs: ", counts.status().ToString());
  }
  absl::StatusOr<int64_t> dead = transport_->CountDeadLetters();
  if (dead.ok()) {
    dead_letters_->Set(static_cast<double>(*dead));
  } else {
    failed = true;
    Log(logger_, LogLevel::kWarning, "state gauges: dead letters: ", dead.status().ToString());
  }
  absl::StatusOr<std::vector<TenantBudget>> tenants = store_->ListTenantBudgets();
  if (tenants.ok()) {
    int n = 0;
    for (const TenantBudget& t : *tenants) {
      if (++n > kTenantBound) break;
      const prometheus::Labels labels = {{"tenant", t.tenant}};
      const BudgetFigures& f = t.figures;
      spent_->Add(labels).Set(static_cast<double>(f.spent_micros));
      reserved_->Add(labels).Set(static_cast<double>(f.reserved_micros));
      if (f.limit_micros.has_value()) {
        limit_->Add(labels).Set(static_cast<double>(*f.limit_micros));
        left_->Add(labels).Set(static_cast<double>(*f.left_micros()));
      } else if (limit_->Has(labels)) {
        // The limit was removed: no limit is not a limit of 0.
        limit_->Remove(&limit_->Add(labels));
        left_->Remove(&left_->Add(labels));
      }
    }
  } else {
    failed = true;
    Log(logger_, LogLevel::kWarning, "state gauges: budgets: ", tenants.status().ToString());
  }
  if (failed) errors_->Increment();
}

}  // namespace runloom::engine_internal
