// The write-operations ledger of the SQLite store (Store::BeginWrite,
// FinishWrite, ListWrites; the table is schema version 5,
// docs/formats/sqlite-schema.md "write_operations").
#include "core/status_macros.h"
#include "store/sqlite/codec.h"
#include "store/sqlite/sqlite_store.h"
#include "store/write_codec.h"

#include "absl/strings/str_cat.h"

#include <optional>
#include <utility>

namespace runloom::store_internal {
namespace {

constexpr char kRunFence[] = "SELECT status, lease_token, lease_expires_at FROM runs WHERE id = ?1";
constexpr char kSelectWrite[] = "SELECT " RUNLOOM_WRITE_COLUMNS
                                " FROM write_operations"
                                " WHERE run_id = ?1 AND step_path = ?2 AND action = ?3";
constexpr char kInsertIntent[] =
    "INSERT INTO write_operations (run_id, step_path, action, state, idempotency_key,"
    " request_digest, begins, created_at) VALUES (?1, ?2, ?3, 'intent', ?4, ?5, 0, ?6)";
constexpr char kCountBegin[] =
    "UPDATE write_operations SET begins = begins + 1"
    " WHERE run_id = ?1 AND step_path = ?2 AND action = ?3";
// Only an intent takes a result: the first result wins.
constexpr char kFinish[] =
    "UPDATE write_operations SET state = 'done', http_status = ?4, response = ?5, source = ?6,"
    " finished_at = ?7 WHERE run_id = ?1 AND step_path = ?2 AND action = ?3 AND state = 'intent'";
constexpr char kListWrites[] = "SELECT " RUNLOOM_WRITE_COLUMNS
                               " FROM write_operations WHERE run_id = ?1"
                               " ORDER BY created_at, step_path, action";

void BindKey(Statement& st, const WriteKey& key) {
  st.BindText(1, key.run_id);
  st.BindText(2, key.step_path);
  st.BindText(3, key.action);
}

absl::StatusOr<std::optional<WriteOperation>> LoadWrite(Db& db, const WriteKey& key) {
  RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kSelectWrite));
  BindKey(st, key);
  RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<WriteOperation>();
  RUNLOOM_ASSIGN_OR_RETURN(WriteOperation w, WriteFromRow(st));
  return std::optional<WriteOperation>(std::move(w));
}

}  // namespace

absl::Status CheckLeaseFence(Db& db, absl::Time now, const std::string& run_id,
                             const std::string& token) {
  RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kRunFence));
  st.BindText(1, run_id);
  RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("run ", run_id, " not found"));
  std::optional<RunStatus> status = ParseRunStatus(st.ColumnText(0));
  if (!status.has_value()) {
    return absl::DataLossError(absl::StrCat("run ", run_id, " has unknown status"));
  }
  return CheckWriteFence(run_id, *status, st.ColumnText(1), st.ColumnOptionalTime(2), now, token);
}

absl::StatusOr<BeginWriteResult> SqliteStore::BeginWrite(const WriteIntent& intent) {
  RUNLOOM_RETURN_IF_ERROR(CheckWriteIntent(intent));
  BeginWriteResult out;
  RUNLOOM_RETURN_IF_ERROR(h_->Write([&](WriteTxn& txn) -> absl::Status {
    RUNLOOM_RETURN_IF_ERROR(
        CheckLeaseFence(txn.db, h_->Now(), intent.key.run_id, intent.lease_token));
    RUNLOOM_ASSIGN_OR_RETURN(std::optional<WriteOperation> found, LoadWrite(txn.db, intent.key));
    if (found.has_value()) {
      if (found->request_digest != intent.request_digest) {
        return DigestMismatch(intent.key, found->request_digest, intent.request_digest);
      }
      RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kCountBegin));
      BindKey(st, intent.key);
      RUNLOOM_RETURN_IF_ERROR(st.Run());
      ++found->begins;
      out = {.op = std::move(*found), .created = false};
      return absl::OkStatus();
    }
    const absl::Time now = h_->Now();
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kInsertIntent));
    BindKey(st, intent.key);
    st.BindText(4, intent.idempotency_key);
    st.BindText(5, intent.request_digest);
    st.BindTime(6, now);
    RUNLOOM_RETURN_IF_ERROR(st.Run());
    out.created = true;
    out.op = WriteOperation{.key = intent.key,
                            .state = WriteState::kIntent,
                            .idempotency_key = intent.idempotency_key,
                            .request_digest = intent.request_digest,
                            .created_at = now};
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<WriteOperation> SqliteStore::FinishWrite(const WriteKey& key,
                                                        const WriteResult& result) {
  RUNLOOM_RETURN_IF_ERROR(CheckWriteKey(key));
  RUNLOOM_ASSIGN_OR_RETURN(std::string response,
                           DumpJson(result.response, "the response of " + WriteName(key)));
  std::optional<WriteOperation> out;
  RUNLOOM_RETURN_IF_ERROR(h_->Write([&](WriteTxn& txn) -> absl::Status {
    {
      RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kFinish));
      BindKey(st, key);
      st.BindInt(4, result.http_status);
      st.BindText(5, response);
      st.BindText(6, result.source);
      st.BindTime(7, h_->Now());
      RUNLOOM_RETURN_IF_ERROR(st.Run());
    }
    RUNLOOM_ASSIGN_OR_RETURN(out, LoadWrite(txn.db, key));
    return absl::OkStatus();
  }));
  if (!out.has_value()) {
    return absl::NotFoundError(absl::StrCat(WriteName(key), " has no recorded intent"));
  }
  return std::move(*out);
}

absl::StatusOr<std::vector<WriteOperation>> SqliteStore::ListWrites(const std::string& run_id) {
  return h_->Read([&](Db& db) -> absl::StatusOr<std::vector<WriteOperation>> {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kListWrites));
    st.BindText(1, run_id);
    std::vector<WriteOperation> out;
    while (true) {
      RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) return out;
      RUNLOOM_ASSIGN_OR_RETURN(WriteOperation w, WriteFromRow(st));
      out.push_back(std::move(w));
    }
  });
}

}  // namespace runloom::store_internal
