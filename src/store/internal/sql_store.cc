// The shared half of the SQL stores (store/internal/sql_store.h). Every
// statement is written once, with $N parameters and runloom_now(); where the
// dialects differ it is in a row lock (FOR UPDATE, FOR SHARE: PostgreSQL
// runs transactions side by side, SQLite's one writer runs them one at a
// time, so there the plain read is already the locked one) and in the
// catalog's per-name lock. Tables: docs/formats/sqlite-schema.md (the
// PostgreSQL schema has the same columns).
#include "store/internal/sql_store.h"

#include "core/injected_bug.h"
#include "core/status_macros.h"
#include "store/budget_codec.h"
#include "store/record_codec.h"
#include "store/schedule_codec.h"
#include "store/signal_codec.h"
#include "store/write_checks.h"
#include "store/write_codec.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include <limits>
#include <utility>

namespace runloom::store_internal {
namespace {

// Runs `sql` and reads each row with `from_row`.
template <typename T, typename F>
absl::StatusOr<std::vector<T>> QueryAll(SqlSession& s, const Sql& sql, const SqlArgs& args,
                                        F from_row) {
  RUNLOOM_ASSIGN_OR_RETURN(SqlRows r, s.Query(sql, args));
  return CollectRows<T>(r, from_row);
}

// Runs `sql` and reads its first row with `from_row`; nullopt for none.
template <typename T, typename F>
absl::StatusOr<std::optional<T>> QueryOne(SqlSession& s, const Sql& sql, const SqlArgs& args,
                                          F from_row) {
  RUNLOOM_ASSIGN_OR_RETURN(SqlRows r, s.Query(sql, args));
  if (r.rows() == 0) return std::optional<T>();
  RUNLOOM_ASSIGN_OR_RETURN(T value, from_row(r.row(0)));
  return std::optional<T>(std::move(value));
}

// ---- catalog ----

#define RUNLOOM_WORKFLOW_COLUMNS "name, version, digest, canonical, created_at"

constexpr Sql kWorkflowByDigest = BothDialects("SELECT " RUNLOOM_WORKFLOW_COLUMNS
                                               " FROM workflows WHERE name = $1 AND digest = $2");
// Serializes the registrations of one name (the advisory lock of its hash),
// so the next version below is taken once. SQLite's writer already does.
constexpr Sql kLockName{"SELECT pg_advisory_xact_lock(hashtext('runloom.workflow:' || $1))",
                        nullptr};
constexpr Sql kInsertWorkflow = BothDialects(
    "INSERT INTO workflows (name, version, digest, canonical, created_at) "
    "SELECT $1, COALESCE(MAX(version), 0) + 1, $2, $3, runloom_now() FROM workflows "
    "WHERE name = $1 RETURNING " RUNLOOM_WORKFLOW_COLUMNS);
constexpr Sql kWorkflowByVersion = BothDialects("SELECT " RUNLOOM_WORKFLOW_COLUMNS
                                                " FROM workflows WHERE name = $1 AND version = $2");
constexpr Sql kWorkflowLatest = BothDialects("SELECT " RUNLOOM_WORKFLOW_COLUMNS
                                             " FROM workflows WHERE name = $1"
                                             " ORDER BY version DESC LIMIT 1");
constexpr Sql kListWorkflows =
    BothDialects("SELECT " RUNLOOM_WORKFLOW_COLUMNS " FROM workflows ORDER BY name, version");

#undef RUNLOOM_WORKFLOW_COLUMNS

// ---- tokens ----

constexpr Sql kActiveByName =
    BothDialects("SELECT 1 FROM tokens WHERE name = $1 AND revoked_at IS NULL");
constexpr Sql kInsertToken = BothDialects(
    "INSERT INTO tokens (id, name, role, hash, created_at) "
    "VALUES ($1, $2, $3, $4, runloom_now()) RETURNING " RUNLOOM_TOKEN_COLUMNS);
constexpr Sql kListTokens =
    BothDialects("SELECT " RUNLOOM_TOKEN_COLUMNS " FROM tokens ORDER BY created_at, id");
// An id match wins over a name match (names cannot look like ids, but the
// store does not rely on it), and one row at most is revoked. The outer
// `revoked_at IS NULL` is rechecked on a row a concurrent revoke changed
// first (PostgreSQL's READ COMMITTED), so a token is revoked once.
constexpr Sql kRevokeToken = BothDialects(
    "UPDATE tokens SET revoked_at = runloom_now() WHERE revoked_at IS NULL AND id = ("
    "SELECT id FROM tokens WHERE revoked_at IS NULL AND (id = $1 OR name = $1) "
    "ORDER BY id = $1 DESC LIMIT 1) RETURNING " RUNLOOM_TOKEN_COLUMNS);
// An equality lookup on the unique index of hash. Comparing in constant
// time would not matter here: what is compared is a SHA-256 of the secret,
// so timing reveals nothing usable about the secret itself.
constexpr Sql kActiveByHash = BothDialects("SELECT " RUNLOOM_TOKEN_COLUMNS
                                           " FROM tokens WHERE hash = $1 AND revoked_at IS NULL");

// ---- the lease fence of ledger writes ----

// FOR SHARE holds the run row until the write commits: a lease takeover
// (an UPDATE of the row) waits, so nothing is recorded under a token that
// was replaced meanwhile.
constexpr Sql kRunFence{
    "SELECT status, lease_token, lease_expires_at, runloom_now() FROM runs WHERE id = $1 "
    "FOR SHARE",
    "SELECT status, lease_token, lease_expires_at, runloom_now() FROM runs WHERE id = $1"};

// The fence of a write the lease holder makes outside Commit (a write
// intent, a budget reservation): the run is running under `token` with an
// unexpired lease (CheckWriteFence). kNotFound: no run.
absl::Status CheckLeaseFence(SqlSession& s, const std::string& run_id, const std::string& token) {
  RUNLOOM_ASSIGN_OR_RETURN(SqlRows r, s.Query(kRunFence, SqlArgs().Text(run_id)));
  if (r.rows() == 0) return absl::NotFoundError(absl::StrCat("run ", run_id, " not found"));
  const SqlRow row = r.row(0);
  std::optional<RunStatus> status = ParseRunStatus(row.ColumnText(0));
  if (!status.has_value()) {
    return absl::DataLossError(absl::StrCat("run ", run_id, " has unknown status"));
  }
  return CheckWriteFence(run_id, *status, row.ColumnText(1), row.ColumnOptionalTime(2),
                         row.ColumnTime(3), token);
}

// ---- the write ledger ----

// Concurrent begins of one key: one inserts, the others see no row here and
// read the winner's (the unique key waits for the inserter to commit).
constexpr Sql kInsertIntent = BothDialects(
    "INSERT INTO write_operations (run_id, step_path, action, decision, state, idempotency_key,"
    " request_digest, begins, created_at) VALUES ($1, $2, $3, $4, 'intent', $5, $6, 0,"
    " runloom_now()) ON CONFLICT DO NOTHING RETURNING " RUNLOOM_WRITE_COLUMNS);
#define RUNLOOM_WRITE_KEY "run_id = $1 AND step_path = $2 AND action = $3 AND decision = $4"
constexpr Sql kCountBegin =
    BothDialects("UPDATE write_operations SET begins = begins + 1 WHERE " RUNLOOM_WRITE_KEY
                 " RETURNING " RUNLOOM_WRITE_COLUMNS);
// Only an intent takes a result: the first result wins.
constexpr Sql kFinish = BothDialects(
    "UPDATE write_operations SET state = 'done', http_status = $5, response = $6, source = $7,"
    " finished_at = runloom_now() WHERE " RUNLOOM_WRITE_KEY " AND state = 'intent'");
constexpr Sql kSelectWrite =
    BothDialects("SELECT " RUNLOOM_WRITE_COLUMNS " FROM write_operations WHERE " RUNLOOM_WRITE_KEY);
#undef RUNLOOM_WRITE_KEY
constexpr Sql kListWrites = BothDialects("SELECT " RUNLOOM_WRITE_COLUMNS
                                         " FROM write_operations WHERE run_id = $1"
                                         " ORDER BY created_at, step_path, action, decision");

SqlArgs WriteKeyArgs(const WriteKey& key) {
  SqlArgs a;
  a.Text(key.run_id).Text(key.step_path).Text(key.action).Text(key.decision);
  return a;
}

absl::StatusOr<std::optional<WriteOperation>> LoadWrite(SqlSession& s, const WriteKey& key) {
  return QueryOne<WriteOperation>(s, kSelectWrite, WriteKeyArgs(key), WriteFromRow<SqlRow>);
}

// ---- the budget ledger ----
//
// Rows are always locked in the same order (the run's budget row, then its
// tenant's), so reservations, settles and releases do not deadlock one
// another; concurrent reservations of one tenant queue on its row, and the
// check and the reservation are one compare-and-set.

#define RUNLOOM_TENANT_COLUMNS "tenant, limit_micros, spent_micros, reserved_micros"
#define RUNLOOM_RUN_BUDGET_COLUMNS "run_id, tenant, limit_micros, spent_micros, reserved_micros"

constexpr Sql kUpsertTenantLimit = BothDialects(
    "INSERT INTO budget_tenants (tenant, limit_micros) VALUES ($1, $2)"
    " ON CONFLICT (tenant) DO UPDATE SET limit_micros = excluded.limit_micros"
    " RETURNING " RUNLOOM_TENANT_COLUMNS);
constexpr Sql kEnsureTenant =
    BothDialects("INSERT INTO budget_tenants (tenant) VALUES ($1) ON CONFLICT (tenant) DO NOTHING");
constexpr Sql kSelectTenant =
    BothDialects("SELECT " RUNLOOM_TENANT_COLUMNS " FROM budget_tenants WHERE tenant = $1");
constexpr Sql kLockTenant{"SELECT " RUNLOOM_TENANT_COLUMNS
                          " FROM budget_tenants WHERE tenant = $1 FOR UPDATE",
                          kSelectTenant.sqlite};
constexpr Sql kListTenants =
    BothDialects("SELECT " RUNLOOM_TENANT_COLUMNS " FROM budget_tenants ORDER BY tenant");
constexpr Sql kEnsureRun = BothDialects(
    "INSERT INTO budget_runs (run_id, tenant, limit_micros) VALUES ($1, $2, $3)"
    " ON CONFLICT (run_id) DO NOTHING");
constexpr Sql kSelectRunBudget =
    BothDialects("SELECT " RUNLOOM_RUN_BUDGET_COLUMNS " FROM budget_runs WHERE run_id = $1");
constexpr Sql kLockRunBudget{"SELECT " RUNLOOM_RUN_BUDGET_COLUMNS
                             " FROM budget_runs WHERE run_id = $1 FOR UPDATE",
                             kSelectRunBudget.sqlite};
constexpr Sql kSelectReservation =
    BothDialects("SELECT " RUNLOOM_RESERVATION_COLUMNS
                 " FROM budget_reservations"
                 " WHERE run_id = $1 AND step_path = $2 AND attempt = $3 AND lease_token = $4");
constexpr Sql kListReservations =
    BothDialects("SELECT " RUNLOOM_RESERVATION_COLUMNS
                 " FROM budget_reservations WHERE run_id = $1"
                 " ORDER BY created_at, step_path, attempt, lease_token");
constexpr Sql kInsertReservation = BothDialects(
    "INSERT INTO budget_reservations (run_id, step_path, attempt, lease_token, tenant, state,"
    " amount_micros, created_at) VALUES ($1, $2, $3, $4, $5, 'reserved', $6, runloom_now())"
    " RETURNING " RUNLOOM_RESERVATION_COLUMNS);
// Adds $2 to the reserved and $3 to the spent figures (either may be 0).
constexpr Sql kBookTenant = BothDialects(
    "UPDATE budget_tenants SET reserved_micros = reserved_micros + $2,"
    " spent_micros = spent_micros + $3 WHERE tenant = $1");
constexpr Sql kBookRun = BothDialects(
    "UPDATE budget_runs SET reserved_micros = reserved_micros + $2,"
    " spent_micros = spent_micros + $3 WHERE run_id = $1");
constexpr Sql kSettle = BothDialects(
    "UPDATE budget_reservations SET state = 'settled', cost_micros = $5,"
    " finished_at = runloom_now()"
    " WHERE run_id = $1 AND step_path = $2 AND attempt = $3 AND lease_token = $4"
    " AND state <> 'settled' RETURNING " RUNLOOM_RESERVATION_COLUMNS);
// A released reservation is charged its whole amount (cost_micros =
// amount_micros): its call's fate is unknown, and the amount is its worst
// case. A late settle corrects the charge to the real cost.
constexpr Sql kReleaseOpen = BothDialects(
    "UPDATE budget_reservations SET state = 'released', cost_micros = amount_micros,"
    " finished_at = runloom_now() WHERE run_id = $1 AND state = 'reserved'"
    " RETURNING amount_micros");
// The injected bug release_frees_unsettled_calls (core/injected_bug.h): the
// amount goes back uncharged, as before the kill campaign found late settles.
constexpr Sql kReleaseOpenUncharged = BothDialects(
    "UPDATE budget_reservations SET state = 'released', finished_at = runloom_now()"
    " WHERE run_id = $1 AND state = 'reserved' RETURNING amount_micros");

#undef RUNLOOM_TENANT_COLUMNS
#undef RUNLOOM_RUN_BUDGET_COLUMNS

SqlArgs BudgetKeyArgs(const BudgetKey& key) {
  SqlArgs a;
  a.Text(key.run_id).Text(key.step_path).Int(key.attempt).Text(key.lease_token);
  return a;
}

absl::StatusOr<TenantBudget> TenantFromRow(const SqlRow& row) {
  return TenantBudget{.tenant = row.ColumnText(0), .figures = FiguresFromRow(row, 1)};
}

absl::StatusOr<RunBudget> RunBudgetFromRow(const SqlRow& row) {
  return RunBudget{
      .run_id = row.ColumnText(0), .tenant = row.ColumnText(1), .figures = FiguresFromRow(row, 2)};
}

absl::StatusOr<std::optional<Reservation>> LoadReservation(SqlSession& s, const BudgetKey& key) {
  return QueryOne<Reservation>(s, kSelectReservation, BudgetKeyArgs(key),
                               ReservationFromRow<SqlRow>);
}

// Adds `reserved` to the reserved and `spent` to the spent figures of the
// run and of its tenant (none when ""), in the lock order.
absl::Status Book(SqlSession& s, const std::string& run_id, const std::string& tenant,
                  int64_t reserved, int64_t spent) {
  RUNLOOM_RETURN_IF_ERROR(s.Exec(kBookRun, SqlArgs().Text(run_id).Int(reserved).Int(spent)));
  if (tenant.empty()) return absl::OkStatus();
  return s.Exec(kBookTenant, SqlArgs().Text(tenant).Int(reserved).Int(spent));
}

absl::Status RequireTenant(const std::string& tenant) {
  if (tenant.empty()) return absl::InvalidArgumentError("a tenant budget needs a tenant name");
  return absl::OkStatus();
}

}  // namespace

// ---- catalog ----

absl::StatusOr<WorkflowVersion> SqlStore::RegisterWorkflow(const std::string& name,
                                                           const std::string& digest,
                                                           const nlohmann::json& canonical) {
  RUNLOOM_RETURN_IF_ERROR(RequireNonEmpty(name, "workflow name"));
  RUNLOOM_RETURN_IF_ERROR(RequireNonEmpty(digest, "workflow digest"));
  RUNLOOM_ASSIGN_OR_RETURN(std::string text, DumpJson(canonical, absl::StrCat("workflow ", name)));
  const SqlArgs by_digest = SqlArgs().Text(name).Text(digest);
  std::optional<WorkflowVersion> out;
  // Registered already (the common case: every `runloom run` of a file
  // registers it): a read, without taking the write lock.
  RUNLOOM_RETURN_IF_ERROR(sql_->Read([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(
        out, QueryOne<WorkflowVersion>(s, kWorkflowByDigest, by_digest, WorkflowFromRow<SqlRow>));
    return absl::OkStatus();
  }));
  if (out.has_value()) return *std::move(out);
  RUNLOOM_RETURN_IF_ERROR(sql_->Write([&](SqlSession& s) -> absl::Status {
    RUNLOOM_RETURN_IF_ERROR(s.Exec(kLockName, SqlArgs().Text(name)));
    // Again under the lock: another writer may have registered it since.
    RUNLOOM_ASSIGN_OR_RETURN(
        out, QueryOne<WorkflowVersion>(s, kWorkflowByDigest, by_digest, WorkflowFromRow<SqlRow>));
    if (out.has_value()) return absl::OkStatus();
    RUNLOOM_ASSIGN_OR_RETURN(
        out,
        QueryOne<WorkflowVersion>(s, kInsertWorkflow, SqlArgs().Text(name).Text(digest).Text(text),
                                  WorkflowFromRow<SqlRow>));
    if (!out.has_value()) return absl::InternalError("the new workflow version returned no row");
    return absl::OkStatus();
  }));
  return *std::move(out);
}

absl::StatusOr<WorkflowVersion> SqlStore::GetWorkflow(const std::string& name, int64_t version) {
  if (version < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("workflow version ", version, " is negative; use 0 for the latest"));
  }
  std::optional<WorkflowVersion> found;
  RUNLOOM_RETURN_IF_ERROR(sql_->Read([&](SqlSession& s) -> absl::Status {
    SqlArgs a;
    a.Text(name);
    if (version != 0) a.Int(version);
    RUNLOOM_ASSIGN_OR_RETURN(
        found, QueryOne<WorkflowVersion>(s, version == 0 ? kWorkflowLatest : kWorkflowByVersion, a,
                                         WorkflowFromRow<SqlRow>));
    return absl::OkStatus();
  }));
  if (!found.has_value()) {
    if (version == 0) {
      return absl::NotFoundError(absl::StrCat("workflow ", name, " is not in the catalog"));
    }
    return absl::NotFoundError(
        absl::StrCat("workflow ", name, " has no version ", version, " in the catalog"));
  }
  return *std::move(found);
}

