// The budget ledger of the PostgreSQL store (Store::SetTenantBudget,
// Reserve, SettleReservation, ReleaseReservations and the reads; the tables
// are schema version 8, as SQLite's version 6: docs/formats/sqlite-schema.md
// "budget_tenants").
//
// Reserve reads the run's and the tenant's figures FOR UPDATE, so
// concurrent reservations of one tenant queue on its row and the check and
// the reservation are one compare-and-set. Rows are always locked in the
// same order (run budget, then tenant), so reservers, settles and releases
// do not deadlock one another.
#include "core/status_macros.h"
#include "store/budget_codec.h"
#include "store/postgres/pg_store.h"

#include "absl/strings/str_cat.h"

#include <optional>
#include <utility>

namespace runloom::store_internal {
namespace {

constexpr char kUpsertTenantLimit[] =
    "INSERT INTO budget_tenants (tenant, limit_micros) VALUES ($1, $2)"
    " ON CONFLICT (tenant) DO UPDATE SET limit_micros = excluded.limit_micros"
    " RETURNING tenant, limit_micros, spent_micros, reserved_micros";
constexpr char kEnsureTenant[] =
    "INSERT INTO budget_tenants (tenant) VALUES ($1) ON CONFLICT (tenant) DO NOTHING";
constexpr char kLockTenant[] =
    "SELECT tenant, limit_micros, spent_micros, reserved_micros FROM budget_tenants"
    " WHERE tenant = $1 FOR UPDATE";
constexpr char kSelectTenant[] =
    "SELECT tenant, limit_micros, spent_micros, reserved_micros FROM budget_tenants"
    " WHERE tenant = $1";
constexpr char kListTenants[] =
    "SELECT tenant, limit_micros, spent_micros, reserved_micros FROM budget_tenants"
    " ORDER BY tenant";
constexpr char kEnsureRun[] =
    "INSERT INTO budget_runs (run_id, tenant, limit_micros) VALUES ($1, $2, $3)"
    " ON CONFLICT (run_id) DO NOTHING";
constexpr char kSelectRun[] =
    "SELECT run_id, tenant, limit_micros, spent_micros, reserved_micros FROM budget_runs"
    " WHERE run_id = $1";
constexpr char kLockRun[] =
    "SELECT run_id, tenant, limit_micros, spent_micros, reserved_micros FROM budget_runs"
    " WHERE run_id = $1 FOR UPDATE";
constexpr char kSelectReservation[] =
    "SELECT " RUNLOOM_RESERVATION_COLUMNS
    " FROM budget_reservations"
    " WHERE run_id = $1 AND step_path = $2 AND attempt = $3 AND lease_token = $4";
constexpr char kListReservations[] = "SELECT " RUNLOOM_RESERVATION_COLUMNS
                                     " FROM budget_reservations WHERE run_id = $1"
                                     " ORDER BY created_at, step_path, attempt, lease_token";
constexpr char kInsertReservation[] =
    "INSERT INTO budget_reservations (run_id, step_path, attempt, lease_token, tenant, state,"
    " amount_micros, created_at) VALUES ($1, $2, $3, $4, $5, 'reserved', $6, runloom_now())"
    " RETURNING " RUNLOOM_RESERVATION_COLUMNS;
// Adds $2 to the reserved and $3 to the spent figures (either may be 0).
constexpr char kBookTenant[] =
    "UPDATE budget_tenants SET reserved_micros = reserved_micros + $2,"
    " spent_micros = spent_micros + $3 WHERE tenant = $1";
constexpr char kBookRun[] =
    "UPDATE budget_runs SET reserved_micros = reserved_micros + $2,"
    " spent_micros = spent_micros + $3 WHERE run_id = $1";
// The old state comes back through the self-join (UPDATE ... FROM) so the
// caller knows whether the amount was still reserved.
constexpr char kSettle[] =
    "UPDATE budget_reservations r SET state = 'settled', cost_micros = $5,"
    " finished_at = runloom_now() FROM budget_reservations o"
    " WHERE r.run_id = $1 AND r.step_path = $2 AND r.attempt = $3 AND r.lease_token = $4"
    " AND r.state <> 'settled' AND o.run_id = r.run_id AND o.step_path = r.step_path"
    " AND o.attempt = r.attempt AND o.lease_token = r.lease_token"
    " RETURNING o.state, r.amount_micros, r.tenant";
constexpr char kReleaseOpen[] =
    "UPDATE budget_reservations SET state = 'released', finished_at = runloom_now()"
    " WHERE run_id = $1 AND state = 'reserved' RETURNING amount_micros";

PgParams KeyParams(const BudgetKey& key) {
  PgParams p;
  p.Text(key.run_id).Text(key.step_path).Int(key.attempt).Text(key.lease_token);
  return p;
}

absl::StatusOr<std::optional<Reservation>> LoadReservation(PgConn& c, const BudgetKey& key) {
  RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kSelectReservation, KeyParams(key)));
  if (r.rows() == 0) return std::optional<Reservation>();
  RUNLOOM_ASSIGN_OR_RETURN(Reservation res, ReservationFromRow(r.row(0)));
  return std::optional<Reservation>(std::move(res));
}

