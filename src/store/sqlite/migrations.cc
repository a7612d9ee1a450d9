#include "store/sqlite/migrations.h"

#include "core/log.h"
#include "core/status_macros.h"

#include "absl/strings/str_cat.h"

#include <array>
#include <utility>

namespace runloom::store_internal {
namespace {

struct Migration {
  int64_t version;
  const char* sql;
};

// Version 1: the initial schema. Never edit a released migration; add one.
constexpr char kV1[] = R"sql(
CREATE TABLE workflows (
  name TEXT NOT NULL,
  version INTEGER NOT NULL,
  digest TEXT NOT NULL,
  canonical TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (name, version),
  UNIQUE (name, digest)
);

CREATE TABLE runs (
  id TEXT PRIMARY KEY NOT NULL,
  workflow_name TEXT NOT NULL,
  workflow_version INTEGER NOT NULL,
  workflow_digest TEXT NOT NULL,
  status TEXT NOT NULL,
  inputs TEXT NOT NULL,
  inputs_digest TEXT NOT NULL,
  idempotency_key TEXT NOT NULL DEFAULT '',
  phase TEXT NOT NULL DEFAULT '',
  revision INTEGER NOT NULL DEFAULT 1,
  entry TEXT NOT NULL DEFAULT 'fresh',
  context TEXT NOT NULL DEFAULT '{}',
  lease_owner TEXT NOT NULL DEFAULT '',
  lease_token TEXT NOT NULL DEFAULT '',
  lease_expires_at INTEGER,
  attempts INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  outcome TEXT NOT NULL DEFAULT '',
  error TEXT NOT NULL DEFAULT '',
  last_event_seq INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  finished_at INTEGER
);
CREATE UNIQUE INDEX runs_idempotency ON runs (workflow_name, idempotency_key)
  WHERE idempotency_key <> '';
CREATE INDEX runs_status_lease ON runs (status, lease_expires_at);
CREATE INDEX runs_created ON runs (created_at);

CREATE TABLE step_records (
  run_id TEXT NOT NULL REFERENCES runs (id),
  revision INTEGER NOT NULL,
  path TEXT NOT NULL,
  step_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  phase TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  state TEXT NOT NULL,
  output TEXT NOT NULL,
  error TEXT NOT NULL,
  error_class TEXT NOT NULL,
  stderr_tail TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  finished_at INTEGER NOT NULL,
  PRIMARY KEY (run_id, revision, path)
) WITHOUT ROWID;

CREATE TABLE run_events (
  run_id TEXT NOT NULL REFERENCES runs (id),
  seq INTEGER NOT NULL,
  type TEXT NOT NULL,
  schema_version INTEGER NOT NULL,
  at INTEGER NOT NULL,
  data TEXT NOT NULL,
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE TABLE queue (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT NOT NULL UNIQUE REFERENCES runs (id),
  enqueued_at INTEGER NOT NULL,
  visible_at INTEGER NOT NULL,
  deliveries INTEGER NOT NULL DEFAULT 0,
  claimed_by TEXT NOT NULL DEFAULT ''
);
CREATE INDEX queue_visible ON queue (visible_at);

CREATE TABLE dead_letters (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  message_id INTEGER NOT NULL,
  run_id TEXT NOT NULL,
  deliveries INTEGER NOT NULL,
  reason TEXT NOT NULL,
  at INTEGER NOT NULL
);
CREATE INDEX dead_letters_run ON dead_letters (run_id);

CREATE TABLE write_operations (
  run_id TEXT NOT NULL REFERENCES runs (id),
  step_path TEXT NOT NULL,
  action_key TEXT NOT NULL,
  status TEXT NOT NULL,
  request_digest TEXT NOT NULL,
  response TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (run_id, step_path, action_key)
) WITHOUT ROWID;
)sql";

// Version 2: dead letters can be redriven (redriven_at set: no longer
// listed, and the run no longer counts as dead-lettered).
constexpr char kV2[] = R"sql(
ALTER TABLE dead_letters ADD COLUMN redriven_at INTEGER;
CREATE INDEX dead_letters_live ON dead_letters (id) WHERE redriven_at IS NULL;
)sql";

// Version 3: ListRuns pages by (created_at, id) (RunFilter::after); an
// index on both serves its order and its keyset range without a sort. It
// replaces runs_created, a prefix of it.
constexpr char kV3[] = R"sql(
CREATE INDEX runs_created_id ON runs (created_at, id);
DROP INDEX runs_created;
)sql";