absl::StatusOr<std::vector<WorkflowVersion>> SqlStore::ListWorkflows() {
  std::vector<WorkflowVersion> out;
  RUNLOOM_RETURN_IF_ERROR(sql_->Read([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(
        out, QueryAll<WorkflowVersion>(s, kListWorkflows, SqlArgs(), WorkflowFromRow<SqlRow>));
    return absl::OkStatus();
  }));
  return out;
}

// ---- tokens ----

absl::StatusOr<TokenRecord> SqlStore::CreateToken(const TokenRecord& token,
                                                  const std::string& token_hash) {
  RUNLOOM_RETURN_IF_ERROR(CheckNewToken(token, token_hash));
  std::optional<TokenRecord> out;
  absl::Status s = sql_->Write([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(SqlRows found, s.Query(kActiveByName, SqlArgs().Text(token.name)));
    if (found.rows() > 0) {
      return absl::AlreadyExistsError(
          absl::StrCat("an active token is named '", token.name, "'; revoke it first"));
    }
    SqlArgs a;
    a.Text(token.id).Text(token.name).Text(std::string(RoleName(token.role))).Text(token_hash);
    RUNLOOM_ASSIGN_OR_RETURN(out, QueryOne<TokenRecord>(s, kInsertToken, a, TokenFromRow<SqlRow>));
    if (!out.has_value()) return absl::InternalError("the new token returned no row");
    return absl::OkStatus();
  });
  if (s.code() == absl::StatusCode::kAlreadyExists &&
      !absl::StrContains(s.message(), "revoke it first")) {
    // The unique indexes: a concurrent create of the name, or a reused id or hash.
    return absl::AlreadyExistsError(
        absl::StrCat("token ", token.id, " named '", token.name, "' (or its hash) already exists"));
  }
  RUNLOOM_RETURN_IF_ERROR(s);
  return *std::move(out);
}

