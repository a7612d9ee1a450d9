// The budget ledger of the SQLite store (Store::SetTenantBudget, Reserve,
// SettleReservation, ReleaseReservations and the reads; the tables are
// schema version 6, docs/formats/sqlite-schema.md "budget_tenants").
//
// Every write runs in the writer's one transaction (BEGIN IMMEDIATE), so
// reading the figures and reserving is a compare-and-set.
#include "core/status_macros.h"
#include "store/budget_codec.h"
#include "store/sqlite/codec.h"
#include "store/sqlite/sqlite_store.h"

#include "absl/strings/str_cat.h"

#include <optional>
#include <utility>

namespace runloom::store_internal {
namespace {

constexpr char kUpsertTenantLimit[] =
    "INSERT INTO budget_tenants (tenant, limit_micros) VALUES (?1, ?2)"
    " ON CONFLICT (tenant) DO UPDATE SET limit_micros = excluded.limit_micros";
constexpr char kEnsureTenant[] =
    "INSERT INTO budget_tenants (tenant) VALUES (?1) ON CONFLICT (tenant) DO NOTHING";
constexpr char kSelectTenant[] =
    "SELECT tenant, limit_micros, spent_micros, reserved_micros FROM budget_tenants"
    " WHERE tenant = ?1";
constexpr char kListTenants[] =
    "SELECT tenant, limit_micros, spent_micros, reserved_micros FROM budget_tenants"
    " ORDER BY tenant";
constexpr char kEnsureRun[] =
    "INSERT INTO budget_runs (run_id, tenant, limit_micros) VALUES (?1, ?2, ?3)"
    " ON CONFLICT (run_id) DO NOTHING";
constexpr char kSelectRun[] =
    "SELECT run_id, tenant, limit_micros, spent_micros, reserved_micros FROM budget_runs"
    " WHERE run_id = ?1";
constexpr char kSelectReservation[] =
    "SELECT " RUNLOOM_RESERVATION_COLUMNS
    " FROM budget_reservations"
    " WHERE run_id = ?1 AND step_path = ?2 AND attempt = ?3 AND lease_token = ?4";
constexpr char kListReservations[] = "SELECT " RUNLOOM_RESERVATION_COLUMNS
                                     " FROM budget_reservations WHERE run_id = ?1"
                                     " ORDER BY created_at, step_path, attempt, lease_token";
constexpr char kInsertReservation[] =
    "INSERT INTO budget_reservations (run_id, step_path, attempt, lease_token, tenant, state,"
    " amount_micros, created_at) VALUES (?1, ?2, ?3, ?4, ?5, 'reserved', ?6, ?7)";
// Adds ?2 to the reserved and ?3 to the spent figures (either may be 0).
constexpr char kBookTenant[] =
    "UPDATE budget_tenants SET reserved_micros = reserved_micros + ?2,"
    " spent_micros = spent_micros + ?3 WHERE tenant = ?1";
constexpr char kBookRun[] =
    "UPDATE budget_runs SET reserved_micros = reserved_micros + ?2,"
    " spent_micros = spent_micros + ?3 WHERE run_id = ?1";
constexpr char kSettle[] =
    "UPDATE budget_reservations SET state = 'settled', cost_micros = ?5, finished_at = ?6"
    " WHERE run_id = ?1 AND step_path = ?2 AND attempt = ?3 AND lease_token = ?4"
    " AND state <> 'settled'";
constexpr char kSumOpen[] =
    "SELECT count(*), coalesce(sum(amount_micros), 0) FROM budget_reservations"
    " WHERE run_id = ?1 AND state = 'reserved'";
constexpr char kReleaseOpen[] =
    "UPDATE budget_reservations SET state = 'released', finished_at = ?2"
    " WHERE run_id = ?1 AND state = 'reserved'";

void BindKey(Statement& st, const BudgetKey& key) {
  st.BindText(1, key.run_id);
  st.BindText(2, key.step_path);
  st.BindInt(3, key.attempt);
  st.BindText(4, key.lease_token);
}

absl::StatusOr<std::optional<Reservation>> LoadReservation(Db& db, const BudgetKey& key) {
  RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kSelectReservation));
  BindKey(st, key);
  RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<Reservation>();
  RUNLOOM_ASSIGN_OR_RETURN(Reservation r, ReservationFromRow(st));
  return std::optional<Reservation>(std::move(r));
}

absl::StatusOr<std::optional<TenantBudget>> LoadTenant(Db& db, const std::string& tenant) {
  RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kSelectTenant));
  st.BindText(1, tenant);
  RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<TenantBudget>();
  return std::optional<TenantBudget>(
      TenantBudget{.tenant = st.ColumnText(0), .figures = FiguresFromRow(st, 1)});
}

