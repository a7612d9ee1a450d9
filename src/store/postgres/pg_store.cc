#include "store/postgres/pg_store.h"

#include "core/status_macros.h"
#include "store/event_check.h"
#include "store/record_codec.h"
#include "store/write_checks.h"

#include "absl/strings/str_cat.h"

#include <limits>
#include <utility>
#include <vector>

namespace runloom::store_internal {
namespace {

// LIMIT NULL is "no limit" in PostgreSQL.
std::optional<int64_t> SqlLimit(int limit) {
  return limit <= 0 ? std::nullopt : std::optional<int64_t>(limit);
}

// ON CONFLICT: a concurrent registration of the same digest wins; the
// caller re-reads it. The version is the next one under the name's lock
// (the advisory lock of the name's hash serializes registrations of one name).

constexpr char kGetRun[] = "SELECT " RUNLOOM_RUN_COLUMNS " FROM runs WHERE id = $1";
constexpr char kRunByKey[] =
    "SELECT " RUNLOOM_RUN_COLUMNS " FROM runs WHERE workflow_name = $1 AND idempotency_key = $2";
constexpr char kInsertRun[] =
    "INSERT INTO runs (id, workflow_name, workflow_version, workflow_digest, status, inputs, "
    "inputs_digest, idempotency_key, phase, revision, entry, context, attempts, max_attempts, "
    "last_event_seq, created_at, updated_at, parent_run_id, concurrency_key, concurrency_limit, "
    "priority) "
    "VALUES ($1, $2, $3, $4, 'queued', $5, $6, $7, $8, 1, 'fresh', $11, 0, $9, $10, "
    "runloom_now(), runloom_now(), $12, $13, $14, $15) RETURNING created_at";
// $4: RunFilter::parent_run_id ('' = any parent or none). $5, $6, $7: the
// search fields (RunFilter::tenant, input_value, created_since; the last is
// the smallest time when there is none, so that it is always a plain range
// on runs_created_id); tenant and input value are checked on each row the
// walk visits (no index serves them). $8, $9: the paging position, or $8
// updated_since.
#define RUNLOOM_PG_RUN_FILTER                                                               \
  " FROM runs WHERE ($1::text IS NULL OR status = $1) AND ($2 = '' OR workflow_name = $2) " \
  "AND ($4 = '' OR parent_run_id = $4) "                                                    \
  "AND ($5 = '' OR (context::jsonb -> 'budget' ->> 'tenant') = $5) "                        \
  "AND ($6 = '' OR idempotency_key = $6 OR (jsonb_typeof(inputs::jsonb) = 'object' AND "    \
  "EXISTS (SELECT 1 FROM jsonb_each(inputs::jsonb) AS j WHERE (jsonb_typeof(j.value) = "    \
  "'string' AND j.value #>> '{}' = $6) OR (jsonb_typeof(j.value) = 'number' AND "           \
  "j.value::text ~ '^-?[0-9]+$' AND j.value::text = $6)))) "                                \
  "AND created_at >= $7::bigint "
constexpr char kListRuns[] = "SELECT " RUNLOOM_RUN_COLUMNS RUNLOOM_PG_RUN_FILTER
                             "ORDER BY created_at DESC, id DESC LIMIT $3";
constexpr char kListRunsAfter[] =
    "SELECT " RUNLOOM_RUN_COLUMNS RUNLOOM_PG_RUN_FILTER
    "AND (created_at, id) < ($8::bigint, $9::text) ORDER BY created_at DESC, id DESC LIMIT $3";
constexpr char kListRunsUpdatedSince[] =
    "SELECT " RUNLOOM_RUN_COLUMNS RUNLOOM_PG_RUN_FILTER
    "AND updated_at >= $8::bigint ORDER BY created_at DESC, id DESC LIMIT $3";
constexpr char kInsertEvent[] =
    "INSERT INTO run_events (run_id, seq, type, schema_version, at, data) "
    "VALUES ($1, $2, $3, $4, $5, $6)";
// Several events in one statement: seq $2+1, $2+2, ... in array order.
constexpr char kInsertEvents[] =
    "INSERT INTO run_events (run_id, seq, type, schema_version, at, data) "
    "SELECT $1, $2 + x.n, x.t, x.v, $3, x.d "
    "FROM unnest($4::text[], $5::integer[], $6::text[]) WITH ORDINALITY AS x(t, v, d, n)";
constexpr char kListEvents[] = "SELECT " RUNLOOM_EVENT_COLUMNS
                               " FROM run_events WHERE run_id = $1 AND seq > $2 "
                               "ORDER BY seq LIMIT $3";
constexpr char kListSteps[] = "SELECT " RUNLOOM_STEP_COLUMNS
                              " FROM step_records WHERE run_id = $1 "
                              "ORDER BY revision, started_at, path";
constexpr char kListStepsOfRevision[] = "SELECT " RUNLOOM_STEP_COLUMNS
                                        " FROM step_records WHERE run_id = $1 AND revision = $2 "
                                        "ORDER BY revision, started_at, path";
constexpr char kCancelRequested[] =
    "SELECT id FROM runs WHERE id = ANY($1::text[]) AND ((status = 'running' "
    "AND cancel_requested = 1) OR status NOT IN ('queued', 'running', 'paused', 'waiting'))";
constexpr char kDueTimers[] =
    "SELECT id FROM runs WHERE status = 'waiting' AND wake_at <= (SELECT runloom_now()) "
    "ORDER BY wake_at LIMIT $1";
constexpr char kExpiredLeases[] =
    "SELECT id, status, attempts, max_attempts, lease_token FROM runs "
    "WHERE status = 'running' "
    "AND (lease_expires_at IS NULL OR lease_expires_at <= (SELECT runloom_now())) "
    "ORDER BY lease_expires_at LIMIT $1";
constexpr char kLiveLeases[] =
    "SELECT id, lease_owner, lease_token, lease_expires_at FROM runs "
    "WHERE status = 'running' AND lease_expires_at > (SELECT runloom_now()) "
    "ORDER BY lease_expires_at LIMIT $1";
// One statement, so no lock is held between a check and the write: the
// row's lock serializes it with a renewal or a new lease of the run.
constexpr char kExpireLease[] =
    "UPDATE runs SET lease_expires_at = (SELECT runloom_now()) "
    "WHERE id = $1 AND status = 'running' AND lease_token = $2 "
    "AND lease_expires_at > (SELECT runloom_now()) RETURNING id";
// created_at <= updated_at: the bound on created_at lets runs_queued_created
// (schema version 9) find the candidates; updated_at itself has no index, so
// that a write that keeps its run's status can be a HOT update.
constexpr char kStrandedQueued[] =
    "SELECT id, status, attempts, max_attempts, lease_token FROM runs r "
    "WHERE status = 'queued' AND created_at <= runloom_now() - $1 "
    "AND updated_at <= runloom_now() - $1 AND (concurrency_key = '' OR "
    "(SELECT count(*) FROM runs k WHERE k.status = 'running' "
    "AND k.concurrency_key = r.concurrency_key AND k.concurrency_key <> '') "
    "< r.concurrency_limit) ORDER BY created_at LIMIT $2";
constexpr char kFence[] =
    "SELECT " RUNLOOM_FENCE_COLUMNS ", runloom_now() FROM runs WHERE id = $1 FOR UPDATE";
constexpr char kMessageOfRun[] = "SELECT id, claimed_by FROM queue WHERE run_id = $1";
constexpr char kDeleteMessage[] = "DELETE FROM queue WHERE id = $1";
// The row's fair group and priority from its run (schema version 16), as
// SQLite's (sqlite_queue.cc, kInsertMessage); the trigger runs_fair_group
// keeps the group in step when the run moves later (also when that move is
// a statement of this transaction that runs after this one).
constexpr char kInsertMessage[] =
    "INSERT INTO queue (run_id, enqueued_at, visible_at, deliveries, claimed_by, fair_key, "
    "priority) VALUES ($1, $2, $2, 0, '', COALESCE((SELECT CASE WHEN status = 'queued' THEN "
    "concurrency_key ELSE '' END FROM runs WHERE id = $1), ''), "
    "COALESCE((SELECT priority FROM runs WHERE id = $1), 0))";

absl::StatusOr<RecoveryCandidate> CandidateFromRow(const PgRow& row) {
  RecoveryCandidate c;
  c.run_id = row.ColumnText(0);
  const std::string status = row.ColumnText(1);
  std::optional<RunStatus> parsed = ParseRunStatus(status);
  if (!parsed.has_value()) {
    return absl::DataLossError(
        absl::StrCat("run ", c.run_id, " has unknown status '", status, "' in the database"));
  }
  c.status = *parsed;
  c.attempts = static_cast<int>(row.ColumnInt(2));
  c.max_attempts = static_cast<int>(row.ColumnInt(3));
  c.lease_token = row.ColumnText(4);
  return c;
}

// The run's row, read by `c` (in or out of a transaction).
absl::StatusOr<RunRecord> LoadRun(PgConn& c, const std::string& run_id) {
  RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kGetRun, PgParams().Text(run_id)));
  if (r.rows() == 0) return absl::NotFoundError(absl::StrCat("run ", run_id, " not found"));
  return RunFromRow(r.row(0));
}

}  // namespace

