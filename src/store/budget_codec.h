// Row <-> record conversion and argument checks for the budget ledger,
// shared by the SQLite and PostgreSQL stores (docs/formats/sqlite-schema.md,
// "budget_tenants", "budget_runs", "budget_reservations"): the same columns
// on both, amounts as integer micro-units, times as Unix microseconds. A
// backend's row type provides ColumnText, ColumnInt, ColumnIsNull, ColumnTime
// and ColumnOptionalTime.
//
// Thread-safety: stateless functions.
#pragma once

#include "runloom/budget_ledger.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#include <optional>
#include <string>

// The budget_reservations columns in the order ReservationFromRow reads them.
#define RUNLOOM_RESERVATION_COLUMNS                                                      \
  "run_id, step_path, attempt, lease_token, tenant, state, amount_micros, cost_micros, " \
  "created_at, finished_at"

namespace runloom::store_internal {

// "run r_x: reservation draft#2" for messages.
inline std::string ReservationName(const BudgetKey& key) {
  return absl::StrCat("run ", key.run_id, ": reservation ", key.step_path, "#", key.attempt);
}

inline absl::Status CheckBudgetKey(const BudgetKey& key) {
  if (key.run_id.empty() || key.step_path.empty() || key.attempt < 1 || key.lease_token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a reservation key needs a run id, a step path, an attempt >= 1 and a lease token (got '",
        key.run_id, "', '", key.step_path, "', ", key.attempt, ", ",
        key.lease_token.empty() ? "no token" : "a token", ")"));
  }
  return absl::OkStatus();
}

inline absl::Status CheckAmount(int64_t micros, const std::string& what) {
  if (micros < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is ", micros, " micro-units; it must be 0 or more"));
  }
  return absl::OkStatus();
}

// Reserve's argument checks.
inline absl::Status CheckBudgetRequest(const BudgetRequest& r) {
  if (absl::Status s = CheckBudgetKey(r.key); !s.ok()) return s;
  if (absl::Status s = CheckAmount(r.amount_micros, "the amount of " + ReservationName(r.key));
      !s.ok()) {
    return s;
  }
  if (r.run_limit_micros.has_value()) {
    return CheckAmount(*r.run_limit_micros, "the budget of run " + r.key.run_id);
  }
  return absl::OkStatus();
}

// The refusal of a Reserve on a key that is no longer reserved.
inline absl::Status ReservationClosed(const Reservation& r) {
  return absl::FailedPreconditionError(
      absl::StrCat(ReservationName(r.key), " is already ", std::string(ToString(r.state)),
                   "; a new call is a new attempt and needs its own reservation"));
}

// Figures from three columns starting at `col`: limit (NULL = none), spent,
// reserved.
template <typename Row>
BudgetFigures FiguresFromRow(const Row& st, int col) {
  BudgetFigures f;
  if (!st.ColumnIsNull(col)) f.limit_micros = st.ColumnInt(col);
  f.spent_micros = st.ColumnInt(col + 1);
  f.reserved_micros = st.ColumnInt(col + 2);
  return f;
}

template <typename Row>
absl::StatusOr<Reservation> ReservationFromRow(const Row& st) {
  Reservation r;
  r.key.run_id = st.ColumnText(0);
  r.key.step_path = st.ColumnText(1);
  r.key.attempt = st.ColumnInt(2);
  r.key.lease_token = st.ColumnText(3);
  r.tenant = st.ColumnText(4);
  const std::string state = st.ColumnText(5);
  std::optional<ReservationState> parsed = ParseReservationState(state);
  if (!parsed.has_value()) {
    return absl::DataLossError(
        absl::StrCat(ReservationName(r.key), " has unknown state '", state, "' in the database"));
  }
  r.state = *parsed;
  r.amount_micros = st.ColumnInt(6);
  if (!st.ColumnIsNull(7)) r.cost_micros = st.ColumnInt(7);
  r.created_at = st.ColumnTime(8);
  r.finished_at = st.ColumnOptionalTime(9);
  return r;
}

// The decision of Reserve on the figures read under the transaction:
// fills result.granted / refused_by (the tenant is asked first).
inline void DecideReserve(int64_t amount_micros, ReserveResult& result) {
  if (!result.tenant.Admits(amount_micros)) {
    result.refused_by = "tenant";
  } else if (!result.run.Admits(amount_micros)) {
    result.refused_by = "run";
  }
  result.granted = result.refused_by.empty();
}

}  // namespace runloom::store_internal