absl::StatusOr<std::optional<RunBudget>> LoadRunBudget(Db& db, const std::string& run_id) {
  RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kSelectRun));
  st.BindText(1, run_id);
  RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<RunBudget>();
  return std::optional<RunBudget>(RunBudget{
      .run_id = st.ColumnText(0), .tenant = st.ColumnText(1), .figures = FiguresFromRow(st, 2)});
}

// Adds `reserved` to the reserved and `spent` to the spent figures of the
// run and of its tenant (none when "").
absl::Status Book(Db& db, const std::string& run_id, const std::string& tenant, int64_t reserved,
                  int64_t spent) {
  if (!tenant.empty()) {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kBookTenant));
    st.BindText(1, tenant);
    st.BindInt(2, reserved);
    st.BindInt(3, spent);
    RUNLOOM_RETURN_IF_ERROR(st.Run());
  }
  RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kBookRun));
  st.BindText(1, run_id);
  st.BindInt(2, reserved);
  st.BindInt(3, spent);
  return st.Run();
}

}  // namespace

absl::StatusOr<TenantBudget> SqliteStore::SetTenantBudget(const std::string& tenant,
                                                          std::optional<int64_t> limit_micros) {
  if (tenant.empty()) return absl::InvalidArgumentError("a tenant budget needs a tenant name");
  if (limit_micros.has_value()) {
    RUNLOOM_RETURN_IF_ERROR(CheckAmount(*limit_micros, "the budget of tenant " + tenant));
  }
  std::optional<TenantBudget> out;
  RUNLOOM_RETURN_IF_ERROR(h_->Write([&](WriteTxn& txn) -> absl::Status {
    {
      RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kUpsertTenantLimit));
      st.BindText(1, tenant);
      if (limit_micros.has_value()) {
        st.BindInt(2, *limit_micros);
      } else {
        st.BindNull(2);
      }
      RUNLOOM_RETURN_IF_ERROR(st.Run());
    }
    RUNLOOM_ASSIGN_OR_RETURN(out, LoadTenant(txn.db, tenant));
    return absl::OkStatus();
  }));
  if (!out.has_value()) {
    return absl::InternalError("tenant " + tenant + " vanished after its upsert");
  }
  return std::move(*out);
}

absl::StatusOr<std::vector<TenantBudget>> SqliteStore::ListTenantBudgets() {
  return h_->Read([&](Db& db) -> absl::StatusOr<std::vector<TenantBudget>> {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kListTenants));
    std::vector<TenantBudget> out;
    while (true) {
      RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) return out;
      out.push_back({.tenant = st.ColumnText(0), .figures = FiguresFromRow(st, 1)});
    }
  });
}

absl::StatusOr<std::optional<TenantBudget>> SqliteStore::GetTenantBudget(
    const std::string& tenant) {
  if (tenant.empty()) return absl::InvalidArgumentError("a tenant budget needs a tenant name");
  return h_->Read([&](Db& db) { return LoadTenant(db, tenant); });
}

absl::StatusOr<RunBudget> SqliteStore::GetRunBudget(const std::string& run_id) {
  RUNLOOM_ASSIGN_OR_RETURN(std::optional<RunBudget> found,
                           h_->Read([&](Db& db) { return LoadRunBudget(db, run_id); }));
  if (!found.has_value()) {
    return absl::NotFoundError(absl::StrCat("run ", run_id, " has no budget row (no model call)"));
  }
  return std::move(*found);
}

absl::StatusOr<std::vector<Reservation>> SqliteStore::ListReservations(const std::string& run_id) {
  return h_->Read([&](Db& db) -> absl::StatusOr<std::vector<Reservation>> {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kListReservations));
    st.BindText(1, run_id);
    std::vector<Reservation> out;
    while (true) {
      RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) return out;
      RUNLOOM_ASSIGN_OR_RETURN(Reservation r, ReservationFromRow(st));
      out.push_back(std::move(r));
    }
  });
}

