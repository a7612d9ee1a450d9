#include "store/sqlite/sqlite_store.h"

#include "core/injected_bug.h"
#include "core/status_macros.h"
#include "store/event_check.h"
#include "store/sqlite/codec.h"
#include "store/write_checks.h"

#include "absl/strings/str_cat.h"

#include <limits>
#include <utility>
#include <vector>

namespace runloom::store_internal {
namespace {

// LIMIT -1 is "no limit" in SQLite.
int64_t SqlLimit(int limit) { return limit <= 0 ? -1 : limit; }

constexpr char kGetRun[] = "SELECT " RUNLOOM_SQLITE_RUN_COLUMNS " FROM runs WHERE id = ?1";
constexpr char kRunByKey[] = "SELECT " RUNLOOM_SQLITE_RUN_COLUMNS
                             " FROM runs WHERE workflow_name = ?1 AND idempotency_key = ?2";
constexpr char kInsertRun[] =
    "INSERT INTO runs (id, workflow_name, workflow_version, workflow_digest, status, inputs, "
    "inputs_digest, idempotency_key, phase, revision, entry, context, attempts, max_attempts, "
    "last_event_seq, created_at, updated_at, parent_run_id, concurrency_key, concurrency_limit, "
    "priority) "
    "VALUES (?1, ?2, ?3, ?4, 'queued', ?5, ?6, ?7, ?8, 1, 'fresh', ?12, 0, ?9, ?10, ?11, ?11, "
    "?13, ?14, ?15, ?16)";
// Every form checks RunFilter's search fields: ?7 tenant and ?8 input value
// on each row the walk visits (no index serves them), ?9 created_since as a
// lower bound of the walk on runs_created_id (bound to the smallest time
// when there is none, so that the bound is always a plain range).
#define RUNLOOM_SQLITE_RUN_SEARCH                                                       \
  "AND (?7 = '' OR json_extract(context, '$.budget.tenant') = ?7) "                     \
  "AND (?8 = '' OR idempotency_key = ?8 OR (json_type(inputs) = 'object' AND EXISTS ("  \
  "SELECT 1 FROM json_each(runs.inputs) AS j WHERE (j.type = 'text' AND j.value = ?8) " \
  "OR (j.type = 'integer' AND CAST(j.value AS TEXT) = ?8)))) "                          \
  "AND created_at >= ?9 "
// Both walk the index runs_created_id backwards (no sort); the second starts
// after a page's last run (a row-value range on that index).
constexpr char kListRuns[] =
    "SELECT " RUNLOOM_SQLITE_RUN_COLUMNS
    " FROM runs WHERE (?1 IS NULL OR status = ?1) AND (?2 = '' OR workflow_name = ?2) "
    "AND (?6 = '' OR parent_run_id = ?6) " RUNLOOM_SQLITE_RUN_SEARCH
    "ORDER BY created_at DESC, id DESC LIMIT ?3";
constexpr char kListRunsAfter[] =
    "SELECT " RUNLOOM_SQLITE_RUN_COLUMNS
    " FROM runs WHERE (?1 IS NULL OR status = ?1) AND (?2 = '' OR workflow_name = ?2) "
    "AND (?6 = '' OR parent_run_id = ?6) " RUNLOOM_SQLITE_RUN_SEARCH
    "AND (created_at, id) < (?4, ?5) ORDER BY created_at DESC, id DESC LIMIT ?3";
// RunFilter::updated_since: checks updated_at on each row the walk visits.
constexpr char kListRunsUpdatedSince[] =
    "SELECT " RUNLOOM_SQLITE_RUN_COLUMNS
    " FROM runs WHERE (?1 IS NULL OR status = ?1) AND (?2 = '' OR workflow_name = ?2) "
    "AND (?6 = '' OR parent_run_id = ?6) " RUNLOOM_SQLITE_RUN_SEARCH
    "AND updated_at >= ?4 ORDER BY created_at DESC, id DESC LIMIT ?3";
constexpr char kInsertEvent[] =
    "INSERT INTO run_events (run_id, seq, type, schema_version, at, data) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
constexpr char kInsertTwoEvents[] =
    "INSERT INTO run_events (run_id, seq, type, schema_version, at, data) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6), (?7, ?8, ?9, ?10, ?11, ?12)";
constexpr char kListEvents[] = "SELECT " RUNLOOM_SQLITE_EVENT_COLUMNS
                               " FROM run_events WHERE run_id = ?1 AND seq > ?2 "
                               "ORDER BY seq LIMIT ?3";
constexpr char kListSteps[] = "SELECT " RUNLOOM_SQLITE_STEP_COLUMNS
                              " FROM step_records WHERE run_id = ?1 "
                              "ORDER BY revision, started_at, path";
constexpr char kListStepsOfRevision[] = "SELECT " RUNLOOM_SQLITE_STEP_COLUMNS
                                        " FROM step_records WHERE run_id = ?1 AND revision = ?2 "
                                        "ORDER BY revision, started_at, path";
constexpr char kCancelRequested[] =
    "SELECT 1 FROM runs WHERE id = ?1 AND ((status = 'running' AND cancel_requested = 1) OR "
    "status NOT IN ('queued', 'running', 'paused', 'waiting'))";
constexpr char kDueTimers[] =
    "SELECT id FROM runs WHERE status = 'waiting' AND wake_at <= ?1 ORDER BY wake_at LIMIT ?2";
constexpr char kExpiredLeases[] =
    "SELECT id, status, attempts, max_attempts, lease_token FROM runs "
    "WHERE status = 'running' AND (lease_expires_at IS NULL OR lease_expires_at <= ?1) "
    "ORDER BY lease_expires_at LIMIT ?2";
constexpr char kLiveLeases[] =
    "SELECT id, lease_owner, lease_token, lease_expires_at FROM runs "
    "WHERE status = 'running' AND lease_expires_at > ?1 ORDER BY lease_expires_at LIMIT ?2";
constexpr char kExpireLease[] =
    "UPDATE runs SET lease_expires_at = ?3 "
    "WHERE id = ?1 AND status = 'running' AND lease_token = ?2 AND lease_expires_at > ?3";
// A queued run holds no lease (a move to queued releases it), so "no live
// lease" is the status itself. Whether it still has a message is the
// transport's question (Transport::FindMessages), not the store's. A run
// whose concurrency key is full is left out: it cannot be leased, and a
// backlog of them (each with its message, held back by the claim) would
// fill the candidate list before the runs that are stranded.
constexpr char kStrandedQueued[] =
    "SELECT id, status, attempts, max_attempts, lease_token FROM runs r "
    "WHERE status = 'queued' AND updated_at <= ?1 AND (concurrency_key = '' OR "
    "(SELECT count(*) FROM runs k WHERE k.status = 'running' "
    "AND k.concurrency_key = r.concurrency_key AND k.concurrency_key <> '') "
    "< r.concurrency_limit) "
    "ORDER BY updated_at LIMIT ?2";

template <typename T, typename F>
absl::StatusOr<std::vector<T>> CollectRows(Statement& st, F from_row) {
  std::vector<T> out;
  while (true) {
    RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) return out;
    RUNLOOM_ASSIGN_OR_RETURN(T value, from_row(st));
    out.push_back(std::move(value));
  }
}

}  // namespace

