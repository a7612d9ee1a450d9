// Row <-> record conversion shared by the store backends (SQLite,
// PostgreSQL): both keep the same columns, times as Unix microseconds and
// JSON as text, so one reader per record serves both. A backend's row type
// provides ColumnText(i), ColumnInt(i), ColumnTime(i) and
// ColumnOptionalTime(i) for the columns below, in this order.
//
// Thread-safety: stateless functions.
#pragma once

#include "runloom/auth.h"
#include "runloom/run.h"
#include "runloom/status.h"
#include "runloom/store.h"

#include "core/status_macros.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

// The runs columns in the order RunFromRow reads them.
#define RUNLOOM_RUN_COLUMNS                                                               \
  "id, workflow_name, workflow_version, workflow_digest, status, inputs, inputs_digest, " \
  "idempotency_key, phase, revision, entry, context, lease_owner, lease_token, "          \
  "lease_expires_at, attempts, max_attempts, cancel_requested, outcome, error, "          \
  "last_event_seq, created_at, updated_at, finished_at, wake_at, wait_signal, parent_run_id, " \
  "concurrency_key, concurrency_limit, priority"

// The step_records columns in the order StepFromRow reads them.
#define RUNLOOM_STEP_COLUMNS                                                      \
  "run_id, revision, path, step_id, kind, phase, attempt, state, output, error, " \
  "error_class, stderr_tail, started_at, finished_at"

// The run_events columns in the order EventFromRow reads them.
#define RUNLOOM_EVENT_COLUMNS "run_id, seq, type, schema_version, at, data"
// The tokens columns in the order TokenFromRow reads them (never the hash).
#define RUNLOOM_TOKEN_COLUMNS "id, name, role, created_at, revoked_at"

