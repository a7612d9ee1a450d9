// The PostgreSQL implementation of Store (include/runloom/store.h) and of
// its queue-table Transport. pg_store.cc has creation, reads and recovery
// (the catalog, tokens and the write and budget ledgers are SqlStore's,
// store/internal/sql_store.cc, over pg_sql.cc); pg_commit.cc the lease and
// fenced writes; pg_queue.cc the transport; pg_commit_group.cc the group commit of concurrent
// Commits, pg_write_batch.cc their set-based statements. Each write runs in a transaction that
// locks the run's row (SELECT ... FOR UPDATE) and checks the same fence as SQLite
// (store/write_checks.h) before writing.
//
// Thread-safety: every method is thread-safe (see PgHandle).
#pragma once

#include "runloom/store.h"
#include "runloom/transport.h"

#include "store/internal/sql.h"
#include "store/internal/sql_store.h"
#include "store/postgres/pg_admit_group.h"
#include "store/postgres/pg_commit_group.h"
#include "store/postgres/pg_conn.h"
#include "store/postgres/pg_handle.h"
#include "store/write_checks.h"
#include "transport/stream_database.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

// Concurrency keys and priority (issue 23), as the SQLite queue's
// (sqlite_queue.cc, FairVisible). Whether any queued run has a key or a
// priority (indexes runs_keyed_limit, runs_prioritized): when none has,
// claims and the outbox relay keep the plain id order.
#define RUNLOOM_PG_FAIR_NEEDED                                                      \
  "(EXISTS (SELECT 1 FROM runs WHERE status = 'queued' AND concurrency_key <> '') " \
  "OR EXISTS (SELECT 1 FROM runs WHERE status = 'queued' AND priority <> 0))"
// The ids of the visible queue rows in the fair order, at most LIMIT: the
// rows grouped by their fair_key (their run's key while it is queued; ''
// for a run without one, not queued, or gone), ranked in a group by
// priority (higher first) then age, taken rank by rank across groups; a
// keyed group offers a row of rank n only if n <= its run's limit less the
// key's running runs and its runs published to a stream transport and not
// leased yet (outbox rows kept as 'published' until their hold ends:
// pg_stream_db.cc; the table queue has none), or being published now: a
// queued run's row a relay holds ('relay') counts too, or a relay running
// beside it (every Claim runs a pass besides the background relay) would
// find the key's room free meanwhile and publish a second run of a key of
// limit 1 (seen: ClaimsHoldBackRunsOverTheirLimitUntilASlotFrees, PostgresRedis,
// once in a CI run).
//
// By index probes, whatever the backlog (schema version 16): `g` lists the
// groups by a skip-scan of queue_fair, one probe each; `walk` is how far a
// group's claim order can hold an offered row among the first LIMIT (LIMIT
// for the keyless group and for a key whose smallest queued limit leaves
// room for LIMIT; else its largest limit less its busy runs), each bound a
// probe of runs_keyed_limit; `ranked` reads that far into each group
// (queue_fair) and no further.
#define RUNLOOM_PG_FAIR_SELECT(LIMIT)                                                            \
  "WITH RECURSIVE want AS (SELECT (" #LIMIT                                                      \
  ")::bigint AS n), "                                                                            \
  "g AS ((SELECT fair_key AS k FROM queue ORDER BY fair_key LIMIT 1) "                           \
  "UNION ALL SELECT (SELECT q.fair_key FROM queue q WHERE q.fair_key > g.k "                     \
  "ORDER BY q.fair_key LIMIT 1) FROM g WHERE g.k IS NOT NULL), "                                 \
  "busy AS (SELECT k, sum(n)::bigint AS n FROM (SELECT concurrency_key AS k, count(*) AS n "     \
  "FROM runs WHERE status = 'running' AND concurrency_key <> '' GROUP BY concurrency_key "       \
  "UNION ALL SELECT r.concurrency_key, count(*) FROM queue q JOIN runs r ON r.id = q.run_id "    \
  "WHERE (q.claimed_by = 'published' OR (q.claimed_by = 'relay' AND r.status = 'queued')) "      \
  "AND q.visible_at > (SELECT runloom_now()) "                                                   \
  "AND r.concurrency_key <> '' GROUP BY r.concurrency_key) b GROUP BY k), "                      \
  "walk AS (SELECT g.k, COALESCE(busy.n, 0) AS n, CASE WHEN g.k = '' THEN want.n "               \
  "WHEN m.lo - COALESCE(busy.n, 0) >= want.n THEN want.n "                                       \
  "ELSE GREATEST(COALESCE(m.hi, 0) - COALESCE(busy.n, 0), 0) END AS upto "                       \
  "FROM g CROSS JOIN want LEFT JOIN busy ON busy.k = g.k LEFT JOIN LATERAL (SELECT "             \
  "min(concurrency_limit) AS lo, max(concurrency_limit) AS hi FROM runs "                        \
  "WHERE status = 'queued' AND concurrency_key = g.k AND concurrency_key <> '') m ON true "      \
  "WHERE g.k IS NOT NULL), "                                                                     \
  "ranked AS (SELECT c.id, c.priority AS p, c.rank, c.lim, walk.k AS g, walk.n AS busy "         \
  "FROM walk CROSS JOIN LATERAL (SELECT q.id, q.priority, "                                      \
  "ROW_NUMBER() OVER (ORDER BY q.priority DESC, q.id) AS rank, COALESCE((SELECT "                \
  "r.concurrency_limit FROM runs r WHERE r.id = q.run_id), 0) AS lim FROM queue q "              \
  "WHERE q.fair_key = walk.k AND q.visible_at <= (SELECT runloom_now()) "                        \
  "ORDER BY q.priority DESC, q.id LIMIT walk.upto) c) "                                          \
  "SELECT ranked.id FROM ranked WHERE ranked.g = '' OR ranked.rank <= ranked.lim - ranked.busy " \
  "ORDER BY ranked.rank, ranked.p DESC, ranked.id LIMIT " #LIMIT