absl::StatusOr<ReserveResult> SqliteStore::Reserve(const BudgetRequest& request) {
  RUNLOOM_RETURN_IF_ERROR(CheckBudgetRequest(request));
  ReserveResult out;
  RUNLOOM_RETURN_IF_ERROR(h_->Write([&](WriteTxn& txn) -> absl::Status {
    out = ReserveResult{};
    const absl::Time now = h_->Now();
    RUNLOOM_RETURN_IF_ERROR(
        CheckLeaseFence(txn.db, now, request.key.run_id, request.key.lease_token));
    {
      RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kEnsureRun));
      st.BindText(1, request.key.run_id);
      st.BindText(2, request.tenant);
      if (request.run_limit_micros.has_value()) {
        st.BindInt(3, *request.run_limit_micros);
      } else {
        st.BindNull(3);
      }
      RUNLOOM_RETURN_IF_ERROR(st.Run());
    }
    RUNLOOM_ASSIGN_OR_RETURN(std::optional<RunBudget> run,
                             LoadRunBudget(txn.db, request.key.run_id));
    if (!run.has_value()) return absl::InternalError("budget row of run vanished");
    out.run = run->figures;
    // The run's first reservation fixed its tenant.
    const std::string& tenant = run->tenant;
    if (!tenant.empty()) {
      RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kEnsureTenant));
      st.BindText(1, tenant);
      RUNLOOM_RETURN_IF_ERROR(st.Run());
      RUNLOOM_ASSIGN_OR_RETURN(std::optional<TenantBudget> t, LoadTenant(txn.db, tenant));
      if (t.has_value()) out.tenant = t->figures;
    }
    RUNLOOM_ASSIGN_OR_RETURN(std::optional<Reservation> found,
                             LoadReservation(txn.db, request.key));
    if (found.has_value()) {
      if (found->state != ReservationState::kReserved) return ReservationClosed(*found);
      out.granted = true;
      out.reservation = std::move(found);
      return absl::OkStatus();
    }
    DecideReserve(request.amount_micros, out);
    if (!out.granted) return absl::OkStatus();
    {
      RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kInsertReservation));
      BindKey(st, request.key);
      st.BindText(5, tenant);
      st.BindInt(6, request.amount_micros);
      st.BindTime(7, now);
      RUNLOOM_RETURN_IF_ERROR(st.Run());
    }
    RUNLOOM_RETURN_IF_ERROR(
        Book(txn.db, request.key.run_id, tenant, request.amount_micros, /*spent=*/0));
    out.reservation = Reservation{.key = request.key,
                                  .tenant = tenant,
                                  .state = ReservationState::kReserved,
                                  .amount_micros = request.amount_micros,
                                  .created_at = now};
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<Reservation> SqliteStore::SettleReservation(const BudgetKey& key,
                                                           int64_t cost_micros) {
  RUNLOOM_RETURN_IF_ERROR(CheckBudgetKey(key));
  RUNLOOM_RETURN_IF_ERROR(CheckAmount(cost_micros, "the cost of " + ReservationName(key)));
  std::optional<Reservation> out;
  RUNLOOM_RETURN_IF_ERROR(h_->Write([&](WriteTxn& txn) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(out, LoadReservation(txn.db, key));
    if (!out.has_value() || out->state == ReservationState::kSettled) return absl::OkStatus();
    // A released amount already left the reserved figures.
    const int64_t unreserve =
        out->state == ReservationState::kReserved ? -out->amount_micros : int64_t{0};
    const absl::Time now = h_->Now();
    {
      RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kSettle));
      BindKey(st, key);
      st.BindInt(5, cost_micros);
      st.BindTime(6, now);
      RUNLOOM_RETURN_IF_ERROR(st.Run());
    }
    RUNLOOM_RETURN_IF_ERROR(Book(txn.db, key.run_id, out->tenant, unreserve, cost_micros));
    out->state = ReservationState::kSettled;
    out->cost_micros = cost_micros;
    out->finished_at = now;
    return absl::OkStatus();
  }));
  if (!out.has_value()) {
    return absl::NotFoundError(absl::StrCat(ReservationName(key), " was never reserved"));
  }
  return std::move(*out);
}

absl::StatusOr<int64_t> SqliteStore::ReleaseReservations(const std::string& run_id) {
  int64_t released = 0;
  RUNLOOM_RETURN_IF_ERROR(h_->Write([&](WriteTxn& txn) -> absl::Status {
    released = 0;
    int64_t amount = 0;
    {
      RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kSumOpen));
      st.BindText(1, run_id);
      RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
      if (row) {
        released = st.ColumnInt(0);
        amount = st.ColumnInt(1);
      }
    }
    if (released == 0) return absl::OkStatus();
    RUNLOOM_ASSIGN_OR_RETURN(std::optional<RunBudget> run, LoadRunBudget(txn.db, run_id));
    if (!run.has_value()) {
      return absl::DataLossError(
          absl::StrCat("run ", run_id, " has reservations but no budget row"));
    }
    {
      RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kReleaseOpen));
      st.BindText(1, run_id);
      st.BindTime(2, h_->Now());
      RUNLOOM_RETURN_IF_ERROR(st.Run());
    }
    return Book(txn.db, run_id, run->tenant, -amount, /*spent=*/0);
  }));
  return released;
}

}  // namespace runloom::store_internal