namespace runloom::store_internal {

// Times are stored as Unix microseconds.
inline int64_t ToMicros(absl::Time t) { return absl::ToUnixMicros(t); }
inline absl::Time FromMicros(int64_t micros) { return absl::FromUnixMicros(micros); }

std::string StatusName(RunStatus s);
std::string PartyName(Party p);
std::string StepStateName(StepState s);
// A step record's error_class column: ToString(*c), or "" when unset.
std::string ErrorClassName(const std::optional<ErrorClass>& c);

// kInvalidArgument "<what> is empty" for an empty `value`.
absl::Status RequireNonEmpty(const std::string& value, std::string_view what);

// JSON <-> TEXT. Dump fails (kInvalidArgument) on invalid UTF-8; Parse fails
// (kDataLoss) on a corrupt cell. `what` names the cell in the error.
absl::StatusOr<std::string> DumpJson(const nlohmann::json& value, std::string_view what);
absl::StatusOr<nlohmann::json> ParseJson(const std::string& text, std::string_view what);

// Each row of a materialized result `r` (rows(), row(i): PgResult, SqlRows)
// read with `from_row`.
template <typename T, typename Result, typename F>
absl::StatusOr<std::vector<T>> CollectRows(const Result& r, F from_row) {
  std::vector<T> out;
  out.reserve(static_cast<size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) {
    RUNLOOM_ASSIGN_OR_RETURN(T value, from_row(r.row(i)));
    out.push_back(std::move(value));
  }
  return out;
}

// Read the current row of a query selecting the columns above
// (WorkflowFromRow: name, version, digest, canonical, created_at).
template <typename Row>
absl::StatusOr<RunRecord> RunFromRow(const Row& st) {
  RunRecord r;
  r.id = st.ColumnText(0);
  r.workflow_name = st.ColumnText(1);
  r.workflow_version = st.ColumnInt(2);
  r.workflow_digest = st.ColumnText(3);
  std::string status = st.ColumnText(4);
  std::optional<RunStatus> parsed = ParseRunStatus(status);
  if (!parsed.has_value()) {
    return absl::DataLossError(
        absl::StrCat("run ", r.id, " has unknown status '", status, "' in the database"));
  }
  r.status = *parsed;
  RUNLOOM_ASSIGN_OR_RETURN(r.inputs, ParseJson(st.ColumnText(5), "runs.inputs of run " + r.id));
  r.inputs_digest = st.ColumnText(6);
  r.idempotency_key = st.ColumnText(7);
  r.phase = st.ColumnText(8);
  r.revision = st.ColumnInt(9);
  const std::string entry = st.ColumnText(10);
  std::optional<RunEntry> parsed_entry = ParseRunEntry(entry);
  if (!parsed_entry.has_value()) {
    return absl::DataLossError(
        absl::StrCat("run ", r.id, " has unknown entry '", entry, "' in the database"));
  }
  r.entry = *parsed_entry;
  RUNLOOM_ASSIGN_OR_RETURN(r.context, ParseJson(st.ColumnText(11), "runs.context of run " + r.id));
  r.lease_owner = st.ColumnText(12);
  r.lease_token = st.ColumnText(13);
  r.lease_expires_at = st.ColumnOptionalTime(14);
  r.attempts = static_cast<int>(st.ColumnInt(15));
  r.max_attempts = static_cast<int>(st.ColumnInt(16));
  r.cancel_requested = st.ColumnInt(17) != 0;
  r.outcome = st.ColumnText(18);
  r.error = st.ColumnText(19);
  r.last_event_seq = st.ColumnInt(20);
  r.created_at = st.ColumnTime(21);
  r.updated_at = st.ColumnTime(22);
  r.finished_at = st.ColumnOptionalTime(23);
  r.wake_at = st.ColumnOptionalTime(24);
  if (!st.ColumnIsNull(25)) r.wait_signal = st.ColumnText(25);
  r.parent_run_id = st.ColumnText(26);
  r.concurrency_key = st.ColumnText(27);
  r.concurrency_limit = static_cast<int>(st.ColumnInt(28));
  r.priority = static_cast<int>(st.ColumnInt(29));
  return r;
}

template <typename Row>
absl::StatusOr<StepRecord> StepFromRow(const Row& st) {
  StepRecord s;
  s.run_id = st.ColumnText(0);
  s.revision = st.ColumnInt(1);
  s.path = st.ColumnText(2);
  s.step_id = st.ColumnText(3);
  s.kind = st.ColumnText(4);
  s.phase = st.ColumnText(5);
  s.attempt = static_cast<int>(st.ColumnInt(6));
  std::string state = st.ColumnText(7);
  std::optional<StepState> parsed = ParseStepState(state);
  if (!parsed.has_value()) {
    return absl::DataLossError(absl::StrCat("step record ", s.run_id, "/", s.path,
                                            " has unknown state '", state, "' in the database"));
  }
  s.state = *parsed;
  RUNLOOM_ASSIGN_OR_RETURN(
      s.output,
      ParseJson(st.ColumnText(8), absl::StrCat("step_records.output of ", s.run_id, "/", s.path)));
  s.error = st.ColumnText(9);
  std::string error_class = st.ColumnText(10);
  if (!error_class.empty()) {
    s.error_class = ParseErrorClass(error_class);
    if (!s.error_class.has_value()) {
      return absl::DataLossError(absl::StrCat("step record ", s.run_id, "/", s.path,
                                              " has unknown error class '", error_class,
                                              "' in the database"));
    }
  }
  s.stderr_tail = st.ColumnText(11);
  s.started_at = st.ColumnTime(12);
  s.finished_at = st.ColumnTime(13);
  return s;
}

template <typename Row>
absl::StatusOr<Event> EventFromRow(const Row& st) {
  Event e;
  e.run_id = st.ColumnText(0);
  e.seq = st.ColumnInt(1);
  e.type = st.ColumnText(2);
  e.schema_version = static_cast<int>(st.ColumnInt(3));
  e.at = st.ColumnTime(4);
  RUNLOOM_ASSIGN_OR_RETURN(
      e.data,
      ParseJson(st.ColumnText(5), absl::StrCat("run_events.data of ", e.run_id, " seq ", e.seq)));
  return e;
}

template <typename Row>
absl::StatusOr<WorkflowVersion> WorkflowFromRow(const Row& st) {
  WorkflowVersion w;
  w.name = st.ColumnText(0);
  w.version = st.ColumnInt(1);
  w.digest = st.ColumnText(2);
  RUNLOOM_ASSIGN_OR_RETURN(
      w.canonical, ParseJson(st.ColumnText(3),
                             absl::StrCat("workflows.canonical of ", w.name, " v", w.version)));
  w.created_at = st.ColumnTime(4);
  return w;
}

template <typename Row>
absl::StatusOr<TokenRecord> TokenFromRow(const Row& st) {
  TokenRecord t;
  t.id = st.ColumnText(0);
  t.name = st.ColumnText(1);
  absl::StatusOr<Role> role = ParseRole(st.ColumnText(2));
  if (!role.ok()) {
    return absl::DataLossError(
        absl::StrCat("tokens.role of ", t.id, ": ", role.status().message()));
  }
  t.role = *role;
  t.created_at = st.ColumnTime(3);
  t.revoked_at = st.ColumnOptionalTime(4);
  return t;
}

// CreateToken's argument checks, shared by the backends: kInvalidArgument
// for an empty id, name or hash.
absl::Status CheckNewToken(const TokenRecord& token, const std::string& token_hash);

}  // namespace runloom::store_internal