// Version 4: API tokens (docs/formats/sqlite-schema.md, "tokens"). Only
// the SHA-256 of a token is kept; a name is unique among active tokens
// only, so a revoked token's name can be given to a new one.
constexpr char kV4[] = R"sql(
CREATE TABLE tokens (
  id TEXT PRIMARY KEY NOT NULL,
  name TEXT NOT NULL,
  role TEXT NOT NULL,
  hash TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
);
CREATE UNIQUE INDEX tokens_active_name ON tokens (name) WHERE revoked_at IS NULL;
)sql";

// Version 5: the write-operations ledger (docs/formats/sqlite-schema.md,
// "write_operations"): one row per external write, keyed by run, step path
// and action; the intent before the request is sent, the result after.
// Version 1 reserved a table of this name that no code ever wrote; it is
// replaced by the ledger's own shape.
constexpr char kV5[] = R"sql(
DROP TABLE write_operations;
CREATE TABLE write_operations (
  run_id TEXT NOT NULL REFERENCES runs (id),
  step_path TEXT NOT NULL,
  action TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('intent', 'done')),
  idempotency_key TEXT NOT NULL,
  request_digest TEXT NOT NULL,
  begins INTEGER NOT NULL DEFAULT 0,
  http_status INTEGER,
  response TEXT,
  source TEXT,
  created_at INTEGER NOT NULL,
  finished_at INTEGER,
  PRIMARY KEY (run_id, step_path, action)
);
)sql";

// Version 6: the budget ledger (docs/formats/sqlite-schema.md,
// "budget_tenants", "budget_runs", "budget_reservations"): limits, spent
// and reserved micro-units per tenant and per run, and one reservation per
// model-call attempt.
constexpr char kV6[] = R"sql(
CREATE TABLE budget_tenants (
  tenant TEXT PRIMARY KEY NOT NULL,
  limit_micros INTEGER,
  spent_micros INTEGER NOT NULL DEFAULT 0,
  reserved_micros INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE budget_runs (
  run_id TEXT PRIMARY KEY NOT NULL REFERENCES runs (id),
  tenant TEXT NOT NULL,
  limit_micros INTEGER,
  spent_micros INTEGER NOT NULL DEFAULT 0,
  reserved_micros INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE budget_reservations (
  run_id TEXT NOT NULL REFERENCES runs (id),
  step_path TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  lease_token TEXT NOT NULL,
  tenant TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('reserved', 'settled', 'released')),
  amount_micros INTEGER NOT NULL,
  cost_micros INTEGER,
  created_at INTEGER NOT NULL,
  finished_at INTEGER,
  PRIMARY KEY (run_id, step_path, attempt, lease_token)
);
)sql";

// Version 7: a write's key names the decision it carries out (issue 22.1,
// reference 003: "keyed by run, proposal and action";
// docs/formats/sqlite-schema.md "write_operations"). The primary key
// changes, so the table is rebuilt; every row written before has no
// decision ('').
constexpr char kV7[] = R"sql(
CREATE TABLE write_operations_v7 (
  run_id TEXT NOT NULL REFERENCES runs (id),
  step_path TEXT NOT NULL,
  action TEXT NOT NULL,
  decision TEXT NOT NULL DEFAULT '',
  state TEXT NOT NULL CHECK (state IN ('intent', 'done')),
  idempotency_key TEXT NOT NULL,
  request_digest TEXT NOT NULL,
  begins INTEGER NOT NULL DEFAULT 0,
  http_status INTEGER,
  response TEXT,
  source TEXT,
  created_at INTEGER NOT NULL,
  finished_at INTEGER,
  PRIMARY KEY (run_id, step_path, action, decision)
);
INSERT INTO write_operations_v7 (run_id, step_path, action, decision, state, idempotency_key,
  request_digest, begins, http_status, response, source, created_at, finished_at)
  SELECT run_id, step_path, action, '', state, idempotency_key, request_digest, begins,
  http_status, response, source, created_at, finished_at FROM write_operations;