absl::StatusOr<std::pair<Fence, absl::Time>> PgLockFence(PgConn& c, const std::string& run_id) {
  RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kFence, PgParams().Text(run_id)));
  if (r.rows() == 0) return absl::NotFoundError(absl::StrCat("run ", run_id, " not found"));
  const PgRow row = r.row(0);
  RUNLOOM_ASSIGN_OR_RETURN(Fence f, FenceFromRow(row, run_id));
  return std::make_pair(std::move(f), row.ColumnTime(kFenceColumnCount));
}

absl::StatusOr<int64_t> PgAppendEvents(PgConn& c, const std::string& run_id, int64_t last_seq,
                                       const std::vector<EncodedEvent>& events, absl::Time now) {
#ifdef RUNLOOM_TESTING
  for (const EncodedEvent& e : events) {
    RUNLOOM_RETURN_IF_ERROR(CheckEventOnWrite(run_id, e.type, e.schema_version, e.data));
  }
#endif
  if (events.size() == 1) {
    const EncodedEvent& e = events[0];
    PgParams p;
    p.Text(run_id).Int(last_seq + 1).Text(e.type).Int(e.schema_version).Time(now).Text(e.data);
    c.Defer(kInsertEvent, std::move(p));
  } else if (!events.empty()) {
    std::vector<std::string> types, versions, data;
    for (const EncodedEvent& e : events) {
      types.push_back(e.type);
      versions.push_back(absl::StrCat(e.schema_version));
      data.push_back(e.data);
    }
    PgParams p;
    p.Text(run_id).Int(last_seq).Time(now).TextArray(types).TextArray(versions).TextArray(data);
    c.Defer(kInsertEvents, std::move(p));
  }
  return last_seq + static_cast<int64_t>(events.size());
}