absl::StatusOr<RunRecord> LoadRun(Db& db, const std::string& run_id) {
  RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kGetRun));
  st.BindText(1, run_id);
  RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("run ", run_id, " not found"));
  return RunFromRow(st);
}

absl::StatusOr<int64_t> AppendEvents(Db& db, const std::string& run_id, int64_t last_seq,
                                     const std::vector<EncodedEvent>& events, absl::Time now) {
#ifdef RUNLOOM_TESTING
  for (const EncodedEvent& e : events) {  // every append passes here (store/event_check.h)
    RUNLOOM_RETURN_IF_ERROR(CheckEventOnWrite(run_id, e.type, e.schema_version, e.data));
  }
#endif
  size_t i = 0;
  // Two rows per statement where possible: most writes append two events
  // (a step's end and the next step's start), and one statement costs less
  // than two.
  for (; i + 1 < events.size(); i += 2) {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kInsertTwoEvents));
    for (int k = 0; k < 2; ++k) {
      const EncodedEvent& e = events[i + static_cast<size_t>(k)];
      const int base = 6 * k;
      st.BindText(base + 1, run_id);
      st.BindInt(base + 2, ++last_seq);
      st.BindText(base + 3, e.type);
      st.BindInt(base + 4, e.schema_version);
      st.BindTime(base + 5, now);
      st.BindText(base + 6, e.data);
    }
    RUNLOOM_RETURN_IF_ERROR(st.Run());
  }
  for (; i < events.size(); ++i) {
    const EncodedEvent& e = events[i];
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kInsertEvent));
    st.BindText(1, run_id);
    st.BindInt(2, ++last_seq);
    st.BindText(3, e.type);
    st.BindInt(4, e.schema_version);
    st.BindTime(5, now);
    st.BindText(6, e.data);
    RUNLOOM_RETURN_IF_ERROR(st.Run());
  }
  return last_seq;
}

