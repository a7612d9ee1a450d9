#include "store/postgres/pg_migrations.h"

#include "core/status_macros.h"

#include "absl/strings/str_cat.h"

#include <array>

namespace runloom::store_internal {
namespace {

struct Migration {
  int64_t version;
  const char* sql;
};

// Version 1. The tables are SQLite's (docs/formats/sqlite-schema.md) with
// PostgreSQL types: times are Unix microseconds (BIGINT), JSON is TEXT, so
// both stores share their row readers. Never edit a released migration; add one.
constexpr char kV1[] = R"sql(
CREATE TABLE clock (offset_us BIGINT NOT NULL);
INSERT INTO clock VALUES (0);
-- The time authority: the server's clock (plus an offset tests move; 0 otherwise).
CREATE FUNCTION runloom_now() RETURNS BIGINT LANGUAGE sql STABLE AS
  $$ SELECT (extract(epoch FROM now()) * 1000000)::bigint + offset_us FROM runloom.clock $$;

CREATE TABLE workflows (
  name TEXT NOT NULL,
  version BIGINT NOT NULL,
  digest TEXT NOT NULL,
  canonical TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  PRIMARY KEY (name, version),
  UNIQUE (name, digest)
);

CREATE TABLE runs (
  id TEXT PRIMARY KEY,
  workflow_name TEXT NOT NULL,
  workflow_version BIGINT NOT NULL,
  workflow_digest TEXT NOT NULL,
  status TEXT NOT NULL,
  inputs TEXT NOT NULL,
  inputs_digest TEXT NOT NULL,
  idempotency_key TEXT NOT NULL DEFAULT '',
  phase TEXT NOT NULL DEFAULT '',
  revision BIGINT NOT NULL DEFAULT 1,
  entry TEXT NOT NULL DEFAULT 'fresh',
  context TEXT NOT NULL DEFAULT '{}',
  lease_owner TEXT NOT NULL DEFAULT '',
  lease_token TEXT NOT NULL DEFAULT '',
  lease_expires_at BIGINT,
  attempts INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  outcome TEXT NOT NULL DEFAULT '',
  error TEXT NOT NULL DEFAULT '',
  last_event_seq BIGINT NOT NULL DEFAULT 0,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  finished_at BIGINT
);
CREATE UNIQUE INDEX runs_idempotency ON runs (workflow_name, idempotency_key)
  WHERE idempotency_key <> '';
CREATE INDEX runs_status_lease ON runs (status, lease_expires_at);
CREATE INDEX runs_status_updated ON runs (status, updated_at);
CREATE INDEX runs_created_id ON runs (created_at, id);

CREATE TABLE step_records (
  run_id TEXT NOT NULL REFERENCES runs (id),
  revision BIGINT NOT NULL,
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
  started_at BIGINT NOT NULL,
  finished_at BIGINT NOT NULL,
  PRIMARY KEY (run_id, revision, path)
);

CREATE TABLE run_events (
  run_id TEXT NOT NULL REFERENCES runs (id),
  seq BIGINT NOT NULL,
  type TEXT NOT NULL,
  schema_version INTEGER NOT NULL,
  at BIGINT NOT NULL,
  data TEXT NOT NULL,
  PRIMARY KEY (run_id, seq)
);

CREATE TABLE queue (
  id BIGSERIAL PRIMARY KEY,
  run_id TEXT NOT NULL UNIQUE REFERENCES runs (id),
  enqueued_at BIGINT NOT NULL,
  visible_at BIGINT NOT NULL,
  deliveries INTEGER NOT NULL DEFAULT 0,
  claimed_by TEXT NOT NULL DEFAULT ''
);
CREATE INDEX queue_visible ON queue (visible_at, id);

CREATE TABLE dead_letters (
  id BIGSERIAL PRIMARY KEY,
  message_id BIGINT NOT NULL,
  run_id TEXT NOT NULL,
  deliveries INTEGER NOT NULL,
  reason TEXT NOT NULL,
  at BIGINT NOT NULL,
  redriven_at BIGINT
);
CREATE INDEX dead_letters_run ON dead_letters (run_id);
CREATE INDEX dead_letters_live ON dead_letters (id) WHERE redriven_at IS NULL;

CREATE TABLE write_operations (
  run_id TEXT NOT NULL REFERENCES runs (id),
  step_path TEXT NOT NULL,
  action_key TEXT NOT NULL,
  status TEXT NOT NULL,
  request_digest TEXT NOT NULL,
  response TEXT,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (run_id, step_path, action_key)
);

-- Live changes: every committed change to a run's status or events is
-- announced (NOTIFY is delivered at commit, never for a rollback).
CREATE FUNCTION notify_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('runloom_runs', NEW.id || '|' || NEW.status || '|' || NEW.last_event_seq);
  RETURN NULL;
END $$;
CREATE TRIGGER runs_inserted AFTER INSERT ON runs
  FOR EACH ROW EXECUTE FUNCTION notify_run();
CREATE TRIGGER runs_changed AFTER UPDATE ON runs FOR EACH ROW
  WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.last_event_seq <> NEW.last_event_seq)
  EXECUTE FUNCTION notify_run();
-- Queue wake-ups: a new message, or one given back (Release).
CREATE FUNCTION notify_queue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('runloom_queue', '');
  RETURN NULL;
END $$;
CREATE TRIGGER queue_inserted AFTER INSERT ON queue
  FOR EACH STATEMENT EXECUTE FUNCTION notify_queue();
CREATE TRIGGER queue_released AFTER UPDATE ON queue FOR EACH ROW
  WHEN (NEW.claimed_by = '') EXECUTE FUNCTION notify_queue();
)sql";