RunBudget RunBudgetFromRow(const PgRow& row) {
  return RunBudget{
      .run_id = row.ColumnText(0), .tenant = row.ColumnText(1), .figures = FiguresFromRow(row, 2)};
}

absl::Status Book(PgConn& c, const std::string& run_id, const std::string& tenant, int64_t reserved,
                  int64_t spent) {
  // Run budget first, then tenant: the lock order of Reserve.
  RUNLOOM_RETURN_IF_ERROR(
      c.Exec(kBookRun, PgParams().Text(run_id).Int(reserved).Int(spent)).status());
  if (tenant.empty()) return absl::OkStatus();
  return c.Exec(kBookTenant, PgParams().Text(tenant).Int(reserved).Int(spent)).status();
}

}  // namespace

absl::StatusOr<TenantBudget> PgStore::SetTenantBudget(const std::string& tenant,
                                                      std::optional<int64_t> limit_micros) {
  if (tenant.empty()) return absl::InvalidArgumentError("a tenant budget needs a tenant name");
  if (limit_micros.has_value()) {
    RUNLOOM_RETURN_IF_ERROR(CheckAmount(*limit_micros, "the budget of tenant " + tenant));
  }
  TenantBudget out;
  RUNLOOM_RETURN_IF_ERROR(h_->Txn([&](PgConn& c) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(
        PgResult r, c.Exec(kUpsertTenantLimit, PgParams().Text(tenant).OptionalInt(limit_micros)));
    out = TenantBudget{.tenant = r.row(0).ColumnText(0), .figures = FiguresFromRow(r.row(0), 1)};
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::vector<TenantBudget>> PgStore::ListTenantBudgets() {
  std::vector<TenantBudget> out;
  RUNLOOM_RETURN_IF_ERROR(h_->Read([&](PgConn& c) -> absl::Status {
    out.clear();  // Read may run the body again after a lost connection
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kListTenants));
    for (int i = 0; i < r.rows(); ++i) {
      out.push_back({.tenant = r.row(i).ColumnText(0), .figures = FiguresFromRow(r.row(i), 1)});
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::optional<TenantBudget>> PgStore::GetTenantBudget(const std::string& tenant) {
  if (tenant.empty()) return absl::InvalidArgumentError("a tenant budget needs a tenant name");
  std::optional<TenantBudget> out;
  RUNLOOM_RETURN_IF_ERROR(h_->Read([&](PgConn& c) -> absl::Status {
    out.reset();  // Read may run the body again after a lost connection
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kSelectTenant, PgParams().Text(tenant)));
    if (r.rows() > 0) {
      out = TenantBudget{.tenant = r.row(0).ColumnText(0), .figures = FiguresFromRow(r.row(0), 1)};
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<RunBudget> PgStore::GetRunBudget(const std::string& run_id) {
  std::optional<RunBudget> out;
  RUNLOOM_RETURN_IF_ERROR(h_->Read([&](PgConn& c) -> absl::Status {
    out.reset();
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kSelectRun, PgParams().Text(run_id)));
    if (r.rows() > 0) out = RunBudgetFromRow(r.row(0));
    return absl::OkStatus();
  }));
  if (!out.has_value()) {
    return absl::NotFoundError(absl::StrCat("run ", run_id, " has no budget row (no model call)"));
  }
  return std::move(*out);
}

absl::StatusOr<std::vector<Reservation>> PgStore::ListReservations(const std::string& run_id) {
  std::vector<Reservation> out;
  RUNLOOM_RETURN_IF_ERROR(h_->Read([&](PgConn& c) -> absl::Status {
    out.clear();
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kListReservations, PgParams().Text(run_id)));
    for (int i = 0; i < r.rows(); ++i) {
      RUNLOOM_ASSIGN_OR_RETURN(Reservation res, ReservationFromRow(r.row(i)));
      out.push_back(std::move(res));
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<ReserveResult> PgStore::Reserve(const BudgetRequest& request) {
  RUNLOOM_RETURN_IF_ERROR(CheckBudgetRequest(request));
  ReserveResult out;
  RUNLOOM_RETURN_IF_ERROR(h_->Txn([&](PgConn& c) -> absl::Status {
    out = ReserveResult{};  // Txn may run the body again
    // Holds the run row until the reservation commits: a takeover waits.
    RUNLOOM_RETURN_IF_ERROR(PgCheckLeaseFence(c, request.key.run_id, request.key.lease_token));
    PgParams ensure;
    ensure.Text(request.key.run_id).Text(request.tenant).OptionalInt(request.run_limit_micros);
    RUNLOOM_RETURN_IF_ERROR(c.Exec(kEnsureRun, ensure).status());
    RUNLOOM_ASSIGN_OR_RETURN(PgResult run, c.Exec(kLockRun, PgParams().Text(request.key.run_id)));
    if (run.rows() == 0) return absl::InternalError("budget row of run vanished");
    const RunBudget budget = RunBudgetFromRow(run.row(0));
    out.run = budget.figures;
    // The run's first reservation fixed its tenant.
    if (!budget.tenant.empty()) {
      RUNLOOM_RETURN_IF_ERROR(c.Exec(kEnsureTenant, PgParams().Text(budget.tenant)).status());
      RUNLOOM_ASSIGN_OR_RETURN(PgResult t, c.Exec(kLockTenant, PgParams().Text(budget.tenant)));
      if (t.rows() > 0) out.tenant = FiguresFromRow(t.row(0), 1);
    }
    RUNLOOM_ASSIGN_OR_RETURN(std::optional<Reservation> found, LoadReservation(c, request.key));
    if (found.has_value()) {
      if (found->state != ReservationState::kReserved) return ReservationClosed(*found);
      out.granted = true;
      out.reservation = std::move(found);
      return absl::OkStatus();
    }
    DecideReserve(request.amount_micros, out);
    if (!out.granted) return absl::OkStatus();
    PgParams ins = KeyParams(request.key);
    ins.Text(budget.tenant).Int(request.amount_micros);
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kInsertReservation, ins));
    RUNLOOM_ASSIGN_OR_RETURN(out.reservation, ReservationFromRow(r.row(0)));
    return Book(c, request.key.run_id, budget.tenant, request.amount_micros, /*spent=*/0);
  }));
  return out;
}

absl::StatusOr<Reservation> PgStore::SettleReservation(const BudgetKey& key, int64_t cost_micros) {
  RUNLOOM_RETURN_IF_ERROR(CheckBudgetKey(key));
  RUNLOOM_RETURN_IF_ERROR(CheckAmount(cost_micros, "the cost of " + ReservationName(key)));
  std::optional<Reservation> out;
  RUNLOOM_RETURN_IF_ERROR(h_->Txn([&](PgConn& c) -> absl::Status {
    out.reset();
    // Lock order: the run's budget row before the reservation's own update.
    RUNLOOM_RETURN_IF_ERROR(c.Exec(kLockRun, PgParams().Text(key.run_id)).status());
    PgParams p = KeyParams(key);
    p.Int(cost_micros);
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kSettle, p));
    if (r.rows() > 0) {
      const bool was_reserved = r.row(0).ColumnText(0) == "reserved";
      const int64_t unreserve = was_reserved ? -r.row(0).ColumnInt(1) : int64_t{0};
      RUNLOOM_RETURN_IF_ERROR(Book(c, key.run_id, r.row(0).ColumnText(2), unreserve, cost_micros));
    }
    RUNLOOM_ASSIGN_OR_RETURN(out, LoadReservation(c, key));
    return absl::OkStatus();
  }));
  if (!out.has_value()) {
    return absl::NotFoundError(absl::StrCat(ReservationName(key), " was never reserved"));
  }
  return std::move(*out);
}

absl::StatusOr<int64_t> PgStore::ReleaseReservations(const std::string& run_id) {
  int64_t released = 0;
  RUNLOOM_RETURN_IF_ERROR(h_->Txn([&](PgConn& c) -> absl::Status {
    released = 0;
    RUNLOOM_ASSIGN_OR_RETURN(PgResult run, c.Exec(kLockRun, PgParams().Text(run_id)));
    if (run.rows() == 0) return absl::OkStatus();  // never reserved
    const RunBudget budget = RunBudgetFromRow(run.row(0));
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kReleaseOpen, PgParams().Text(run_id)));
    int64_t amount = 0;
    for (int i = 0; i < r.rows(); ++i) amount += r.row(i).ColumnInt(0);
    released = r.rows();
    if (released == 0) return absl::OkStatus();
    return Book(c, run_id, budget.tenant, -amount, /*spent=*/0);
  }));
  return released;
}

}  // namespace runloom::store_internal