// ---- runs ----

absl::StatusOr<CreateRunResult> SqliteStore::CreateRun(const NewRun& run,
                                                       std::vector<Event> events) {
  RUNLOOM_RETURN_IF_ERROR(CheckNewRun(run));
  if (FindTransition(std::nullopt, RunStatus::kQueued, Party::kAdmission) == nullptr) {
    return absl::InternalError("the transition table does not allow admission to create runs");
  }
  RUNLOOM_ASSIGN_OR_RETURN(std::string inputs,
                           DumpJson(run.inputs, absl::StrCat("inputs of run ", run.id)));
  RUNLOOM_ASSIGN_OR_RETURN(std::string context,
                           DumpJson(run.context.is_null() ? nlohmann::json::object() : run.context,
                                    absl::StrCat("context of run ", run.id)));
  RUNLOOM_ASSIGN_OR_RETURN(std::vector<EncodedEvent> encoded, EncodeEvents(run.id, events));
  // The record returned, built outside the write transaction.
  RunRecord created;
  created.id = run.id;
  created.workflow_name = run.workflow_name;
  created.workflow_version = run.workflow_version;
  created.workflow_digest = run.workflow_digest;
  created.status = RunStatus::kQueued;
  created.inputs = run.inputs;
  created.inputs_digest = run.inputs_digest;
  created.idempotency_key = run.idempotency_key;
  created.phase = run.phase;
  created.max_attempts = run.max_attempts;
  created.parent_run_id = run.parent_run_id;
  created.concurrency_key = run.concurrency_key;
  created.concurrency_limit = run.concurrency_key.empty() ? 0 : run.concurrency_limit;
  created.priority = run.priority;
  created.context = run.context.is_null() ? nlohmann::json::object() : run.context;
  created.last_event_seq = static_cast<int64_t>(events.size());
  CreateRunResult out;
  bool inserted = false;
  absl::Time inserted_at;
  RUNLOOM_RETURN_IF_ERROR(h_->Write([&](WriteTxn& txn) -> absl::Status {
    inserted = false;
    if (!run.idempotency_key.empty()) {
      RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kRunByKey));
      st.BindText(1, run.workflow_name);
      st.BindText(2, run.idempotency_key);
      RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
      if (row) {
        RUNLOOM_ASSIGN_OR_RETURN(out.run, RunFromRow(st));
        out.created = false;
        return absl::OkStatus();
      }
    }
    const absl::Time now = h_->Now();
    {
      RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kInsertRun));
      st.BindText(1, run.id);
      st.BindText(2, run.workflow_name);
      st.BindInt(3, run.workflow_version);
      st.BindText(4, run.workflow_digest);
      st.BindText(5, inputs);
      st.BindText(6, run.inputs_digest);
      st.BindText(7, run.idempotency_key);
      st.BindText(8, run.phase);
      st.BindInt(9, run.max_attempts);
      st.BindInt(10, static_cast<int64_t>(events.size()));
      st.BindTime(11, now);
      st.BindText(12, context);
      st.BindText(13, run.parent_run_id);
      st.BindText(14, run.concurrency_key);
      st.BindInt(15, run.concurrency_key.empty() ? 0 : run.concurrency_limit);
      st.BindInt(16, run.priority);
      absl::Status s = st.Run();
      if (s.code() == absl::StatusCode::kAlreadyExists) {
        return absl::AlreadyExistsError(absl::StrCat("run ", run.id, " already exists"));
      }
      RUNLOOM_RETURN_IF_ERROR(s);
    }
    RUNLOOM_RETURN_IF_ERROR(AppendEvents(txn.db, run.id, 0, encoded, now).status());
    // A new run has no message yet: insert one without looking.
    RUNLOOM_RETURN_IF_ERROR(InsertQueueMessage(txn.db, run.id, now));
    txn.produced_message = true;
    inserted = true;
    inserted_at = now;
    return absl::OkStatus();
  }));
  if (inserted) {
    out.run = std::move(created);
    out.run.created_at = inserted_at;
    out.run.updated_at = inserted_at;
    out.created = true;
  }
  return out;
}