// Version 2. runloom_now() in PL/pgSQL: a SQL function that reads a table
// is not inlined, so version 1's was parsed and planned again in every
// statement that called it (a tenth of the server's CPU under `runloom
// bench`); PL/pgSQL keeps its plan for the session.
constexpr char kV2[] = R"sql(
CREATE OR REPLACE FUNCTION runloom_now() RETURNS BIGINT LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (extract(epoch FROM now()) * 1000000)::bigint + (SELECT offset_us FROM runloom.clock);
END $$;
)sql";

// Version 3: the Redis Streams transport (docs/formats/redis-streams.md).
// With a Redis queue the queue table is the outbox a relay publishes from:
// `deliveries` counts publish attempts, `claimed_by` is 'relay' while one is
// in flight, and `last_error` says why the last attempt failed. A dead
// letter's message id is a stream entry id there ("1700000000000-0"), so
// the column becomes TEXT. `instance_id` names this database's keys in
// Redis, so databases sharing one Redis never meet.
constexpr char kV3[] = R"sql(
ALTER TABLE queue ADD COLUMN last_error TEXT NOT NULL DEFAULT '';
ALTER TABLE dead_letters ALTER COLUMN message_id TYPE TEXT USING message_id::text;
CREATE INDEX dead_letters_message ON dead_letters (message_id);
INSERT INTO meta VALUES ('instance_id', replace(gen_random_uuid()::text, '-', ''));
)sql";

// Version 4. Wake-ups leave the transaction. PostgreSQL serializes the
// commits of transactions that NOTIFY (a database-wide lock held through the
// WAL flush), so with every write notifying, no two commits shared an fsync.
// Inside a transaction that asked for it (runloom.defer_notify, set by the
// store's transactions) the triggers now queue their notifications in a
// session setting (undone by a rollback like any setting), and
// runloom_flush_notify(), sent in the same pipeline right after COMMIT,
// delivers them outside the transaction. A notification lost between the two
// (a crash) only delays: watchers and workers re-read on their own.
constexpr char kV4[] = R"sql(
CREATE FUNCTION runloom_announce(channel TEXT, payload TEXT) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('runloom.defer_notify', true) = 'on' THEN
    PERFORM set_config('runloom.pending_notify',
        coalesce(current_setting('runloom.pending_notify', true), '') ||
        channel || ' ' || payload || E'\n', false);
  ELSE
    PERFORM pg_notify(channel, payload);
  END IF;
END $$;

CREATE FUNCTION runloom_flush_notify() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  pending TEXT := current_setting('runloom.pending_notify', true);
  line TEXT;
BEGIN
  IF pending IS NULL OR pending = '' THEN RETURN; END IF;
  PERFORM set_config('runloom.pending_notify', '', false);
  FOR line IN SELECT DISTINCT l FROM regexp_split_to_table(pending, E'\n') AS l WHERE l <> ''
  LOOP
    PERFORM pg_notify(split_part(line, ' ', 1), substr(line, strpos(line, ' ') + 1));
  END LOOP;