absl::StatusOr<bool> PgEnsureQueueMessage(PgConn& c, const std::string& run_id, absl::Time now) {
  RUNLOOM_ASSIGN_OR_RETURN(PgResult m, c.Exec(kMessageOfRun, PgParams().Text(run_id)));
  if (m.rows() > 0) {
    if (m.row(0).ColumnText(1).empty()) return false;  // pending: keep it
    c.Defer(kDeleteMessage, PgParams().Int(m.row(0).ColumnInt(0)));
  }
  c.Defer(kInsertMessage, PgParams().Text(run_id).Time(now));
  return true;
}

// ---- runs ----

absl::StatusOr<CreateRunResult> PgStore::CreateRun(const NewRun& run, std::vector<Event> events) {
  RUNLOOM_RETURN_IF_ERROR(CheckNewRun(run));
  RUNLOOM_ASSIGN_OR_RETURN(std::string inputs,
                           DumpJson(run.inputs, absl::StrCat("inputs of run ", run.id)));
  const nlohmann::json context_json =
      run.context.is_null() ? nlohmann::json::object() : run.context;
  RUNLOOM_ASSIGN_OR_RETURN(std::string context,
                           DumpJson(context_json, absl::StrCat("context of run ", run.id)));
  RUNLOOM_ASSIGN_OR_RETURN(std::vector<EncodedEvent> encoded, EncodeEvents(run.id, events));
  CreateRunResult out;
  // The record of a run this call created at server time `now`.
  auto created = [&](absl::Time now) {
    out.created = true;
    out.run = RunRecord{};
    out.run.id = run.id;
    out.run.workflow_name = run.workflow_name;
    out.run.workflow_version = run.workflow_version;
    out.run.workflow_digest = run.workflow_digest;
    out.run.status = RunStatus::kQueued;
    out.run.inputs = run.inputs;
    out.run.inputs_digest = run.inputs_digest;
    out.run.idempotency_key = run.idempotency_key;
    out.run.phase = run.phase;
    out.run.max_attempts = run.max_attempts;
    out.run.parent_run_id = run.parent_run_id;
    out.run.concurrency_key = run.concurrency_key;
    out.run.concurrency_limit = run.concurrency_key.empty() ? 0 : run.concurrency_limit;
    out.run.priority = run.priority;
    out.run.context = context_json;
    out.run.last_event_seq = static_cast<int64_t>(encoded.size());
    out.run.created_at = now;
    out.run.updated_at = now;
  };
  if (run.idempotency_key.empty()) {
    // No key to look up first: the admission group (pg_admit_group.h).
#ifdef RUNLOOM_TESTING
    for (const EncodedEvent& e : encoded) {
      RUNLOOM_RETURN_IF_ERROR(CheckEventOnWrite(run.id, e.type, e.schema_version, e.data));
    }
#endif
    PgAdmission a{.id = run.id,
                  .workflow_name = run.workflow_name,
                  .workflow_digest = run.workflow_digest,
                  .inputs = std::move(inputs),
                  .inputs_digest = run.inputs_digest,
                  .phase = run.phase,
                  .context = std::move(context),
                  .workflow_version = run.workflow_version,
                  .max_attempts = run.max_attempts,
                  .concurrency_key = run.concurrency_key,
                  .concurrency_limit = run.concurrency_key.empty() ? 0 : run.concurrency_limit,
                  .priority = run.priority,
                  .events = &encoded};
    admit_.Run(&a);
    if (a.status.code() == absl::StatusCode::kAlreadyExists) {
      return absl::AlreadyExistsError(absl::StrCat("run ", run.id, " already exists"));
    }
    RUNLOOM_RETURN_IF_ERROR(a.status);
    created(a.created_at);
    return out;
  }
  auto existing = [&](PgConn& c) -> absl::StatusOr<bool> {
    if (run.idempotency_key.empty()) return false;
    RUNLOOM_ASSIGN_OR_RETURN(
        PgResult r,
        c.Exec(kRunByKey, PgParams().Text(run.workflow_name).Text(run.idempotency_key)));
    if (r.rows() == 0) return false;
    RUNLOOM_ASSIGN_OR_RETURN(out.run, RunFromRow(r.row(0)));
    out.created = false;
    return true;
  };
  absl::Status s = h_->Txn([&](PgConn& c) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(bool found, existing(c));
    if (found) return absl::OkStatus();
    PgParams p;
    p.Text(run.id).Text(run.workflow_name).Int(run.workflow_version).Text(run.workflow_digest);
    p.Text(inputs).Text(run.inputs_digest).Text(run.idempotency_key).Text(run.phase);
    p.Int(run.max_attempts).Int(static_cast<int64_t>(encoded.size())).Text(context);
    p.Text(run.parent_run_id);
    p.Text(run.concurrency_key).Int(run.concurrency_key.empty() ? 0 : run.concurrency_limit);
    p.Int(run.priority);
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kInsertRun, p));
    const absl::Time now = r.row(0).ColumnTime(0);
    RUNLOOM_RETURN_IF_ERROR(PgAppendEvents(c, run.id, 0, encoded, now).status());
    c.Defer(kInsertMessage, PgParams().Text(run.id).Time(now));
    created(now);
    return absl::OkStatus();
  });
  if (s.code() == absl::StatusCode::kAlreadyExists) {
    // A concurrent admission with the same key won the unique index; or the
    // id is taken.
    bool found = false;
    RUNLOOM_RETURN_IF_ERROR(h_->Read([&](PgConn& c) -> absl::Status {
      RUNLOOM_ASSIGN_OR_RETURN(found, existing(c));
      return absl::OkStatus();
    }));
    if (found) return out;
    return absl::AlreadyExistsError(absl::StrCat("run ", run.id, " already exists"));
  }
  RUNLOOM_RETURN_IF_ERROR(s);
  return out;
}