namespace runloom::store_internal {

// The PostgreSQL side of the SQL seam (pg_sql.cc).
std::unique_ptr<SqlDatabase> NewPgSqlDatabase(std::shared_ptr<PgHandle> handle);

class PgStore final : public SqlStore {
 public:
  explicit PgStore(std::shared_ptr<PgHandle> handle)
      : SqlStore(NewPgSqlDatabase(handle)),
        h_(std::move(handle)),
        group_(h_.get()),
        admit_(h_.get()) {}

  // The catalog, tokens and the two ledgers: SqlStore (store/internal).
  // Without an idempotency key, through the admission group (pg_admit_group.h).
  absl::StatusOr<CreateRunResult> CreateRun(const NewRun& run, std::vector<Event> events) override;
  absl::StatusOr<RunRecord> GetRun(const std::string& run_id) override;
  absl::StatusOr<std::vector<RunRecord>> ListRuns(const RunFilter& filter) override;
  using Store::AcquireLease;
  // Lease and `first` in one transaction.
  absl::StatusOr<Lease> AcquireLease(LeaseRequest request) override;
  absl::StatusOr<RunRecord> RenewLease(const std::string& run_id, const std::string& token,
                                       absl::Duration ttl) override;
  // Through the commit group (pg_commit_group.h): concurrent commits share
  // one transaction.
  absl::Status Commit(const RunWrite& write) override;
  absl::StatusOr<std::vector<StepRecord>> ListSteps(const std::string& run_id,
                                                    std::optional<int64_t> revision) override;
  absl::StatusOr<std::vector<Event>> ListEvents(const std::string& run_id, int64_t after_seq,
                                                int limit) override;
  absl::StatusOr<std::vector<LiveLease>> ListLiveLeases(int limit) override;
  absl::Status ExpireLease(const std::string& run_id, const std::string& token) override;
  absl::StatusOr<std::vector<RecoveryCandidate>> FindRecoverable(absl::Duration queued_grace,
                                                                 int limit) override;
  absl::StatusOr<std::vector<std::string>> FindDueTimers(int limit) override;
  absl::StatusOr<std::vector<std::string>> FindCancelRequested(
      const std::vector<std::string>& run_ids) override;
  absl::Status Enqueue(const std::string& run_id, std::vector<Event> events) override;
  // One transaction (pg_signals.cc): the signal, and the wake of the wait it resolves.
  absl::StatusOr<SendSignalResult> SendSignal(const NewSignal& signal) override;
  absl::StatusOr<absl::Time> Now() override { return h_->ServerNow(); }
  Clock* clock() override { return h_->clock(); }

 private:
  const std::shared_ptr<PgHandle> h_;
  PgCommitGroup group_;
  PgAdmitGroup admit_;
};

// Appends `events` to run `run_id` after `last_seq`, at `now`, in the
// current transaction. Returns the new last seq.
absl::StatusOr<int64_t> PgAppendEvents(PgConn& c, const std::string& run_id, int64_t last_seq,
                                       const std::vector<EncodedEvent>& events, absl::Time now);
// Gives run `run_id` a pending message unless it has one (a claimed one is
// replaced, so its consumer's ack becomes a no-op). True when one was made.
absl::StatusOr<bool> PgEnsureQueueMessage(PgConn& c, const std::string& run_id, absl::Time now);
// The run's fence, its row locked until the transaction ends, and the
// server time. kNotFound when absent.
absl::StatusOr<std::pair<Fence, absl::Time>> PgLockFence(PgConn& c, const std::string& run_id);
// Applies `write` (serialized as `encoded`) to a run whose fence `f` is
// locked by this transaction, at server time `now`: checks the fence, then
// queues the writes on `c` (PgConn::Defer) for the transaction's COMMIT.
absl::Status PgCommitFenced(PgConn& c, absl::Time now, const RunWrite& write,
                            const EncodedWrite& encoded, const Fence& f);

// Whether `write` waits for or consumes a signal: it then runs alone, in
// PgCommitWithMailbox, not in a commit group.
bool PgTouchesMailbox(const RunWrite& write);
// Commits `write` in a transaction of its own, with the mailbox rules of
// RunWrite::wait_for_signal and consume_signal (pg_signals.cc).
absl::Status PgCommitWithMailbox(PgHandle& h, const RunWrite& write, const EncodedWrite& encoded);

// Records that message `message_id` of run `run_id` was dead-lettered after
// `deliveries` deliveries, for `reason`: a dead_letters row and the run's
// "run.dead_lettered" event, in the current transaction. Once per message
// id: false (nothing written) when it was recorded before.
absl::StatusOr<bool> PgRecordDeadLetter(PgConn& c, const std::string& message_id,
                                        const std::string& run_id, int deliveries,
                                        const std::string& reason);

std::unique_ptr<Transport> NewPgTransport(std::shared_ptr<PgHandle> handle);

// The database side of a stream transport (pg_stream_db.cc): the queue
// table as its outbox.
std::shared_ptr<transport_internal::StreamDatabase> NewPgStreamDatabase(
    std::shared_ptr<PgHandle> handle);
// meta.instance_id: names this database's keys on a shared Redis.
absl::StatusOr<std::string> PgInstanceId(PgHandle& h);

}  // namespace runloom::store_internal