absl::StatusOr<RunRecord> SqliteStore::GetRun(const std::string& run_id) {
  return h_->Read([&](Db& db) { return LoadRun(db, run_id); });
}

absl::StatusOr<std::vector<RunRecord>> SqliteStore::ListRuns(const RunFilter& filter) {
  RUNLOOM_RETURN_IF_ERROR(CheckRunFilter(filter));
  return h_->Read([&](Db& db) -> absl::StatusOr<std::vector<RunRecord>> {
    if (!filter.idempotency_key.empty()) {
      RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kRunByKey));
      st.BindText(1, filter.workflow_name);
      st.BindText(2, filter.idempotency_key);
      RUNLOOM_ASSIGN_OR_RETURN(std::vector<RunRecord> runs,
                               CollectRows<RunRecord>(st, RunFromRow<Statement>));
      std::erase_if(runs, [&](const RunRecord& r) { return !PassesKeyedFilter(filter, r); });
      return runs;
    }
    const char* sql = filter.after.has_value()           ? kListRunsAfter
                      : filter.updated_since.has_value() ? kListRunsUpdatedSince
                                                         : kListRuns;
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(sql));
    if (filter.status.has_value()) {
      st.BindText(1, ToString(*filter.status));
    } else {
      st.BindNull(1);
    }
    st.BindText(2, filter.workflow_name);
    st.BindInt(3, SqlLimit(filter.limit));
    if (filter.after.has_value()) {
      st.BindTime(4, filter.after->created_at);
      st.BindText(5, filter.after->id);
    }
    if (filter.updated_since.has_value()) st.BindTime(4, *filter.updated_since);
    st.BindText(6, filter.parent_run_id);
    st.BindText(7, filter.tenant);
    st.BindText(8, filter.input_value);
    if (filter.created_since.has_value()) {
      st.BindTime(9, *filter.created_since);
    } else {
      st.BindInt(9, std::numeric_limits<int64_t>::min());
    }
    return CollectRows<RunRecord>(st, RunFromRow<Statement>);
  });
}


// ---- reads ----

absl::StatusOr<std::vector<StepRecord>> SqliteStore::ListSteps(const std::string& run_id,
                                                               std::optional<int64_t> revision) {
  return h_->Read([&](Db& db) -> absl::StatusOr<std::vector<StepRecord>> {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st,
                             db.Prepare(revision.has_value() ? kListStepsOfRevision : kListSteps));
    st.BindText(1, run_id);
    if (revision.has_value()) st.BindInt(2, *revision);
    return CollectRows<StepRecord>(st, StepFromRow<Statement>);
  });
}

absl::StatusOr<std::vector<Event>> SqliteStore::ListEvents(const std::string& run_id,
                                                           int64_t after_seq, int limit) {
  return h_->Read([&](Db& db) -> absl::StatusOr<std::vector<Event>> {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kListEvents));
    st.BindText(1, run_id);
    st.BindInt(2, after_seq);
    st.BindInt(3, SqlLimit(limit));
    return CollectRows<Event>(st, EventFromRow<Statement>);
  });
}

// ---- recovery ----

