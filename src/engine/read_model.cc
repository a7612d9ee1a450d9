// The engine's read model (runloom/engine.h, "read model"): the queries the
// CLI and the HTTP API show runs with, and the dead letters of the transport.
// Every argument is untrusted (a flag, a query string), so each is checked here, before the store
// sees it, and a bad one is kInvalidArgument naming the argument and the fix.
//
// Run paging is keyset paging on the store's total order (created_at DESC,
// id DESC). A cursor is the last run's position, encoded as base64url of
// "1:<created_at unix micros>:<run id>"; the leading version lets a later
// format be told apart. A forged cursor that decodes is only a position, so
// it cannot reach anything a first page could not.
#include "runloom/engine.h"

#include "core/status_macros.h"

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include <algorithm>
#include <string>
#include <vector>

namespace runloom {
namespace {

// Bounds of untrusted arguments: a run id or workflow name, and a cursor
// (an encoded id plus a time stays far below it).
constexpr size_t kMaxNameBytes = 256;
constexpr size_t kMaxCursorBytes = 512;
// How much of a rejected cursor an error message repeats.
constexpr size_t kShownCursorBytes = 40;
constexpr absl::string_view kCursorVersion = "1";

absl::Status CheckName(absl::string_view what, const std::string& value) {
  if (value.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " is empty"));
  if (value.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is ", value.size(), " bytes long; at most ", kMaxNameBytes, " are allowed"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> CheckLimit(int limit) {
  if (limit < 1) {
    return absl::InvalidArgumentError(absl::StrCat("limit must be at least 1 (got ", limit,
                                                   "); at most ", kMaxReadLimit, " are returned"));
  }
  return std::min(limit, kMaxReadLimit);
}

std::string EncodeCursor(const RunRecord& last) {
  return absl::WebSafeBase64Escape(
      absl::StrCat(kCursorVersion, ":", absl::ToUnixMicros(last.created_at), ":", last.id));
}

absl::Status BadCursor(const std::string& cursor, absl::string_view why) {
  std::string shown = absl::CHexEscape(cursor.substr(0, kShownCursorBytes));
  if (cursor.size() > kShownCursorBytes) shown += "...";
  return absl::InvalidArgumentError(
      absl::StrCat("cursor '", shown, "' is not a cursor of a previous page (", why,
                   "); pass the next_cursor of the previous page, or no cursor for the first"));
}

absl::StatusOr<RunPosition> DecodeCursor(const std::string& cursor) {
  if (cursor.size() > kMaxCursorBytes) {
    return BadCursor(cursor, absl::StrCat("longer than ", kMaxCursorBytes, " bytes"));
  }
  std::string raw;
  if (!absl::WebSafeBase64Unescape(cursor, &raw)) return BadCursor(cursor, "not base64url");
  std::vector<absl::string_view> parts = absl::StrSplit(raw, absl::MaxSplits(':', 2));
  if (parts.size() != 3 || parts[0] != kCursorVersion) {
    return BadCursor(cursor, "unknown format");
  }
  int64_t micros = 0;
  if (!absl::SimpleAtoi(parts[1], &micros) || micros < 0) {
    return BadCursor(cursor, "bad time");
  }
  if (parts[2].empty() || parts[2].size() > kMaxNameBytes) return BadCursor(cursor, "bad run id");
  return RunPosition{absl::FromUnixMicros(micros), std::string(parts[2])};
}

// Issue 25's search fields onto the store's filter (the store checks them
// in its statement, so a page is a page whatever they are): created_before
// is the paging position when it comes before the cursor's.
absl::Status AddSearch(const RunQuery& q, RunFilter& filter) {
  if (!q.tenant.empty()) RUNLOOM_RETURN_IF_ERROR(CheckName("tenant", q.tenant));
  if (!q.input_id.empty()) RUNLOOM_RETURN_IF_ERROR(CheckName("input_id", q.input_id));
  if (q.created_after && q.created_before && *q.created_after >= *q.created_before) {
    return absl::InvalidArgumentError("created_after must be before created_before");
  }
  filter.tenant = q.tenant;
  filter.input_value = q.input_id;
  filter.created_since = q.created_after;
  if (q.created_before &&
      (!filter.after.has_value() || filter.after->created_at >= *q.created_before)) {
    // (created_at, id) < (created_before, ""): created strictly before it.
    filter.after = RunPosition{*q.created_before, ""};
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::optional<PendingGate>> PendingGateOfPaused(const RunRecord& run) {
  if (run.status != RunStatus::kPaused) return std::optional<PendingGate>();
  absl::StatusOr<PendingGate> gate = PendingGateOf(run);
  if (absl::IsNotFound(gate.status())) return std::optional<PendingGate>();
  if (!gate.ok()) return gate.status();
  return std::optional<PendingGate>(*std::move(gate));
}

absl::StatusOr<RunRecord> Engine::GetRun(const std::string& run_id) {
  RUNLOOM_RETURN_IF_ERROR(CheckName("run id", run_id));
  return store()->GetRun(run_id);
}

absl::StatusOr<RunPage> Engine::ListRuns(const RunQuery& query) {
  RUNLOOM_ASSIGN_OR_RETURN(int limit, CheckLimit(query.limit));
  if (!query.workflow.empty()) RUNLOOM_RETURN_IF_ERROR(CheckName("workflow", query.workflow));
  RunFilter filter;
  filter.status = query.status;
  filter.workflow_name = query.workflow;
  if (!query.parent_run_id.empty()) {
    RUNLOOM_RETURN_IF_ERROR(CheckName("parent", query.parent_run_id));
    filter.parent_run_id = query.parent_run_id;
  }
  if (!query.cursor.empty()) {
    RUNLOOM_ASSIGN_OR_RETURN(filter.after, DecodeCursor(query.cursor));
  }
  RUNLOOM_RETURN_IF_ERROR(AddSearch(query, filter));
  // One more than the page: whether it comes back says if there is a next
  // page, so the last page never ends in an empty one.
  filter.limit = limit + 1;
  RUNLOOM_ASSIGN_OR_RETURN(std::vector<RunRecord> runs, store()->ListRuns(filter));
  RunPage page;
  if (static_cast<int>(runs.size()) > limit) {
    runs.resize(limit);
    page.next_cursor = EncodeCursor(runs.back());
  }
  page.runs = std::move(runs);
  return page;
}

absl::StatusOr<std::vector<StepRecord>> Engine::ListSteps(const std::string& run_id,
                                                          std::optional<int64_t> revision) {
  RUNLOOM_RETURN_IF_ERROR(CheckName("run id", run_id));
  if (revision.has_value() && *revision < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("revision must be at least 1 (got ", *revision, ")"));
  }
  RUNLOOM_ASSIGN_OR_RETURN(std::vector<StepRecord> steps, store()->ListSteps(run_id, revision));
  // Runs are never deleted: an empty answer needs one more read to tell a
  // run without steps from no run.
  if (steps.empty()) RUNLOOM_RETURN_IF_ERROR(store()->GetRun(run_id).status());
  return steps;
}

absl::StatusOr<std::vector<WriteOperation>> Engine::ListWrites(const std::string& run_id) {
  RUNLOOM_RETURN_IF_ERROR(CheckName("run id", run_id));
  RUNLOOM_ASSIGN_OR_RETURN(std::vector<WriteOperation> writes, store()->ListWrites(run_id));
  if (writes.empty()) RUNLOOM_RETURN_IF_ERROR(store()->GetRun(run_id).status());
  return writes;
}

absl::StatusOr<std::vector<Event>> Engine::ListEvents(const std::string& run_id, int64_t after_seq,
                                                      int limit) {
  RUNLOOM_RETURN_IF_ERROR(CheckName("run id", run_id));
  if (after_seq < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("after_seq must be at least 0 (got ", after_seq, ")"));
  }
  RUNLOOM_ASSIGN_OR_RETURN(int clamped, CheckLimit(limit));
  RUNLOOM_ASSIGN_OR_RETURN(std::vector<Event> events,
                           store()->ListEvents(run_id, after_seq, clamped));
  if (events.empty()) RUNLOOM_RETURN_IF_ERROR(store()->GetRun(run_id).status());
  return events;
}

absl::StatusOr<std::vector<SignalRecord>> Engine::ListSignals(const std::string& run_id) {
  RUNLOOM_RETURN_IF_ERROR(CheckName("run id", run_id));
  RUNLOOM_ASSIGN_OR_RETURN(std::vector<SignalRecord> signals,
                           store()->ListSignals(run_id, 0, SignalStore::kMaxMailbox));
  if (signals.empty()) RUNLOOM_RETURN_IF_ERROR(store()->GetRun(run_id).status());
  return signals;
}

absl::StatusOr<std::vector<RunRecord>> Engine::ListRunsChangedSince(absl::Time since) {
  // One more than the bound: whether it comes back says there were too many.
  RunFilter filter{.limit = kMaxReadLimit + 1, .updated_since = since};
  RUNLOOM_ASSIGN_OR_RETURN(std::vector<RunRecord> runs, store()->ListRuns(filter));
  if (runs.size() > static_cast<size_t>(kMaxReadLimit)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("more than ", kMaxReadLimit, " runs changed since ",
                     absl::FormatTime(since), "; read the runs list from its first page instead"));
  }
  return runs;
}

absl::StatusOr<absl::Time> Engine::Now() { return store()->Now(); }

absl::StatusOr<std::optional<PendingGate>> Engine::GetPendingGate(const std::string& run_id) {
  RUNLOOM_ASSIGN_OR_RETURN(RunRecord run, GetRun(run_id));
  return PendingGateOfPaused(run);
}

absl::StatusOr<std::vector<WorkflowVersion>> Engine::ListWorkflows() {
  return store()->ListWorkflows();
}

absl::StatusOr<WorkflowVersion> Engine::GetWorkflow(const std::string& name, int64_t version) {
  RUNLOOM_RETURN_IF_ERROR(CheckName("workflow name", name));
  if (version < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("workflow version must be 0 (the latest) or more (got ", version, ")"));
  }
  return store()->GetWorkflow(name, version);
}

absl::StatusOr<std::vector<DeadLetter>> Engine::ListDeadLetters(int limit) {
  RUNLOOM_ASSIGN_OR_RETURN(int clamped, CheckLimit(limit));
  return transport()->ListDeadLetters(clamped);
}

absl::Status Engine::RedriveDeadLetter(const std::string& id) {
  RUNLOOM_RETURN_IF_ERROR(CheckName("dead letter id", id));
  return transport()->Redrive(id);
}

absl::StatusOr<int> Engine::RedriveAllDeadLetters() { return transport()->RedriveAll(); }

absl::StatusOr<std::vector<TenantBudget>> Engine::ListTenantBudgets() {
  return store()->ListTenantBudgets();
}

}  // namespace runloom