DROP TABLE write_operations;
ALTER TABLE write_operations_v7 RENAME TO write_operations;
)sql";

// Version 8: timers (issue 23). A waiting run's wake time, and an index
// of the waiting runs by it (the timer sweep's FindDueTimers).
constexpr char kV8[] = R"sql(
ALTER TABLE runs ADD COLUMN wake_at INTEGER;
CREATE INDEX runs_waiting ON runs (wake_at) WHERE status = 'waiting';
)sql";

// Version 9: signals (issue 23). Each run's mailbox, and what a waiting run
// waits for: the signal's name and the key a signal consumed by that wait is
// marked with (SignalStore, RunWrite::wait_for_signal).
constexpr char kV9[] = R"sql(
ALTER TABLE runs ADD COLUMN wait_signal TEXT;
ALTER TABLE runs ADD COLUMN wait_key TEXT;
CREATE TABLE signals (
  run_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  name TEXT NOT NULL,
  payload TEXT NOT NULL,
  idempotency_key TEXT NOT NULL DEFAULT '',
  received_at INTEGER NOT NULL,
  consumed_by TEXT,
  consumed_at INTEGER,
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX signals_idempotency ON signals (run_id, idempotency_key)
  WHERE idempotency_key != '';
CREATE INDEX signals_mailbox ON signals (run_id, name, seq) WHERE consumed_by IS NULL;
CREATE UNIQUE INDEX signals_consumed ON signals (run_id, consumed_by) WHERE consumed_by IS NOT NULL;
)sql";

// Version 10: schedules (issue 23, ScheduleStore): each one's definition
// and the tick it fires next, and an index of the active ones by that tick
// (FindDueSchedules).
constexpr char kV10[] = R"sql(
CREATE TABLE schedules (
  id TEXT PRIMARY KEY,
  workflow_name TEXT NOT NULL,
  cron TEXT NOT NULL,
  timezone TEXT NOT NULL,
  inputs TEXT NOT NULL,
  overlap TEXT NOT NULL CHECK (overlap IN ('skip', 'allow', 'cancel')),
  catch_up TEXT NOT NULL CHECK (catch_up IN ('none', 'latest', 'all')),
  paused INTEGER NOT NULL DEFAULT 0,
  next_fire_at INTEGER NOT NULL,
  last_run_id TEXT NOT NULL DEFAULT '',
  last_fired_at INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE paused = 0;
)sql";

// Version 11: child runs (issue 23). The run that started a run with a
// `kind: run` step ("" = none), and an index of the children by parent
// (the parent's cancel, RunFilter::parent_run_id, ListOrphanedChildren).
constexpr char kV11[] = R"sql(
ALTER TABLE runs ADD COLUMN parent_run_id TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_parent ON runs (parent_run_id) WHERE parent_run_id != '';
)sql";

// Version 12: concurrency keys and priority (issue 23), fixed on each run
// at admission. runs_keyed counts a key's running runs (the lease's limit
// check, the claim's room per key); runs_prioritized and runs_keyed tell a
// claim whether any queued run needs the fair order at all.
constexpr char kV12[] = R"sql(
ALTER TABLE runs ADD COLUMN concurrency_key TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN concurrency_limit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_keyed ON runs (status, concurrency_key) WHERE concurrency_key <> '';
CREATE INDEX runs_prioritized ON runs (status) WHERE priority <> 0;
)sql";

