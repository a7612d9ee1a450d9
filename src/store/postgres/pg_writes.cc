// The write-operations ledger of the PostgreSQL store (Store::BeginWrite,
// FinishWrite, ListWrites; the table is schema version 7, as SQLite's
// version 5: docs/formats/sqlite-schema.md "write_operations").
#include "core/status_macros.h"
#include "store/postgres/pg_store.h"
#include "store/write_codec.h"

#include "absl/strings/str_cat.h"

#include <optional>
#include <utility>

namespace runloom::store_internal {
namespace {

// FOR SHARE holds the run row until the intent commits: a lease takeover
// (an UPDATE of the row) waits, so no intent is recorded under a token that
// was replaced meanwhile.
constexpr char kRunFence[] =
    "SELECT status, lease_token, lease_expires_at, runloom_now() FROM runs WHERE id = $1 "
    "FOR SHARE";
// Concurrent begins of one key: one inserts, the others see no row here and
// read the winner's (the unique key waits for the inserter to commit).
constexpr char kInsertIntent[] =
    "INSERT INTO write_operations (run_id, step_path, action, state, idempotency_key,"
    " request_digest, begins, created_at) VALUES ($1, $2, $3, 'intent', $4, $5, 0,"
    " runloom_now()) ON CONFLICT DO NOTHING RETURNING " RUNLOOM_WRITE_COLUMNS;
constexpr char kCountBegin[] =
    "UPDATE write_operations SET begins = begins + 1"
    " WHERE run_id = $1 AND step_path = $2 AND action = $3 RETURNING " RUNLOOM_WRITE_COLUMNS;
// Only an intent takes a result: the first result wins.
constexpr char kFinish[] =
    "UPDATE write_operations SET state = 'done', http_status = $4, response = $5, source = $6,"
    " finished_at = runloom_now()"
    " WHERE run_id = $1 AND step_path = $2 AND action = $3 AND state = 'intent'";
constexpr char kSelectWrite[] = "SELECT " RUNLOOM_WRITE_COLUMNS
                                " FROM write_operations"
                                " WHERE run_id = $1 AND step_path = $2 AND action = $3";
constexpr char kListWrites[] = "SELECT " RUNLOOM_WRITE_COLUMNS
                               " FROM write_operations WHERE run_id = $1"
                               " ORDER BY created_at, step_path, action";

PgParams KeyParams(const WriteKey& key) {
  PgParams p;
  p.Text(key.run_id).Text(key.step_path).Text(key.action);
  return p;
}

}  // namespace

absl::Status PgCheckLeaseFence(PgConn& c, const std::string& run_id, const std::string& token) {
  RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kRunFence, PgParams().Text(run_id)));
  if (r.rows() == 0) return absl::NotFoundError(absl::StrCat("run ", run_id, " not found"));
  PgRow row = r.row(0);
  std::optional<RunStatus> status = ParseRunStatus(row.ColumnText(0));
  if (!status.has_value()) {
    return absl::DataLossError(absl::StrCat("run ", run_id, " has unknown status"));
  }
  return CheckWriteFence(run_id, *status, row.ColumnText(1), row.ColumnOptionalTime(2),
                         row.ColumnTime(3), token);
}

absl::StatusOr<BeginWriteResult> PgStore::BeginWrite(const WriteIntent& intent) {
  RUNLOOM_RETURN_IF_ERROR(CheckWriteIntent(intent));
  BeginWriteResult out;
  RUNLOOM_RETURN_IF_ERROR(h_->Txn([&](PgConn& c) -> absl::Status {
    RUNLOOM_RETURN_IF_ERROR(PgCheckLeaseFence(c, intent.key.run_id, intent.lease_token));
    PgParams p = KeyParams(intent.key);
    p.Text(intent.idempotency_key).Text(intent.request_digest);
    RUNLOOM_ASSIGN_OR_RETURN(PgResult ins, c.Exec(kInsertIntent, p));
    if (ins.rows() > 0) {
      RUNLOOM_ASSIGN_OR_RETURN(out.op, WriteFromRow(ins.row(0)));
      out.created = true;
      return absl::OkStatus();
    }
    RUNLOOM_ASSIGN_OR_RETURN(PgResult found, c.Exec(kCountBegin, KeyParams(intent.key)));
    if (found.rows() == 0) {
      return absl::InternalError(
          absl::StrCat(WriteName(intent.key), ": the insert conflicted but no row is there"));
    }
    RUNLOOM_ASSIGN_OR_RETURN(out.op, WriteFromRow(found.row(0)));
    out.created = false;
    if (out.op.request_digest != intent.request_digest) {
      // Rolls back the count: nothing is written for a refused begin.
      return DigestMismatch(intent.key, out.op.request_digest, intent.request_digest);
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<WriteOperation> PgStore::FinishWrite(const WriteKey& key,
                                                    const WriteResult& result) {
  RUNLOOM_RETURN_IF_ERROR(CheckWriteKey(key));
  RUNLOOM_ASSIGN_OR_RETURN(std::string response,
                           DumpJson(result.response, "the response of " + WriteName(key)));
  std::optional<WriteOperation> out;
  RUNLOOM_RETURN_IF_ERROR(h_->Txn([&](PgConn& c) -> absl::Status {
    out.reset();  // Txn may run the body again
    PgParams p = KeyParams(key);
    p.Int(result.http_status).Text(response).Text(result.source);
    RUNLOOM_RETURN_IF_ERROR(c.Exec(kFinish, p).status());
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kSelectWrite, KeyParams(key)));
    if (r.rows() == 0) return absl::OkStatus();
    RUNLOOM_ASSIGN_OR_RETURN(out, WriteFromRow(r.row(0)));
    return absl::OkStatus();
  }));
  if (!out.has_value()) {
    return absl::NotFoundError(absl::StrCat(WriteName(key), " has no recorded intent"));
  }
  return std::move(*out);
}

absl::StatusOr<std::vector<WriteOperation>> PgStore::ListWrites(const std::string& run_id) {
  std::vector<WriteOperation> out;
  RUNLOOM_RETURN_IF_ERROR(h_->Read([&](PgConn& c) -> absl::Status {
    out.clear();  // Read may run the body again after a lost connection
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kListWrites, PgParams().Text(run_id)));
    for (int i = 0; i < r.rows(); ++i) {
      RUNLOOM_ASSIGN_OR_RETURN(WriteOperation w, WriteFromRow(r.row(i)));
      out.push_back(std::move(w));
    }
    return absl::OkStatus();
  }));
  return out;
}

}  // namespace runloom::store_internal