EXCEPTION WHEN OTHERS THEN
  -- The transaction before it has committed; a failed wake-up only delays.
  RAISE WARNING 'runloom: wake-ups not sent: %', SQLERRM;
END $$;

CREATE OR REPLACE FUNCTION notify_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM runloom.runloom_announce('runloom_runs',
      NEW.id || '|' || NEW.status || '|' || NEW.last_event_seq);
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION notify_queue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM runloom.runloom_announce('runloom_queue', '');
  RETURN NULL;
END $$;
)sql";

// Version 5: API tokens, as SQLite's version 4 (docs/formats/sqlite-schema.md,
// "tokens"): only the SHA-256 of a token is kept; a name is unique among
// active tokens only.
constexpr char kV5[] = R"sql(
CREATE TABLE tokens (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  role TEXT NOT NULL,
  hash TEXT NOT NULL UNIQUE,
  created_at BIGINT NOT NULL,
  revoked_at BIGINT
);
CREATE UNIQUE INDEX tokens_active_name ON tokens (name) WHERE revoked_at IS NULL;
)sql";

// Version 6. Wake-ups per statement, and a cheap flush. The runs triggers
// were row-level: a PL/pgSQL call (and a session-setting rewrite) for every
// row a set-based statement of the commit group wrote. They are now
// statement-level with transition tables: one call per statement announces
// all its rows. Deferred wake-ups are kept per channel (runloom.pending_runs:
// the run changes, newline-separated; runloom.pending_queue: 'on'), so the
// flush parses nothing: one notification for the queue, and the run changes
// packed into as few notifications as fit. A runloom_runs payload is now one
// or more "id|status|last_event_seq" lines, each payload under 8000 bytes.
// Re-runnable (OR REPLACE, IF EXISTS): a database whose version was set
// back by hand, as a test does, migrates again.
constexpr char kV6[] = R"sql(
CREATE OR REPLACE FUNCTION runloom_pack(lines TEXT[]) RETURNS SETOF TEXT LANGUAGE sql IMMUTABLE AS $$
  SELECT string_agg(l, E'\n' ORDER BY n) FROM (
    SELECT l, n, (sum(octet_length(l) + 1) OVER (ORDER BY n) - octet_length(l) - 1) / 4000 AS k
    FROM unnest(lines) WITH ORDINALITY AS u(l, n)) s
  GROUP BY k ORDER BY k
$$;

-- Sends run changes (newline-separated lines) on runloom_runs.
CREATE OR REPLACE FUNCTION runloom_notify_runs(changes TEXT) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  payload TEXT;
BEGIN
  IF octet_length(changes) < 7900 THEN
    PERFORM pg_notify('runloom_runs', changes);
    RETURN;
  END IF;
  FOR payload IN SELECT runloom.runloom_pack(string_to_array(changes, E'\n')) LOOP
    PERFORM pg_notify('runloom_runs', payload);
  END LOOP;
END $$;

CREATE OR REPLACE FUNCTION runloom_announce(channel TEXT, payload TEXT) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('runloom.defer_notify', true) IS DISTINCT FROM 'on' THEN
    PERFORM pg_notify(channel, payload);
  ELSIF channel = 'runloom_queue' THEN
    PERFORM set_config('runloom.pending_queue', 'on', false);
  ELSE
    PERFORM set_config('runloom.pending_runs',
        concat_ws(E'\n', nullif(current_setting('runloom.pending_runs', true), ''), payload),
        false);
  END IF;
END $$;

-- `changes`: this statement's run changes, newline-separated ('' or NULL: none).
CREATE OR REPLACE FUNCTION runloom_announce_runs(changes TEXT) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF changes IS NULL OR changes = '' THEN RETURN; END IF;
  IF current_setting('runloom.defer_notify', true) IS DISTINCT FROM 'on' THEN
    PERFORM runloom.runloom_notify_runs(changes);
  ELSE
    PERFORM set_config('runloom.pending_runs',
        concat_ws(E'\n', nullif(current_setting('runloom.pending_runs', true), ''), changes),
        false);
  END IF;
END $$;

