// Row <-> record conversion for write_operations, shared by the SQLite and
// PostgreSQL stores (docs/formats/sqlite-schema.md, "write_operations"): the
// same columns on both, times as Unix microseconds, the response as JSON
// text. A backend's row type provides ColumnText, ColumnInt, ColumnIsNull,
// ColumnTime and ColumnOptionalTime.
//
// Thread-safety: stateless functions.
#pragma once

#include "runloom/write_ledger.h"

#include "core/status_macros.h"
#include "store/record_codec.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#include <string>

// The write_operations columns in the order WriteFromRow reads them.
#define RUNLOOM_WRITE_COLUMNS                                                   \
  "run_id, step_path, action, state, idempotency_key, request_digest, begins, " \
  "http_status, response, source, created_at, finished_at, decision"

namespace runloom::store_internal {

// kInvalidArgument when a part of the key is empty.
inline absl::Status CheckWriteKey(const WriteKey& key) {
  if (key.run_id.empty() || key.step_path.empty() || key.action.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a write key needs a run id, a step path and an action (got '", key.run_id,
                     "', '", key.step_path, "', '", key.action, "')"));
  }
  return absl::OkStatus();
}

// BeginWrite's argument checks, shared by the backends.
inline absl::Status CheckWriteIntent(const WriteIntent& intent) {
  RUNLOOM_RETURN_IF_ERROR(CheckWriteKey(intent.key));
  if (intent.idempotency_key.empty() || intent.request_digest.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("write ", intent.key.step_path, "/", intent.key.action,
                     ": idempotency key and request digest are required"));
  }
  return absl::OkStatus();
}

// "run r_x: write apply/open_ticket" (and " for decision review@1:sha256:...")
// for messages.
inline std::string WriteName(const WriteKey& key) {
  return absl::StrCat("run ", key.run_id, ": write ", key.step_path, "/", key.action,
                      key.decision.empty() ? "" : " for decision ", key.decision);
}

// The refusal of a BeginWrite whose digest differs from the recorded one.
inline absl::Status DigestMismatch(const WriteKey& key, const std::string& recorded,
                                   const std::string& given) {
  return absl::FailedPreconditionError(
      absl::StrCat(WriteName(key), " was recorded for request ", recorded, " but is now asked for ",
                   given, "; a changed request is a different write: give it another `action`"));
}

// BeginWrite's fence: the run is running under `token` and its lease has
// not expired at `now` (a holder past its expiry may already be replaced,
// so it must not send). kAborted otherwise.
inline absl::Status CheckWriteFence(const std::string& run_id, RunStatus status,
                                    const std::string& lease_token,
                                    std::optional<absl::Time> expires, absl::Time now,
                                    const std::string& token) {
  if (status != RunStatus::kRunning) {
    return absl::AbortedError(absl::StrCat("lease lost: run ", run_id, " is ", StatusName(status),
                                           "; no write may be started for it"));
  }
  if (token.empty() || token != lease_token) {
    return absl::AbortedError(absl::StrCat("lease lost: run ", run_id,
                                           " is leased with another token; stop executing it"));
  }
  if (!expires.has_value() || *expires <= now) {
    return absl::AbortedError(
        absl::StrCat("lease lost: the lease on run ", run_id, " has expired; stop executing it"));
  }
  return absl::OkStatus();
}

template <typename Row>
absl::StatusOr<WriteOperation> WriteFromRow(const Row& st) {
  WriteOperation w;
  w.key.run_id = st.ColumnText(0);
  w.key.step_path = st.ColumnText(1);
  w.key.action = st.ColumnText(2);
  w.key.decision = st.ColumnText(12);
  const std::string state = st.ColumnText(3);
  std::optional<WriteState> parsed = ParseWriteState(state);
  if (!parsed.has_value()) {
    return absl::DataLossError(
        absl::StrCat(WriteName(w.key), " has unknown state '", state, "' in the database"));
  }
  w.state = *parsed;
  w.idempotency_key = st.ColumnText(4);
  w.request_digest = st.ColumnText(5);
  w.begins = st.ColumnInt(6);
  if (w.state == WriteState::kDone) {
    WriteResult r;
    r.http_status = static_cast<int>(st.ColumnInt(7));
    RUNLOOM_ASSIGN_OR_RETURN(
        r.response,
        ParseJson(st.ColumnText(8), "write_operations.response of " + WriteName(w.key)));
    r.source = st.ColumnText(9);
    w.result = std::move(r);
  }
  w.created_at = st.ColumnTime(10);
  w.finished_at = st.ColumnOptionalTime(11);
  return w;
}

}  // namespace runloom::store_internal