// Version 13: each key's head found by index probes (issue 23, "fairness
// in time"). A queue row carries its fair group (its run's concurrency key
// while the run is queued, else '') and its run's priority, kept in step
// by the insert (sqlite_queue.cc, kInsertMessage) and by two triggers: a
// keyed run moving into or out of queued, and a run deleted (its rows join
// the keyless group with priority 0). queue_fair walks a group in claim
// order; runs_keyed_limit (runs_keyed with the limit) gives the largest
// limit of a key's queued runs, which bounds how far a claim walks it.
constexpr char kV13[] = R"sql(
ALTER TABLE queue ADD COLUMN fair_key TEXT NOT NULL DEFAULT '';
ALTER TABLE queue ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
UPDATE queue SET
  fair_key = COALESCE((SELECT CASE WHEN r.status = 'queued' THEN r.concurrency_key ELSE '' END
                       FROM runs r WHERE r.id = queue.run_id), ''),
  priority = COALESCE((SELECT r.priority FROM runs r WHERE r.id = queue.run_id), 0);
CREATE INDEX queue_fair ON queue (fair_key, priority DESC, id);
CREATE INDEX runs_keyed_limit ON runs (status, concurrency_key, concurrency_limit)
  WHERE concurrency_key <> '';
DROP INDEX runs_keyed;
CREATE TRIGGER runs_fair_group AFTER UPDATE OF status ON runs
  WHEN NEW.concurrency_key <> '' AND OLD.status IS NOT NEW.status
    AND (OLD.status = 'queued' OR NEW.status = 'queued')
BEGIN
  UPDATE queue SET fair_key = CASE WHEN NEW.status = 'queued' THEN NEW.concurrency_key ELSE '' END
    WHERE run_id = NEW.id;
END;
CREATE TRIGGER runs_fair_gone AFTER DELETE ON runs
BEGIN
  UPDATE queue SET fair_key = '', priority = 0 WHERE run_id = OLD.id;
END;
)sql";

// Version 14: streaming (issue 24). The text so far of each model call
// streaming now, mirrored by the process executing it for the processes
// that do not (store.h, LiveTextStore); a row is replaced as its call
// grows and deleted when it ends.
constexpr char kV14[] = R"sql(
CREATE TABLE live_text (
  run_id TEXT NOT NULL,
  path TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  writer TEXT NOT NULL,
  text TEXT NOT NULL,
  ended INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (run_id, path)
);
)sql";

// Version 15: retention (issue 25). The finished runs by finish time, so
// that a retention batch (RetentionStore::PruneRuns) reads the oldest
// finished runs off an index instead of every terminal run; partial: a run
// enters it when it finishes (finished_at is set only then), so admission
// and the executor's writes before the end cost it nothing.
constexpr char kV15[] = R"sql(
CREATE INDEX IF NOT EXISTS runs_finished ON runs (finished_at) WHERE finished_at IS NOT NULL;
)sql";

constexpr std::array kMigrations = {
    Migration{1, kV1},   Migration{2, kV2},   Migration{3, kV3},   Migration{4, kV4},
    Migration{5, kV5},   Migration{6, kV6},   Migration{7, kV7},   Migration{8, kV8},
    Migration{9, kV9},   Migration{10, kV10}, Migration{11, kV11}, Migration{12, kV12},
    Migration{13, kV13}, Migration{14, kV14}, Migration{15, kV15},
};