CREATE OR REPLACE FUNCTION runloom_flush_notify() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  runs TEXT := current_setting('runloom.pending_runs', true);
  queue TEXT := current_setting('runloom.pending_queue', true);
BEGIN
  IF runs IS NOT NULL AND runs <> '' THEN
    PERFORM set_config('runloom.pending_runs', '', false);
    PERFORM runloom.runloom_notify_runs(runs);
  END IF;
  IF queue = 'on' THEN
    PERFORM set_config('runloom.pending_queue', '', false);
    PERFORM pg_notify('runloom_queue', '');
  END IF;
EXCEPTION WHEN OTHERS THEN
  -- The transaction before it has committed; a failed wake-up only delays.
  RAISE WARNING 'runloom: wake-ups not sent: %', SQLERRM;
END $$;

CREATE OR REPLACE FUNCTION notify_runs_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM runloom.runloom_announce_runs((
      SELECT string_agg(n.id || '|' || n.status || '|' || n.last_event_seq, E'\n')
      FROM new_runs n));
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION notify_runs_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM runloom.runloom_announce_runs((
      SELECT string_agg(n.id || '|' || n.status || '|' || n.last_event_seq, E'\n')
      FROM new_runs n JOIN old_runs o ON o.id = n.id
      WHERE o.status IS DISTINCT FROM n.status OR o.last_event_seq <> n.last_event_seq));
  RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS runs_inserted ON runs;
DROP TRIGGER IF EXISTS runs_changed ON runs;
DROP FUNCTION IF EXISTS notify_run();
CREATE TRIGGER runs_inserted AFTER INSERT ON runs REFERENCING NEW TABLE AS new_runs
  FOR EACH STATEMENT EXECUTE FUNCTION notify_runs_inserted();
CREATE TRIGGER runs_changed AFTER UPDATE ON runs
  REFERENCING OLD TABLE AS old_runs NEW TABLE AS new_runs
  FOR EACH STATEMENT EXECUTE FUNCTION notify_runs_changed();
)sql";

// Version 7: the write-operations ledger, as SQLite's version 5
// (docs/formats/sqlite-schema.md, "write_operations"). Version 1 reserved a
// table of this name that no code ever wrote; it is replaced. Re-runnable
// (the drop comes first).
constexpr char kV7[] = R"sql(
DROP TABLE IF EXISTS write_operations;
CREATE TABLE write_operations (
  run_id TEXT NOT NULL REFERENCES runs (id),
  step_path TEXT NOT NULL,
  action TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('intent', 'done')),
  idempotency_key TEXT NOT NULL,
  request_digest TEXT NOT NULL,
  begins BIGINT NOT NULL DEFAULT 0,
  http_status INTEGER,
  response TEXT,
  source TEXT,
  created_at BIGINT NOT NULL,
  finished_at BIGINT,
  PRIMARY KEY (run_id, step_path, action)
);
)sql";

// Version 8: the budget ledger, as SQLite's version 6
// (docs/formats/sqlite-schema.md, "budget_tenants", "budget_runs",
// "budget_reservations"). Re-runnable (IF NOT EXISTS keeps what a rerun
// finds).
constexpr char kV8[] = R"sql(
CREATE TABLE IF NOT EXISTS budget_tenants (
  tenant TEXT PRIMARY KEY NOT NULL,
  limit_micros BIGINT,
  spent_micros BIGINT NOT NULL DEFAULT 0,
  reserved_micros BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS budget_runs (
  run_id TEXT PRIMARY KEY NOT NULL REFERENCES runs (id),
  tenant TEXT NOT NULL,
  limit_micros BIGINT,
  spent_micros BIGINT NOT NULL DEFAULT 0,
  reserved_micros BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS budget_reservations (
  run_id TEXT NOT NULL REFERENCES runs (id),
  step_path TEXT NOT NULL,
  attempt BIGINT NOT NULL,
  lease_token TEXT NOT NULL,
  tenant TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('reserved', 'settled', 'released')),
  amount_micros BIGINT NOT NULL,
  cost_micros BIGINT,
  created_at BIGINT NOT NULL,
  finished_at BIGINT,
  PRIMARY KEY (run_id, step_path, attempt, lease_token)
);
)sql";

