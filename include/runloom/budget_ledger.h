// The budget ledger: every model call is paid for in advance.
//
// Budgets are kept in the store (every backend) in micro-units (millionths
// of the price unit, as llm/config.h prices are), per tenant and per run:
// a limit (none = unlimited), what was spent, and what is reserved by calls
// in flight. Before a model call is sent its worst case is reserved
// (Store::Reserve, a compare-and-set that refuses when the tenant or the
// run has less left than the amount); after the answer the reservation is
// settled with the real cost (Store::SettleReservation); a request whose
// answer was lost after it was sent (cancelled, timed out, cut) may have
// been billed and settles at its worst case (llm_step.cc). A call that
// could not reserve is not sent.
//
// A reservation is keyed by (run, step path, attempt, lease): recovery releases
// the reservations an executor left when it died (Store::ReleaseReservations,
// called when a run's expired lease is reclaimed), so nothing is leaked. A
// released amount is charged as spent (the call's fate is unknown: it may
// have been answered and paid); a late settle replaces the charge with the
// real cost.
//
// These are plain values; Store (store.h) reads and writes them.
// Thread-safety: values only.
#pragma once

#include "absl/time/time.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace runloom {

// The identity of one reservation: one attempt of one model call, under
// one lease of the run. Step attempts start again at 1 when a run is
// re-executed (recovery after a crash, a rerun), so the lease token tells
// those executions apart; it also fences Store::Reserve.
struct BudgetKey {
  std::string run_id;
  std::string step_path;    // e.g. "draft" or "fixes[2]/draft"
  int64_t attempt = 0;      // the step's attempt number (1-based)
  std::string lease_token;  // the run's lease the call runs under
};

// A budget as the ledger keeps it.
struct BudgetFigures {
  std::optional<int64_t> limit_micros;  // nullopt = no limit
  int64_t spent_micros = 0;             // settled calls
  int64_t reserved_micros = 0;          // calls in flight (reserved, not yet settled)

  // limit - spent - reserved (may be negative after a settle above its
  // reservation); nullopt without a limit.
  std::optional<int64_t> left_micros() const;
  // True when `amount` more can be reserved: no limit, or amount <= left.
  bool Admits(int64_t amount_micros) const;
};

// An amount in price units as text ("2.50", "0.000001", "40"): digits with
// up to 6 decimals and up to 12 integer digits, no sign or exponent, exact
// (no floating point). nullopt when `text` is not such an amount.
std::optional<int64_t> ParseAmountMicros(std::string_view text);
// The other way: 2500000 -> "2.5", 1 -> "0.000001", -40 -> "-0.00004".
std::string FormatAmountMicros(int64_t micros);

struct TenantBudget {
  std::string tenant;
  BudgetFigures figures;
};

struct RunBudget {
  std::string run_id;
  std::string tenant;  // "" = the run has no tenant
  BudgetFigures figures;
};

// kReserved: the call may be in flight; kSettled: its cost is booked;
// kReleased: recovery ended it (the executor died or lost its lease before
// settling) and charged its amount.
enum class ReservationState { kReserved, kSettled, kReleased };
std::string_view ToString(ReservationState s);
std::optional<ReservationState> ParseReservationState(std::string_view s);

// One row of the reservations table.
struct Reservation {
  BudgetKey key;
  std::string tenant;
  ReservationState state = ReservationState::kReserved;
  int64_t amount_micros = 0;
  // Settled: the real cost. Released: the amount charged (amount_micros;
  // nullopt in rows released before releases charged).
  std::optional<int64_t> cost_micros;
  absl::Time created_at;
  std::optional<absl::Time> finished_at;  // settled or released
};

// What Store::Reserve asks for.
struct BudgetRequest {
  // key.lease_token must be the run's current lease: only the executor
  // holding the run (status running, that token, lease not expired)
  // reserves.
  BudgetKey key;
  // The run's tenant ("" = none: only the run's own budget applies). A
  // tenant without a configured limit is tracked but not limited.
  std::string tenant;
  // The run's own limit (nullopt = none). The run's first reservation
  // records tenant and limit; later requests do not change them.
  std::optional<int64_t> run_limit_micros;
  int64_t amount_micros = 0;  // the call's worst case
};

struct ReserveResult {
  // True: `reservation` holds the amount and the call may be sent. False:
  // the tenant or the run has too little left; nothing was reserved.
  bool granted = false;
  std::optional<Reservation> reservation;  // set when granted
  // The figures the decision was made on (before this reservation).
  BudgetFigures tenant;  // all zero and no limit when the run has no tenant
  BudgetFigures run;
  // When refused: "tenant" or "run", whichever has too little left.
  std::string refused_by;
};

}  // namespace runloom
