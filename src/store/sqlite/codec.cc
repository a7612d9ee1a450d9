#include "store/sqlite/codec.h"

#include "core/status_macros.h"

#include "absl/strings/str_cat.h"

#include <exception>

namespace runloom::store_internal {

std::string StatusName(RunStatus s) { return std::string(ToString(s)); }
std::string PartyName(Party p) { return std::string(ToString(p)); }

std::string StepStateName(StepState s) { return std::string(ToString(s)); }

std::string ErrorClassName(const std::optional<ErrorClass>& c) {
  return c.has_value() ? std::string(ToString(*c)) : std::string();
}

absl::StatusOr<std::string> DumpJson(const nlohmann::json& value, std::string_view what) {
  try {
    return value.dump();
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(what), " cannot be stored as JSON: ",
                                                   e.what(), "; strings must be valid UTF-8"));
  }
}

absl::StatusOr<nlohmann::json> ParseJson(const std::string& text, std::string_view what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat("corrupt JSON in ", std::string(what), ": ", e.what()));
  }
}

absl::StatusOr<RunRecord> RunFromRow(const Statement& st) {
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
  r.entry = st.ColumnText(10);
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
  return r;
}

absl::StatusOr<StepRecord> StepFromRow(const Statement& st) {
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

absl::StatusOr<Event> EventFromRow(const Statement& st) {
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

absl::StatusOr<WorkflowVersion> WorkflowFromRow(const Statement& st) {
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

}  // namespace runloom::store_internal