absl::StatusOr<std::vector<LiveLease>> SqliteStore::ListLiveLeases(int limit) {
  const absl::Time now = h_->Now();
  return h_->Read([&](Db& db) -> absl::StatusOr<std::vector<LiveLease>> {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kLiveLeases));
    st.BindTime(1, now);
    st.BindInt(2, SqlLimit(limit));
    return CollectRows<LiveLease>(st, [](const Statement& row) -> absl::StatusOr<LiveLease> {
      return LiveLease{.run_id = row.ColumnText(0),
                       .owner = row.ColumnText(1),
                       .token = row.ColumnText(2),
                       .expires_at = row.ColumnTime(3)};
    });
  });
}

absl::Status SqliteStore::ExpireLease(const std::string& run_id, const std::string& token) {
  if (token.empty()) return absl::InvalidArgumentError("ExpireLease: the lease token is empty");
  return h_->Write([&](WriteTxn& txn) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kExpireLease));
    st.BindText(1, run_id);
    st.BindText(2, token);
    st.BindTime(3, h_->Now());
    RUNLOOM_RETURN_IF_ERROR(st.Run());
    if (txn.db.changes() == 0) {
      return absl::AbortedError(absl::StrCat("run ", run_id,
                                             " is not running under that lease any more"));
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<RecoveryCandidate>> SqliteStore::FindRecoverable(
    absl::Duration queued_grace, int limit) {
  if (queued_grace < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("queued_grace is negative (", absl::FormatDuration(queued_grace), ")"));
  }
  const absl::Time now = h_->Now();
  auto from_row = [](const Statement& st) -> absl::StatusOr<RecoveryCandidate> {
    RecoveryCandidate c;
    c.run_id = st.ColumnText(0);
    std::string status = st.ColumnText(1);
    std::optional<RunStatus> parsed = ParseRunStatus(status);
    if (!parsed.has_value()) {
      return absl::DataLossError(
          absl::StrCat("run ", c.run_id, " has unknown status '", status, "' in the database"));
    }
    c.status = *parsed;
    c.attempts = static_cast<int>(st.ColumnInt(2));
    c.max_attempts = static_cast<int>(st.ColumnInt(3));
    c.lease_token = st.ColumnText(4);
    return c;
  };
  return h_->Read([&](Db& db) -> absl::StatusOr<std::vector<RecoveryCandidate>> {
    std::vector<RecoveryCandidate> out;
    {
      RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kExpiredLeases));
      st.BindTime(1, now);
      st.BindInt(2, SqlLimit(limit));
      RUNLOOM_ASSIGN_OR_RETURN(out, CollectRows<RecoveryCandidate>(st, from_row));
    }
    if (limit > 0 && static_cast<int>(out.size()) >= limit) return out;
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kStrandedQueued));
    st.BindTime(1, now - queued_grace);
    st.BindInt(2, limit > 0 ? limit - static_cast<int64_t>(out.size()) : -1);
    RUNLOOM_ASSIGN_OR_RETURN(std::vector<RecoveryCandidate> queued,
                             CollectRows<RecoveryCandidate>(st, from_row));
    for (RecoveryCandidate& c : queued) out.push_back(std::move(c));
    return out;
  });
}

absl::StatusOr<std::vector<std::string>> SqliteStore::FindDueTimers(int limit) {
  const absl::Time now = RUNLOOM_INJECTED_BUG(InjectedBug::kTimerDueEarly)
                             ? absl::FromUnixSeconds(int64_t{1} << 40)
                             : h_->Now();
  return h_->Read([&](Db& db) -> absl::StatusOr<std::vector<std::string>> {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kDueTimers));
    st.BindTime(1, now);
    st.BindInt(2, std::max(1, limit));
    std::vector<std::string> out;
    while (true) {
      RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) return out;
      out.push_back(st.ColumnText(0));
    }
  });
}

absl::StatusOr<std::vector<std::string>> SqliteStore::FindCancelRequested(
    const std::vector<std::string>& run_ids) {
  if (run_ids.empty()) return std::vector<std::string>{};
  // One primary-key lookup per id, in one read transaction: an executor
  // holds at most its executor count of runs.
  return h_->Read([&](Db& db) -> absl::StatusOr<std::vector<std::string>> {
    std::vector<std::string> out;
    for (const std::string& id : run_ids) {
      RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kCancelRequested));
      st.BindText(1, id);
      RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
      if (row) out.push_back(id);
    }
    return out;
  });
}

}  // namespace runloom::store_internal