// Version 9 (8 is the budgets'; this one depends on nothing of it): the
// runs row updates of the commit group can be HOT, and the append-only
// tables take no per-row foreign-key checks (docs/performance.md).
//
// - A HOT update (no new index entries, no index to visit) needs every
//   indexed column unchanged and room on the row's page. Version 1 indexed
//   (status, lease_expires_at) and (status, updated_at), and updated_at moves
//   on every write, so no write was HOT and each inserted into the 4 indexes.
//   Each query has a narrower index now: the sweep's expired leases
//   (kExpiredLeases) an index of lease_expires_at over running runs only; the
//   stranded queued runs (kStrandedQueued) an index of created_at over queued
//   runs only (created_at <= updated_at, so the query bounds both); listing
//   runs keeps runs_created_id. A write that keeps its run's status and lease
//   (a step finished, the next one started) changes no indexed column, and
//   fillfactor 85 leaves room on each page for it; a partial index takes an
//   entry only from a row that satisfies its predicate.
// - run_events, step_records and queue lose their foreign keys to runs: each
//   row inserted ran a trigger query on runs (13 per run of `runloom bench`).
//   The store keeps the invariant itself: every insert into them is in a
//   transaction that holds its run's row locked (PgLockFence, the commit
//   group's lock statement) or inserts the run in the same statement
//   (admission), and no code deletes a run. write_operations keeps its key.
// - queue_delivered serves the claim's dead-letter check (kExhausted), which
//   scanned the whole visible backlog for `deliveries >= cap`. Partial: a
//   message enters it when first claimed (the cap is at least 1), so an
//   admission's message costs it nothing.
// Re-runnable (IF EXISTS / IF NOT EXISTS).
constexpr char kV9[] = R"sql(
ALTER TABLE runs SET (fillfactor = 85);
DROP INDEX IF EXISTS runs_status_lease;
DROP INDEX IF EXISTS runs_status_updated;
CREATE INDEX IF NOT EXISTS runs_running_lease ON runs (lease_expires_at) WHERE status = 'running';
CREATE INDEX IF NOT EXISTS runs_queued_created ON runs (created_at) WHERE status = 'queued';
ALTER TABLE run_events DROP CONSTRAINT IF EXISTS run_events_run_id_fkey;
ALTER TABLE step_records DROP CONSTRAINT IF EXISTS step_records_run_id_fkey;
ALTER TABLE queue DROP CONSTRAINT IF EXISTS queue_run_id_fkey;
CREATE INDEX IF NOT EXISTS queue_delivered ON queue (deliveries) WHERE deliveries > 0;
)sql";

// Version 10: a write's key names the decision it carries out, as SQLite's
// version 7 (docs/formats/sqlite-schema.md "write_operations"); rows written
// before have none (''). Re-runnable (IF NOT EXISTS, IF EXISTS).
constexpr char kV10[] = R"sql(
ALTER TABLE write_operations ADD COLUMN IF NOT EXISTS decision TEXT NOT NULL DEFAULT '';
ALTER TABLE write_operations DROP CONSTRAINT IF EXISTS write_operations_pkey;
ALTER TABLE write_operations ADD CONSTRAINT write_operations_pkey
  PRIMARY KEY (run_id, step_path, action, decision);
)sql";

// Version 11: timers (issue 23), as SQLite's version 8: a waiting run's
// wake time and an index of the waiting runs by it. Re-runnable.
constexpr char kV11[] = R"sql(
ALTER TABLE runs ADD COLUMN IF NOT EXISTS wake_at BIGINT;
CREATE INDEX IF NOT EXISTS runs_waiting ON runs (wake_at) WHERE status = 'waiting';
)sql";

// Version 12: signals (issue 23), as SQLite's version 9: each run's mailbox
// and what a waiting run waits for. Re-runnable.
constexpr char kV12[] = R"sql(
ALTER TABLE runs ADD COLUMN IF NOT EXISTS wait_signal TEXT;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS wait_key TEXT;
CREATE TABLE IF NOT EXISTS signals (
  run_id TEXT NOT NULL,
  seq BIGINT NOT NULL,
  name TEXT NOT NULL,
  payload TEXT NOT NULL,
  idempotency_key TEXT NOT NULL DEFAULT '',
  received_at BIGINT NOT NULL,
  consumed_by TEXT,
  consumed_at BIGINT,
  PRIMARY KEY (run_id, seq)
);
CREATE UNIQUE INDEX IF NOT EXISTS signals_idempotency ON signals (run_id, idempotency_key)
  WHERE idempotency_key <> '';