absl::Status MigrateLocked(Db& db) {
  RUNLOOM_RETURN_IF_ERROR(CheckDatabaseIsOurs(db));
  RUNLOOM_ASSIGN_OR_RETURN(int64_t app_id, db.QueryInt("PRAGMA application_id"));
  RUNLOOM_ASSIGN_OR_RETURN(int64_t version, db.QueryInt("PRAGMA user_version"));
  const int64_t latest = LatestSchemaVersion();
  for (const Migration& m : kMigrations) {
    if (m.version <= version) continue;
    RUNLOOM_RETURN_IF_ERROR(
        Annotate(db.Exec(m.sql), absl::StrCat("migration to schema version ", m.version)));
  }
  if (version != latest) {
    RUNLOOM_RETURN_IF_ERROR(db.Exec(absl::StrCat("PRAGMA user_version = ", latest)));
  }
  if (app_id == 0) {
    RUNLOOM_RETURN_IF_ERROR(db.Exec(absl::StrCat("PRAGMA application_id = ", kApplicationId)));
  }
  return absl::OkStatus();
}

// Rolls back after `after` failed; a failed ROLLBACK is logged, not
// returned (`after` is the error the caller reports).
void RollbackLogged(Db& db, const absl::Status& after) {
  absl::Status rb = db.Exec("ROLLBACK");
  if (!rb.ok()) {
    Log(DefaultLogger(), LogLevel::kWarning, "database ", db.path(),
        ": ROLLBACK of schema migrations failed after ", after.ToString(), ": ", rb.ToString());
  }
}

}  // namespace

int64_t LatestSchemaVersion() { return kMigrations.back().version; }

absl::Status CheckDatabaseIsOurs(Db& db) {
  // One statement, so one snapshot: read separately, a concurrent opener's
  // first migration could commit between the reads and its tables would be
  // seen without its application_id (a fresh file taken for a foreign one).
  absl::StatusOr<Statement> st = db.Prepare(
      "SELECT (SELECT application_id FROM pragma_application_id),"
      " (SELECT count(*) FROM sqlite_master WHERE substr(name, 1, 7) <> 'sqlite_'),"
      " (SELECT user_version FROM pragma_user_version)");
  absl::StatusOr<bool> row = st.ok() ? st->Step() : absl::StatusOr<bool>(st.status());
  if (!row.ok() && row.status().code() == absl::StatusCode::kFailedPrecondition) {
    return absl::FailedPreconditionError(
        absl::StrCat("database ", db.path(), " is not an SQLite database (", row.status().message(),
                     "); pass a runloom database or the path of a new file"));
  }
  RUNLOOM_RETURN_IF_ERROR(row.status());
  if (!*row) return absl::InternalError("reading the database header returned no row");
  const int64_t app_id = st->ColumnInt(0);
  const int64_t tables = st->ColumnInt(1);
  const int64_t version = st->ColumnInt(2);
  if (app_id != 0 && app_id != kApplicationId) {
    return absl::FailedPreconditionError(
        absl::StrCat("database ", db.path(), " belongs to another application (application_id ",
                     app_id, "); point runloom at a new file"));
  }
  if (app_id == 0) {
    // No runloom mark: only an empty database is ours to initialize. A file
    // with tables of its own belongs to someone else, whatever its id.
    if (tables > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "database ", db.path(),
          " is an SQLite database of another application (it has tables of its own and no "
          "runloom application_id); point runloom at a new file"));
    }
  }
  const int64_t latest = LatestSchemaVersion();
  if (version > latest) {
    return absl::FailedPreconditionError(
        absl::StrCat("database ", db.path(), " has schema version ", version,
                     " but this runloom supports up to ", latest, "; upgrade runloom"));
  }
  if (version < 0) {
    return absl::DataLossError(
        absl::StrCat("database ", db.path(), " has a negative schema version ", version));
  }
  return absl::OkStatus();
}

absl::Status ApplyMigrations(Db& db) {
  RUNLOOM_RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE"));
  absl::Status s = MigrateLocked(db);
  if (!s.ok()) {
    RollbackLogged(db, s);  // the failure above is the one to report
    return s;
  }
  absl::Status commit = db.Exec("COMMIT");
  if (!commit.ok()) {
    RollbackLogged(db, commit);
    return Annotate(commit, "committing schema migrations");
  }
  return absl::OkStatus();
}

}  // namespace runloom::store_internal