absl::StatusOr<RunRecord> PgStore::GetRun(const std::string& run_id) {
  RunRecord out;
  RUNLOOM_RETURN_IF_ERROR(h_->Read([&](PgConn& c) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(out, LoadRun(c, run_id));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::vector<RunRecord>> PgStore::ListRuns(const RunFilter& filter) {
  RUNLOOM_RETURN_IF_ERROR(CheckRunFilter(filter));
  std::vector<RunRecord> out;
  RUNLOOM_RETURN_IF_ERROR(h_->Read([&](PgConn& c) -> absl::Status {
    if (!filter.idempotency_key.empty()) {
      RUNLOOM_ASSIGN_OR_RETURN(
          PgResult r,
          c.Exec(kRunByKey, PgParams().Text(filter.workflow_name).Text(filter.idempotency_key)));
      RUNLOOM_ASSIGN_OR_RETURN(out, CollectRows<RunRecord>(r, RunFromRow<PgRow>));
      std::erase_if(out, [&](const RunRecord& run) { return !PassesKeyedFilter(filter, run); });
      return absl::OkStatus();
    }
    PgParams p;
    if (filter.status.has_value()) {
      p.Text(StatusName(*filter.status));
    } else {
      p.Null();
    }
    p.Text(filter.workflow_name).OptionalInt(SqlLimit(filter.limit)).Text(filter.parent_run_id);
    p.Text(filter.tenant).Text(filter.input_value);
    if (filter.created_since.has_value()) {
      p.Time(*filter.created_since);
    } else {
      p.Int(std::numeric_limits<int64_t>::min());
    }
    if (filter.after.has_value()) p.Time(filter.after->created_at).Text(filter.after->id);
    if (filter.updated_since.has_value()) p.Time(*filter.updated_since);
    const char* sql = filter.after.has_value()           ? kListRunsAfter
                      : filter.updated_since.has_value() ? kListRunsUpdatedSince
                                                         : kListRuns;
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(sql, p));
    RUNLOOM_ASSIGN_OR_RETURN(out, CollectRows<RunRecord>(r, RunFromRow<PgRow>));
    return absl::OkStatus();
  }));
  return out;
}


// ---- reads ----

absl::StatusOr<std::vector<StepRecord>> PgStore::ListSteps(const std::string& run_id,
                                                           std::optional<int64_t> revision) {
  std::vector<StepRecord> out;
  RUNLOOM_RETURN_IF_ERROR(h_->Read([&](PgConn& c) -> absl::Status {
    PgParams p;
    p.Text(run_id);
    if (revision.has_value()) p.Int(*revision);
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r,
                             c.Exec(revision.has_value() ? kListStepsOfRevision : kListSteps, p));
    RUNLOOM_ASSIGN_OR_RETURN(out, CollectRows<StepRecord>(r, StepFromRow<PgRow>));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::vector<Event>> PgStore::ListEvents(const std::string& run_id, int64_t after_seq,
                                                       int limit) {
  std::vector<Event> out;
  RUNLOOM_RETURN_IF_ERROR(h_->Read([&](PgConn& c) -> absl::Status {
    PgParams p;
    p.Text(run_id).Int(after_seq).OptionalInt(SqlLimit(limit));
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kListEvents, p));
    RUNLOOM_ASSIGN_OR_RETURN(out, CollectRows<Event>(r, EventFromRow<PgRow>));
    return absl::OkStatus();
  }));
  return out;
}

// ---- recovery ----

absl::StatusOr<std::vector<LiveLease>> PgStore::ListLiveLeases(int limit) {
  std::vector<LiveLease> out;
  RUNLOOM_RETURN_IF_ERROR(h_->Read([&](PgConn& c) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kLiveLeases, PgParams().OptionalInt(SqlLimit(limit))));
    out.clear();
    for (int i = 0; i < r.rows(); ++i) {
      const PgRow row = r.row(i);
      out.push_back(LiveLease{.run_id = row.ColumnText(0),
                              .owner = row.ColumnText(1),
                              .token = row.ColumnText(2),
                              .expires_at = row.ColumnTime(3)});
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::Status PgStore::ExpireLease(const std::string& run_id, const std::string& token) {
  if (token.empty()) return absl::InvalidArgumentError("ExpireLease: the lease token is empty");
  return h_->Txn([&](PgConn& c) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kExpireLease, PgParams().Text(run_id).Text(token)));
    if (r.rows() == 0) {
      return absl::AbortedError(
          absl::StrCat("run ", run_id, " is not running under that lease any more"));
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<RecoveryCandidate>> PgStore::FindRecoverable(absl::Duration queued_grace,
                                                                        int limit) {
  if (queued_grace < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("queued_grace is negative (", absl::FormatDuration(queued_grace), ")"));
  }
  std::vector<RecoveryCandidate> out;
  RUNLOOM_RETURN_IF_ERROR(h_->Read([&](PgConn& c) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(PgResult expired,
                             c.Exec(kExpiredLeases, PgParams().OptionalInt(SqlLimit(limit))));
    RUNLOOM_ASSIGN_OR_RETURN(out, CollectRows<RecoveryCandidate>(expired, CandidateFromRow));
    if (limit > 0 && static_cast<int>(out.size()) >= limit) return absl::OkStatus();
    PgParams p;
    p.Int(absl::ToInt64Microseconds(queued_grace));
    p.OptionalInt(SqlLimit(limit > 0 ? limit - static_cast<int>(out.size()) : 0));
    RUNLOOM_ASSIGN_OR_RETURN(PgResult queued, c.Exec(kStrandedQueued, p));
    RUNLOOM_ASSIGN_OR_RETURN(std::vector<RecoveryCandidate> more,
                             CollectRows<RecoveryCandidate>(queued, CandidateFromRow));
    for (RecoveryCandidate& m : more) out.push_back(std::move(m));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::vector<std::string>> PgStore::FindDueTimers(int limit) {
  std::vector<std::string> out;
  RUNLOOM_RETURN_IF_ERROR(h_->Read([&](PgConn& c) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kDueTimers, PgParams().Int(std::max(1, limit))));
    for (int i = 0; i < r.rows(); ++i) out.push_back(r.row(i).ColumnText(0));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::vector<std::string>> PgStore::FindCancelRequested(
    const std::vector<std::string>& run_ids) {
  std::vector<std::string> out;
  if (run_ids.empty()) return out;
  RUNLOOM_RETURN_IF_ERROR(h_->Read([&](PgConn& c) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kCancelRequested, PgParams().TextArray(run_ids)));
    for (int i = 0; i < r.rows(); ++i) out.push_back(r.row(i).ColumnText(0));
    return absl::OkStatus();
  }));
  return out;
}

}  // namespace runloom::store_internal
