// Row <-> record conversion for the SQLite store (docs/formats/sqlite-schema.md).
//
// Thread-safety: stateless functions.
#pragma once

#include "runloom/run.h"
#include "runloom/status.h"

#include "store/sqlite/db.h"

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

#include <optional>
#include <string>
#include <string_view>

// The runs columns in the order RunFromRow reads them.
#define RUNLOOM_SQLITE_RUN_COLUMNS                                                        \
  "id, workflow_name, workflow_version, workflow_digest, status, inputs, inputs_digest, " \
  "idempotency_key, phase, revision, entry, context, lease_owner, lease_token, "          \
  "lease_expires_at, attempts, max_attempts, cancel_requested, outcome, error, "          \
  "last_event_seq, created_at, updated_at, finished_at"

// The step_records columns in the order StepFromRow reads them.
#define RUNLOOM_SQLITE_STEP_COLUMNS                                               \
  "run_id, revision, path, step_id, kind, phase, attempt, state, output, error, " \
  "error_class, stderr_tail, started_at, finished_at"

// The run_events columns in the order EventFromRow reads them.
#define RUNLOOM_SQLITE_EVENT_COLUMNS "run_id, seq, type, schema_version, at, data"

namespace runloom::store_internal {

std::string StatusName(RunStatus s);
std::string PartyName(Party p);
std::string StepStateName(StepState s);
// A step record's error_class column: ToString(*c), or "" when unset.
std::string ErrorClassName(const std::optional<ErrorClass>& c);

// JSON <-> TEXT. Dump fails (kInvalidArgument) on invalid UTF-8; Parse fails
// (kDataLoss) on a corrupt cell. `what` names the cell in the error.
absl::StatusOr<std::string> DumpJson(const nlohmann::json& value, std::string_view what);
absl::StatusOr<nlohmann::json> ParseJson(const std::string& text, std::string_view what);

// Read the current row of a statement selecting the columns above.
absl::StatusOr<RunRecord> RunFromRow(const Statement& st);
absl::StatusOr<StepRecord> StepFromRow(const Statement& st);
absl::StatusOr<Event> EventFromRow(const Statement& st);
absl::StatusOr<WorkflowVersion> WorkflowFromRow(
    const Statement& st);  // name, version, digest, canonical, created_at

}  // namespace runloom::store_internal