CREATE INDEX IF NOT EXISTS signals_mailbox ON signals (run_id, name, seq)
  WHERE consumed_by IS NULL;
CREATE UNIQUE INDEX IF NOT EXISTS signals_consumed ON signals (run_id, consumed_by)
  WHERE consumed_by IS NOT NULL;
)sql";

// Version 13: schedules (issue 23), as SQLite's version 10. Re-runnable.
constexpr char kV13[] = R"sql(
CREATE TABLE IF NOT EXISTS schedules (
  id TEXT PRIMARY KEY,
  workflow_name TEXT NOT NULL,
  cron TEXT NOT NULL,
  timezone TEXT NOT NULL,
  inputs TEXT NOT NULL,
  overlap TEXT NOT NULL CHECK (overlap IN ('skip', 'allow', 'cancel')),
  catch_up TEXT NOT NULL CHECK (catch_up IN ('none', 'latest', 'all')),
  paused INTEGER NOT NULL DEFAULT 0,
  next_fire_at BIGINT NOT NULL,
  last_run_id TEXT NOT NULL DEFAULT '',
  last_fired_at BIGINT,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS schedules_due ON schedules (next_fire_at) WHERE paused = 0;
)sql";

// Version 14: child runs (issue 23), as SQLite's version 11. Re-runnable.
constexpr char kV14[] = R"sql(
ALTER TABLE runs ADD COLUMN IF NOT EXISTS parent_run_id TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS runs_parent ON runs (parent_run_id) WHERE parent_run_id <> '';
)sql";

// Version 15: concurrency keys and priority (issue 23), as SQLite's
// version 12. Re-runnable.
constexpr char kV15[] = R"sql(
ALTER TABLE runs ADD COLUMN IF NOT EXISTS concurrency_key TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN IF NOT EXISTS concurrency_limit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS priority INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS runs_keyed ON runs (status, concurrency_key) WHERE concurrency_key <> '';
CREATE INDEX IF NOT EXISTS runs_prioritized ON runs (status) WHERE priority <> 0;
)sql";

// Version 16: each key's head found by index probes (issue 23, "fairness
// in time"), as SQLite's version 13: a queue row's fair group and priority,
// queue_fair, runs_keyed_limit in place of runs_keyed, and the triggers
// that keep the group in step with the run. Also queue_published: the
// outbox rows a relay keeps as 'published' (pg_stream_db.cc), which count
// against their key's room, found without reading the rest of the queue.
// Re-runnable.
constexpr char kV16[] = R"sql(
ALTER TABLE queue ADD COLUMN IF NOT EXISTS fair_key TEXT NOT NULL DEFAULT '';
ALTER TABLE queue ADD COLUMN IF NOT EXISTS priority INTEGER NOT NULL DEFAULT 0;
UPDATE queue q SET fair_key = CASE WHEN r.status = 'queued' THEN r.concurrency_key ELSE '' END,
  priority = r.priority FROM runs r WHERE r.id = q.run_id;
CREATE INDEX IF NOT EXISTS queue_fair ON queue (fair_key, priority DESC, id);
CREATE INDEX IF NOT EXISTS queue_published ON queue (visible_at) WHERE claimed_by = 'published';
CREATE INDEX IF NOT EXISTS runs_keyed_limit ON runs (status, concurrency_key, concurrency_limit)
  WHERE concurrency_key <> '';
DROP INDEX IF EXISTS runs_keyed;

CREATE OR REPLACE FUNCTION runloom_fair_group() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE runloom.queue SET fair_key = CASE WHEN NEW.status = 'queued'
    THEN NEW.concurrency_key ELSE '' END WHERE run_id = NEW.id;
  RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION runloom_fair_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE runloom.queue SET fair_key = '', priority = 0 WHERE run_id = OLD.id;
  RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER runs_fair_group AFTER UPDATE OF status ON runs FOR EACH ROW
  WHEN (NEW.concurrency_key <> '' AND OLD.status IS DISTINCT FROM NEW.status
        AND (OLD.status = 'queued' OR NEW.status = 'queued'))
  EXECUTE FUNCTION runloom_fair_group();