absl::StatusOr<std::vector<TokenRecord>> SqlStore::ListTokens() {
  std::vector<TokenRecord> out;
  RUNLOOM_RETURN_IF_ERROR(sql_->Read([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(
        out, QueryAll<TokenRecord>(s, kListTokens, SqlArgs(), TokenFromRow<SqlRow>));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<TokenRecord> SqlStore::RevokeToken(const std::string& id_or_name) {
  std::optional<TokenRecord> revoked;
  RUNLOOM_RETURN_IF_ERROR(sql_->Write([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(
        revoked,
        QueryOne<TokenRecord>(s, kRevokeToken, SqlArgs().Text(id_or_name), TokenFromRow<SqlRow>));
    return absl::OkStatus();
  }));
  if (!revoked.has_value()) {
    return absl::NotFoundError(absl::StrCat("no active token has id or name '", id_or_name, "'"));
  }
  return *std::move(revoked);
}

absl::StatusOr<TokenRecord> SqlStore::FindActiveToken(const std::string& token_hash) {
  std::optional<TokenRecord> found;
  RUNLOOM_RETURN_IF_ERROR(sql_->Read([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(
        found,
        QueryOne<TokenRecord>(s, kActiveByHash, SqlArgs().Text(token_hash), TokenFromRow<SqlRow>));
    return absl::OkStatus();
  }));
  if (!found.has_value()) return absl::NotFoundError("no active token has this hash");
  return *std::move(found);
}

// ---- the write ledger ----

absl::StatusOr<BeginWriteResult> SqlStore::BeginWrite(const WriteIntent& intent) {
  RUNLOOM_RETURN_IF_ERROR(CheckWriteIntent(intent));
  BeginWriteResult out;
  RUNLOOM_RETURN_IF_ERROR(sql_->Write([&](SqlSession& s) -> absl::Status {
    RUNLOOM_RETURN_IF_ERROR(CheckLeaseFence(s, intent.key.run_id, intent.lease_token));
    SqlArgs a = WriteKeyArgs(intent.key);
    a.Text(intent.idempotency_key).Text(intent.request_digest);
    RUNLOOM_ASSIGN_OR_RETURN(std::optional<WriteOperation> created,
                             QueryOne<WriteOperation>(s, kInsertIntent, a, WriteFromRow<SqlRow>));
    if (created.has_value()) {
      out = {.op = *std::move(created), .created = true};
      return absl::OkStatus();
    }
    // Begun before: the same request again (a resumed step) counts a begin;
    // another request under the key is refused with nothing written.
    RUNLOOM_ASSIGN_OR_RETURN(std::optional<WriteOperation> found, LoadWrite(s, intent.key));
    if (!found.has_value()) {
      return absl::InternalError(
          absl::StrCat(WriteName(intent.key), ": the insert conflicted but no row is there"));
    }
    if (found->request_digest != intent.request_digest) {
      return DigestMismatch(intent.key, found->request_digest, intent.request_digest);
    }
    RUNLOOM_ASSIGN_OR_RETURN(
        found,
        QueryOne<WriteOperation>(s, kCountBegin, WriteKeyArgs(intent.key), WriteFromRow<SqlRow>));
    if (!found.has_value()) return absl::InternalError("the counted begin returned no row");
    out = {.op = *std::move(found), .created = false};
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<WriteOperation> SqlStore::FinishWrite(const WriteKey& key,
                                                     const WriteResult& result) {
  RUNLOOM_RETURN_IF_ERROR(CheckWriteKey(key));
  RUNLOOM_ASSIGN_OR_RETURN(std::string response,
                           DumpJson(result.response, "the response of " + WriteName(key)));
  std::optional<WriteOperation> out;
  RUNLOOM_RETURN_IF_ERROR(sql_->Write([&](SqlSession& s) -> absl::Status {
    SqlArgs a = WriteKeyArgs(key);
    a.Int(result.http_status).Text(response).Text(result.source);
    RUNLOOM_RETURN_IF_ERROR(s.Exec(kFinish, a));
    RUNLOOM_ASSIGN_OR_RETURN(out, LoadWrite(s, key));
    return absl::OkStatus();
  }));
  if (!out.has_value()) {
    return absl::NotFoundError(absl::StrCat(WriteName(key), " has no recorded intent"));
  }
  return *std::move(out);
}

absl::StatusOr<std::vector<WriteOperation>> SqlStore::ListWrites(const std::string& run_id) {
  std::vector<WriteOperation> out;
  RUNLOOM_RETURN_IF_ERROR(sql_->Read([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(out, QueryAll<WriteOperation>(s, kListWrites, SqlArgs().Text(run_id),
                                                           WriteFromRow<SqlRow>));
    return absl::OkStatus();
  }));
  return out;
}

// ---- the budget ledger ----

absl::StatusOr<TenantBudget> SqlStore::SetTenantBudget(const std::string& tenant,
                                                       std::optional<int64_t> limit_micros) {
  RUNLOOM_RETURN_IF_ERROR(RequireTenant(tenant));
  if (limit_micros.has_value()) {
    RUNLOOM_RETURN_IF_ERROR(CheckAmount(*limit_micros, "the budget of tenant " + tenant));
  }
  std::optional<TenantBudget> out;
  RUNLOOM_RETURN_IF_ERROR(sql_->Write([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(
        out,
        QueryOne<TenantBudget>(s, kUpsertTenantLimit,
                               SqlArgs().Text(tenant).OptionalInt(limit_micros), TenantFromRow));
    return absl::OkStatus();
  }));
  if (!out.has_value())
    return absl::InternalError("tenant " + tenant + " vanished after its upsert");
  return *std::move(out);
}

absl::StatusOr<std::vector<TenantBudget>> SqlStore::ListTenantBudgets() {
  std::vector<TenantBudget> out;
  RUNLOOM_RETURN_IF_ERROR(sql_->Read([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(out,
                             QueryAll<TenantBudget>(s, kListTenants, SqlArgs(), TenantFromRow));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::optional<TenantBudget>> SqlStore::GetTenantBudget(const std::string& tenant) {
  RUNLOOM_RETURN_IF_ERROR(RequireTenant(tenant));
  std::optional<TenantBudget> out;
  RUNLOOM_RETURN_IF_ERROR(sql_->Read([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(
        out, QueryOne<TenantBudget>(s, kSelectTenant, SqlArgs().Text(tenant), TenantFromRow));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<RunBudget> SqlStore::GetRunBudget(const std::string& run_id) {
  std::optional<RunBudget> out;
  RUNLOOM_RETURN_IF_ERROR(sql_->Read([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(
        out, QueryOne<RunBudget>(s, kSelectRunBudget, SqlArgs().Text(run_id), RunBudgetFromRow));
    return absl::OkStatus();
  }));
  if (!out.has_value()) {
    return absl::NotFoundError(absl::StrCat("run ", run_id, " has no budget row (no model call)"));
  }
  return *std::move(out);
}

absl::StatusOr<std::vector<Reservation>> SqlStore::ListReservations(const std::string& run_id) {
  std::vector<Reservation> out;
  RUNLOOM_RETURN_IF_ERROR(sql_->Read([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(out,
                             QueryAll<Reservation>(s, kListReservations, SqlArgs().Text(run_id),
                                                   ReservationFromRow<SqlRow>));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<ReserveResult> SqlStore::Reserve(const BudgetRequest& request) {
  RUNLOOM_RETURN_IF_ERROR(CheckBudgetRequest(request));
  ReserveResult out;
  RUNLOOM_RETURN_IF_ERROR(sql_->Write([&](SqlSession& s) -> absl::Status {
    out = ReserveResult{};  // the body may run again
    // Holds the run row until the reservation commits: a takeover waits.
    RUNLOOM_RETURN_IF_ERROR(CheckLeaseFence(s, request.key.run_id, request.key.lease_token));
    RUNLOOM_RETURN_IF_ERROR(s.Exec(kEnsureRun, SqlArgs()
                                                   .Text(request.key.run_id)
                                                   .Text(request.tenant)
                                                   .OptionalInt(request.run_limit_micros)));
    RUNLOOM_ASSIGN_OR_RETURN(
        std::optional<RunBudget> run,
        QueryOne<RunBudget>(s, kLockRunBudget, SqlArgs().Text(request.key.run_id),
                            RunBudgetFromRow));
    if (!run.has_value()) return absl::InternalError("budget row of run vanished");
    out.run = run->figures;
    // The run's first reservation fixed its tenant.
    const std::string& tenant = run->tenant;
    if (!tenant.empty()) {
      RUNLOOM_RETURN_IF_ERROR(s.Exec(kEnsureTenant, SqlArgs().Text(tenant)));
      RUNLOOM_ASSIGN_OR_RETURN(
          std::optional<TenantBudget> t,
          QueryOne<TenantBudget>(s, kLockTenant, SqlArgs().Text(tenant), TenantFromRow));
      if (t.has_value()) out.tenant = t->figures;
    }
    RUNLOOM_ASSIGN_OR_RETURN(std::optional<Reservation> found, LoadReservation(s, request.key));
    if (found.has_value()) {
      if (found->state != ReservationState::kReserved) return ReservationClosed(*found);
      out.granted = true;
      out.reservation = std::move(found);
      return absl::OkStatus();
    }
    DecideReserve(request.amount_micros, out);
    if (!out.granted) return absl::OkStatus();
    SqlArgs a = BudgetKeyArgs(request.key);
    a.Text(tenant).Int(request.amount_micros);
    RUNLOOM_ASSIGN_OR_RETURN(out.reservation, QueryOne<Reservation>(s, kInsertReservation, a,
                                                                    ReservationFromRow<SqlRow>));
    return Book(s, request.key.run_id, tenant, request.amount_micros, /*spent=*/0);
  }));
  return out;
}

absl::StatusOr<Reservation> SqlStore::SettleReservation(const BudgetKey& key, int64_t cost_micros) {
  RUNLOOM_RETURN_IF_ERROR(CheckBudgetKey(key));
  RUNLOOM_RETURN_IF_ERROR(CheckAmount(cost_micros, "the cost of " + ReservationName(key)));
  std::optional<Reservation> out;
  RUNLOOM_RETURN_IF_ERROR(sql_->Write([&](SqlSession& s) -> absl::Status {
    // Lock order: the run's budget row first. Settles of one reservation
    // then run one after the other, and the second sees it settled.
    RUNLOOM_RETURN_IF_ERROR(s.Exec(kLockRunBudget, SqlArgs().Text(key.run_id)));
    RUNLOOM_ASSIGN_OR_RETURN(out, LoadReservation(s, key));
    if (!out.has_value() || out->state == ReservationState::kSettled) return absl::OkStatus();
    // A released amount already left the reserved figures, and was charged
    // (cost_micros): the settle books the difference to the real cost.
    const bool reserved = out->state == ReservationState::kReserved;
    const int64_t unreserve = reserved ? -out->amount_micros : int64_t{0};
    const int64_t charged = reserved ? int64_t{0} : out->cost_micros.value_or(0);
    SqlArgs a = BudgetKeyArgs(key);
    a.Int(cost_micros);
    RUNLOOM_ASSIGN_OR_RETURN(out, QueryOne<Reservation>(s, kSettle, a, ReservationFromRow<SqlRow>));
    if (!out.has_value()) return absl::InternalError(ReservationName(key) + " vanished");
    return Book(s, key.run_id, out->tenant, unreserve, cost_micros - charged);
  }));
  if (!out.has_value()) {
    return absl::NotFoundError(absl::StrCat(ReservationName(key), " was never reserved"));
  }
  return *std::move(out);
}

absl::StatusOr<int64_t> SqlStore::ReleaseReservations(const std::string& run_id) {
  int64_t released = 0;
  RUNLOOM_RETURN_IF_ERROR(sql_->Write([&](SqlSession& s) -> absl::Status {
    released = 0;
    RUNLOOM_ASSIGN_OR_RETURN(
        std::optional<RunBudget> run,
        QueryOne<RunBudget>(s, kLockRunBudget, SqlArgs().Text(run_id), RunBudgetFromRow));
    if (!run.has_value()) return absl::OkStatus();  // never reserved
    const bool charges = !RUNLOOM_INJECTED_BUG(InjectedBug::kReleaseFreesUnsettledCalls);
    RUNLOOM_ASSIGN_OR_RETURN(
        SqlRows r, s.Query(charges ? kReleaseOpen : kReleaseOpenUncharged, SqlArgs().Text(run_id)));
    int64_t amount = 0;
    for (int i = 0; i < r.rows(); ++i) amount += r.row(i).ColumnInt(0);
    released = r.rows();
    if (released == 0) return absl::OkStatus();
    return Book(s, run_id, run->tenant, -amount, charges ? amount : int64_t{0});
  }));
  return released;
}

// ---- timers ----

namespace {
// MIN over the partial index runs_waiting (wake_at) WHERE status = 'waiting'.
constexpr Sql kNextWakeTime =
    BothDialects("SELECT MIN(wake_at) FROM runs WHERE status = 'waiting'");
constexpr Sql kWorkToCome = BothDialects(
    "SELECT 1 FROM runs WHERE status IN ('queued', 'running') "
    "OR (status = 'waiting' AND wake_at IS NOT NULL) LIMIT 1");
// Children not finished whose parent is: the index runs_parent, joined to
// each child's parent by its primary key. $1: the limit.
constexpr Sql kOrphanedChildren = BothDialects(
    "SELECT c.id FROM runs c JOIN runs p ON p.id = c.parent_run_id "
    "WHERE c.parent_run_id <> '' AND c.status IN ('queued', 'running', 'paused', 'waiting') "
    "AND p.status NOT IN ('queued', 'running', 'paused', 'waiting') ORDER BY c.id LIMIT $1");
}  // namespace

absl::StatusOr<bool> SqlStore::HasWorkToCome() {
  bool out = false;
  RUNLOOM_RETURN_IF_ERROR(sql_->Read([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(SqlRows r, s.Query(kWorkToCome, SqlArgs()));
    out = r.rows() > 0;
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::vector<std::string>> SqlStore::ListOrphanedChildren(int limit) {
  std::vector<std::string> out;
  RUNLOOM_RETURN_IF_ERROR(sql_->Read([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(
        SqlRows r, s.Query(kOrphanedChildren,
                           SqlArgs().Int(limit > 0 ? limit : std::numeric_limits<int32_t>::max())));
    for (int i = 0; i < r.rows(); ++i) out.push_back(r.row(i).ColumnText(0));
    return absl::OkStatus();
  }));
  return out;
}

namespace {
constexpr Sql kCountActiveRuns = BothDialects(
    "SELECT status, COUNT(*) FROM runs "
    "WHERE status IN ('queued', 'running', 'paused', 'waiting') GROUP BY status");
}  // namespace

absl::StatusOr<ActiveRunCounts> SqlStore::CountActiveRuns() {
  ActiveRunCounts out;
  RUNLOOM_RETURN_IF_ERROR(sql_->Read([&](SqlSession& s) -> absl::Status {
    out = ActiveRunCounts{};  // a retried read starts again
    RUNLOOM_ASSIGN_OR_RETURN(SqlRows r, s.Query(kCountActiveRuns, SqlArgs()));
    for (int i = 0; i < r.rows(); ++i) {
      const std::string status = r.row(i).ColumnText(0);
      const int64_t n = r.row(i).ColumnInt(1);
      if (status == "queued") out.queued = n;
      if (status == "running") out.running = n;
      if (status == "paused") out.paused = n;
      if (status == "waiting") out.waiting = n;
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::optional<absl::Time>> SqlStore::NextWakeTime() {
  std::optional<absl::Time> out;
  RUNLOOM_RETURN_IF_ERROR(sql_->Read([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(SqlRows r, s.Query(kNextWakeTime, SqlArgs()));
    if (r.rows() > 0) out = r.row(0).ColumnOptionalTime(0);
    return absl::OkStatus();
  }));
  return out;
}

// ---- signals: the reads (SendSignal is each backend's, with its commit) ----

namespace {
constexpr Sql kNextSignal = BothDialects(
    "SELECT " RUNLOOM_SIGNAL_COLUMNS " FROM signals WHERE run_id = $1 AND name = $2 "
    "AND consumed_by IS NULL ORDER BY seq LIMIT 1");
constexpr Sql kSignalConsumedBy = BothDialects(
    "SELECT " RUNLOOM_SIGNAL_COLUMNS " FROM signals WHERE run_id = $1 AND consumed_by = $2");
constexpr Sql kListSignals = BothDialects(
    "SELECT " RUNLOOM_SIGNAL_COLUMNS " FROM signals WHERE run_id = $1 AND seq > $2 "
    "ORDER BY seq LIMIT $3");
}  // namespace

absl::StatusOr<std::optional<SignalRecord>> SqlStore::NextSignal(const std::string& run_id,
                                                                 const std::string& name) {
  std::optional<SignalRecord> out;
  RUNLOOM_RETURN_IF_ERROR(sql_->Read([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(out, QueryOne<SignalRecord>(s, kNextSignal,
                                                         SqlArgs().Text(run_id).Text(name),
                                                         SignalFromRow<SqlRow>));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::optional<SignalRecord>> SqlStore::SignalConsumedBy(const std::string& run_id,
                                                                       const std::string& key) {
  std::optional<SignalRecord> out;
  RUNLOOM_RETURN_IF_ERROR(sql_->Read([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(out, QueryOne<SignalRecord>(s, kSignalConsumedBy,
                                                         SqlArgs().Text(run_id).Text(key),
                                                         SignalFromRow<SqlRow>));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::vector<SignalRecord>> SqlStore::ListSignals(const std::string& run_id,
                                                                int64_t after_seq, int limit) {
  std::vector<SignalRecord> out;
  RUNLOOM_RETURN_IF_ERROR(sql_->Read([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(
        out, QueryAll<SignalRecord>(
                 s, kListSignals,
                 SqlArgs().Text(run_id).Int(after_seq).Int(limit > 0 ? limit : 1000),
                 SignalFromRow<SqlRow>));
    return absl::OkStatus();
  }));
  return out;
}

// ---- schedules ----

namespace {
constexpr Sql kInsertSchedule = BothDialects(
    "INSERT INTO schedules (id, workflow_name, cron, timezone, inputs, overlap, catch_up, paused, "
    "next_fire_at, created_at, updated_at) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, runloom_now(), runloom_now()) "
    "RETURNING " RUNLOOM_SCHEDULE_COLUMNS);
constexpr Sql kUpsertSchedule = BothDialects(
    "INSERT INTO schedules (id, workflow_name, cron, timezone, inputs, overlap, catch_up, paused, "
    "next_fire_at, created_at, updated_at) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, runloom_now(), runloom_now()) "
    "ON CONFLICT (id) DO UPDATE SET workflow_name = excluded.workflow_name, "
    "cron = excluded.cron, timezone = excluded.timezone, inputs = excluded.inputs, "
    "overlap = excluded.overlap, catch_up = excluded.catch_up, paused = excluded.paused, "
    "next_fire_at = excluded.next_fire_at, updated_at = excluded.updated_at "
    "RETURNING " RUNLOOM_SCHEDULE_COLUMNS);
constexpr Sql kGetSchedule =
    BothDialects("SELECT " RUNLOOM_SCHEDULE_COLUMNS " FROM schedules WHERE id = $1");
constexpr Sql kListSchedules = BothDialects(
    "SELECT " RUNLOOM_SCHEDULE_COLUMNS " FROM schedules WHERE id > $1 ORDER BY id LIMIT $2");
constexpr Sql kDeleteSchedule = BothDialects("DELETE FROM schedules WHERE id = $1 RETURNING id");
constexpr Sql kPauseSchedule = BothDialects(
    "UPDATE schedules SET paused = $2, next_fire_at = CASE WHEN $2 = 1 THEN next_fire_at "
    "ELSE $3 END, updated_at = runloom_now() WHERE id = $1 RETURNING id");
// Over the partial index schedules_due (next_fire_at) WHERE paused = 0.
constexpr Sql kDueSchedules = BothDialects(
    "SELECT " RUNLOOM_SCHEDULE_COLUMNS " FROM schedules WHERE paused = 0 "
    "AND next_fire_at <= runloom_now() ORDER BY next_fire_at, id LIMIT $1");
constexpr Sql kAdvanceSchedule = BothDialects(
    "UPDATE schedules SET next_fire_at = $3, last_fired_at = $2, "
    "last_run_id = CASE WHEN $4 = '' THEN last_run_id ELSE $4 END, updated_at = runloom_now() "
    "WHERE id = $1 AND paused = 0 AND next_fire_at = $2 RETURNING id");
}  // namespace

absl::StatusOr<ScheduleRecord> SqlStore::PutSchedule(const ScheduleRecord& s, bool replace) {
  RUNLOOM_ASSIGN_OR_RETURN(std::string inputs, EncodeSchedule(s));
  std::optional<ScheduleRecord> out;
  absl::Status status = sql_->Write([&](SqlSession& session) -> absl::Status {
    SqlArgs a;
    a.Text(s.id).Text(s.workflow).Text(s.cron).Text(s.timezone).Text(inputs).Text(s.overlap);
    a.Text(s.catch_up).Int(s.paused ? 1 : 0).Time(s.next_fire_at);
    RUNLOOM_ASSIGN_OR_RETURN(out, QueryOne<ScheduleRecord>(
                                      session, replace ? kUpsertSchedule : kInsertSchedule, a,
                                      ScheduleFromRow<SqlRow>));
    if (!out.has_value()) return absl::InternalError("the schedule written returned no row");
    return absl::OkStatus();
  });
  if (status.code() == absl::StatusCode::kAlreadyExists) {
    return absl::AlreadyExistsError(absl::StrCat("schedule ", s.id, " already exists"));
  }
  RUNLOOM_RETURN_IF_ERROR(status);
  return *std::move(out);
}

absl::StatusOr<std::optional<ScheduleRecord>> SqlStore::GetSchedule(const std::string& id) {
  std::optional<ScheduleRecord> out;
  RUNLOOM_RETURN_IF_ERROR(sql_->Read([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(out, QueryOne<ScheduleRecord>(s, kGetSchedule, SqlArgs().Text(id),
                                                           ScheduleFromRow<SqlRow>));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::vector<ScheduleRecord>> SqlStore::ListSchedules(const std::string& after_id,
                                                                    int limit) {
  std::vector<ScheduleRecord> out;
  RUNLOOM_RETURN_IF_ERROR(sql_->Read([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(
        out, QueryAll<ScheduleRecord>(s, kListSchedules, SqlArgs().Text(after_id).Int(limit),
                                      ScheduleFromRow<SqlRow>));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<bool> SqlStore::DeleteSchedule(const std::string& id) {
  bool found = false;
  RUNLOOM_RETURN_IF_ERROR(sql_->Write([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(SqlRows r, s.Query(kDeleteSchedule, SqlArgs().Text(id)));
    found = r.rows() > 0;
    return absl::OkStatus();
  }));
  return found;
}

absl::StatusOr<bool> SqlStore::SetSchedulePaused(const std::string& id, bool paused,
                                                 absl::Time next_fire_at) {
  bool found = false;
  RUNLOOM_RETURN_IF_ERROR(sql_->Write([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(
        SqlRows r,
        s.Query(kPauseSchedule, SqlArgs().Text(id).Int(paused ? 1 : 0).Time(next_fire_at)));
    found = r.rows() > 0;
    return absl::OkStatus();
  }));
  return found;
}

absl::StatusOr<std::vector<ScheduleRecord>> SqlStore::FindDueSchedules(int limit) {
  std::vector<ScheduleRecord> out;
  RUNLOOM_RETURN_IF_ERROR(sql_->Read([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(out, QueryAll<ScheduleRecord>(s, kDueSchedules, SqlArgs().Int(limit),
                                                           ScheduleFromRow<SqlRow>));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<bool> SqlStore::AdvanceSchedule(const std::string& id, absl::Time tick,
                                               absl::Time next, const std::string& run_id) {
  bool advanced = false;
  RUNLOOM_RETURN_IF_ERROR(sql_->Write([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(
        SqlRows r, s.Query(kAdvanceSchedule, SqlArgs().Text(id).Time(tick).Time(next).Text(run_id)));
    advanced = r.rows() > 0;
    return absl::OkStatus();
  }));
  return advanced;
}

namespace {

// ---- streaming: the text so far of each call (issue 24) ----

// One row per call, replaced as it grows; `updated_at` in Unix microseconds
// of the store's clock. A text is at most 1 MiB (LiveText keeps no more).
constexpr size_t kMaxLiveTextRowBytes = size_t{1} << 20;
constexpr Sql kPutLiveText = BothDialects(
    "INSERT INTO live_text (run_id, path, attempt, writer, text, ended, updated_at)"
    " VALUES ($1, $2, $3, $4, $5, $6, runloom_now())"
    " ON CONFLICT (run_id, path) DO UPDATE SET attempt = excluded.attempt,"
    " writer = excluded.writer, text = excluded.text, ended = excluded.ended,"
    " updated_at = excluded.updated_at");
constexpr Sql kDeleteLiveText =
    BothDialects("DELETE FROM live_text WHERE run_id = $1 AND path = $2 AND attempt = $3");
constexpr Sql kListLiveText = BothDialects(
    "SELECT run_id, path, attempt, writer, text, ended, updated_at FROM live_text"
    " WHERE run_id = $1 AND updated_at >= runloom_now() - $2 ORDER BY path");

absl::StatusOr<LiveTextRow> LiveTextFromRow(const SqlRow& r) {
  return LiveTextRow{.run_id = r.ColumnText(0),
                     .path = r.ColumnText(1),
                     .attempt = static_cast<int>(r.ColumnInt(2)),
                     .writer = r.ColumnText(3),
                     .text = r.ColumnText(4),
                     .ended = r.ColumnInt(5) != 0,
                     .updated_at = r.ColumnTime(6)};
}

}  // namespace

absl::Status SqlStore::PutLiveText(const LiveTextRow& row) {
  if (row.run_id.empty() || row.path.empty()) {
    return absl::InvalidArgumentError("live text: the run id and the path must not be empty");
  }
  if (row.text.size() > kMaxLiveTextRowBytes) {
    return absl::InvalidArgumentError(absl::StrCat("live text of ", row.run_id, " ", row.path,
                                                   ": ", row.text.size(),
                                                   " bytes, past the bound of 1 MiB"));
  }
  return sql_->Write([&](SqlSession& s) {
    return s.Exec(kPutLiveText, SqlArgs()
                                    .Text(row.run_id)
                                    .Text(row.path)
                                    .Int(row.attempt)
                                    .Text(row.writer)
                                    .Text(row.text)
                                    .Int(row.ended ? 1 : 0));
  });
}

absl::Status SqlStore::DeleteLiveText(const std::string& run_id, const std::string& path,
                                      int attempt) {
  return sql_->Write([&](SqlSession& s) {
    return s.Exec(kDeleteLiveText, SqlArgs().Text(run_id).Text(path).Int(attempt));
  });
}

absl::StatusOr<std::vector<LiveTextRow>> SqlStore::ListLiveText(const std::string& run_id,
                                                                absl::Duration max_age) {
  std::vector<LiveTextRow> out;
  RUNLOOM_RETURN_IF_ERROR(sql_->Read([&](SqlSession& s) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(
        out, QueryAll<LiveTextRow>(
                 s, kListLiveText,
                 SqlArgs().Text(run_id).Int(absl::ToInt64Microseconds(max_age)),
                 LiveTextFromRow));
    return absl::OkStatus();
  }));
  return out;
}

}  // namespace runloom::store_internal