CREATE OR REPLACE TRIGGER runs_fair_gone AFTER DELETE ON runs FOR EACH ROW
  EXECUTE FUNCTION runloom_fair_gone();
)sql";

// Version 17: streaming (issue 24), as SQLite's version 14: the text so far
// of each model call streaming now (LiveTextStore). Re-runnable.
constexpr char kV17[] = R"sql(
CREATE TABLE IF NOT EXISTS live_text (
  run_id TEXT NOT NULL,
  path TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  writer TEXT NOT NULL,
  text TEXT NOT NULL,
  ended INTEGER NOT NULL,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (run_id, path)
);
)sql";

// Version 18: retention (issue 25), as SQLite's version 15: the finished
// runs by finish time, for RetentionStore::PruneRuns. Partial, so only a
// run's terminal write (which sets finished_at) adds an entry; that write
// is not a HOT update any more, once per run. Re-runnable.
constexpr char kV18[] = R"sql(
CREATE INDEX IF NOT EXISTS runs_finished ON runs (finished_at) WHERE finished_at IS NOT NULL;
)sql";

constexpr std::array kMigrations = {
    Migration{1, kV1},   Migration{2, kV2},   Migration{3, kV3},   Migration{4, kV4},
    Migration{5, kV5},   Migration{6, kV6},   Migration{7, kV7},   Migration{8, kV8},
    Migration{9, kV9},   Migration{10, kV10}, Migration{11, kV11}, Migration{12, kV12},
    Migration{13, kV13}, Migration{14, kV14}, Migration{15, kV15}, Migration{16, kV16},
    Migration{17, kV17}, Migration{18, kV18}};

// One advisory lock key for runloom's migrations (any constant works; this
// one spells "rlm1").
constexpr char kLock[] = "SELECT pg_advisory_xact_lock(1919708465)";
constexpr char kMetaExists[] = "SELECT to_regclass('runloom.meta') IS NOT NULL";
constexpr char kVersion[] = "SELECT value::bigint FROM runloom.meta WHERE key = 'schema_version'";

absl::Status MigrateLocked(PgConn& c, const std::string& where) {
  RUNLOOM_RETURN_IF_ERROR(c.Exec(kLock).status());
  RUNLOOM_ASSIGN_OR_RETURN(PgResult exists, c.Exec(kMetaExists));
  int64_t version = 0;
  if (exists.row(0).ColumnInt(0) != 0) {
    RUNLOOM_ASSIGN_OR_RETURN(PgResult v, c.Exec(kVersion));
    if (v.rows() > 0) version = v.row(0).ColumnInt(0);
  }
  const int64_t latest = LatestPostgresSchemaVersion();
  if (version > latest) {
    return absl::FailedPreconditionError(
        absl::StrCat("PostgreSQL database ", where, " has runloom schema version ", version,
                     " but this runloom supports up to ", latest, "; upgrade runloom"));
  }
  if (version == latest) return absl::OkStatus();
  if (version == 0) {
    RUNLOOM_RETURN_IF_ERROR(c.ExecScript(
        "CREATE SCHEMA IF NOT EXISTS runloom; "
        "CREATE TABLE runloom.meta (key TEXT PRIMARY KEY, value TEXT NOT NULL); "
        "INSERT INTO runloom.meta VALUES ('schema_version', '0'), ('application', 'runloom')"));
  }
  RUNLOOM_RETURN_IF_ERROR(c.ExecScript("SET LOCAL search_path TO runloom"));
  for (const Migration& m : kMigrations) {
    if (m.version <= version) continue;
    absl::Status s = c.ExecScript(m.sql);
    if (!s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("migration to schema version ", m.version, ": ", s.message()));
    }
  }
  return c.ExecScript(
      absl::StrCat("UPDATE runloom.meta SET value = '", latest, "' WHERE key = 'schema_version'"));
}

}  // namespace

int64_t LatestPostgresSchemaVersion() { return kMigrations.back().version; }

absl::Status MigratePostgres(PgConn& c, const std::string& where) {
  RUNLOOM_RETURN_IF_ERROR(c.ExecScript("BEGIN"));
  absl::Status s = MigrateLocked(c, where);
  if (!s.ok()) {
    (void)c.ExecScript("ROLLBACK");  // `s` is the error to report
    return s;
  }
  return c.ExecScript("COMMIT");
}

}  // namespace runloom::store_internal
