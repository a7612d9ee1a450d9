// Fenced run writes of one PostgreSQL transaction as set-based statements:
// every run's update in one UPDATE ... FROM unnest(...), every event in one
// INSERT, every step record in one upsert, the messages of runs that stopped
// in one DELETE. A group of N writes costs four statements, not ~4N (each
// statement has a fixed cost in parse, bind, executor start-up and protocol
// on both sides, which dominated the server's CPU under `runloom bench`).
//
// Usage, inside a transaction that locked the runs' rows:
//   PgWriteBatch batch;
//   for (...) {
//     if (!PgWriteBatch::Check(write, encoded, fence).ok()) continue;  // refused
//     RUNLOOM_RETURN_IF_ERROR(batch.Add(c, now, write, encoded, fence));
//   }
//   batch.Defer(c, now);  // sent with the transaction's COMMIT
//
// At most one write per run in a batch (its event sequence numbers and its
// row update start from the run's fence). Thread-safety: one thread.
#pragma once

#include "runloom/store.h"

#include "store/postgres/pg_conn.h"
#include "store/write_checks.h"

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"

#include <optional>
#include <string>
#include <vector>

namespace runloom::store_internal {

class PgWriteBatch {
 public:
  // Whether `write` may be applied to a run with fence `f` (CheckFence, and
  // in a RUNLOOM_TESTING build its events' formats): its refusal, if any.
  static absl::Status Check(const RunWrite& write, const EncodedWrite& encoded, const Fence& f);
  // Adds `write` (serialized as `encoded`; REQUIRES: Check passed) to a run
  // whose fence `f` this transaction holds locked. A write that moves its
  // run to queued gets its queue message at once (statements on `c`): an
  // error is theirs, and the transaction is then aborted.
  absl::Status Add(PgConn& c, absl::Time now, const RunWrite& write, const EncodedWrite& encoded,
                   const Fence& f);
  // Adds a lease on run `run_id` (fence `*f`, which CheckLeasable passed):
  // its events, the run's lease columns (attempts + 1) and the deletion of
  // its queue message. Updates `*f` to the leased run's fence, which a first
  // write (Add) of the same batch then goes on from; that write, added right
  // after, carries the lease's columns in its own row update (one UPDATE of
  // the run's row, not two).
  void AddLease(const std::string& run_id, const std::string& owner, const std::string& token,
                absl::Time expires, const std::vector<EncodedEvent>& events, Fence* f);
  // Queues the batch's statements on `c` (PgConn::Defer); nothing when empty.
  void Defer(PgConn& c, absl::Time now);

  // The leases of queued runs with concurrency key `key` this batch holds
  // (not yet written, so not counted by a query of the same transaction).
  int& keyed_leases(const std::string& key) { return keyed_leases_[key]; }

 private:
  void AddSteps(const RunWrite& write, const EncodedWrite& encoded);
  void AddEvents(const std::string& run_id, const std::vector<EncodedEvent>& events,
                 int64_t last_seq);

  // step_records columns, one element per step record.
  struct Steps {
    std::vector<std::string> run_id, revision, path, step_id, kind, phase, attempt, state, output,
        error, error_class, stderr_tail, started_at, finished_at;
  } steps_;
  // run_events columns, one element per event.
  struct Events {
    std::vector<std::string> run_id, seq, type, schema_version, data;
  } events_;
  // The runs update, one element per write; NULL keeps the column.
  struct Runs {
    std::vector<std::string> id, status, reset_attempts, release, finished, last_event_seq, inc;
    std::vector<std::optional<std::string>> outcome, error, phase, revision, entry, context,
        cancel_requested, owner, token, expires, wake;
  } runs_;
  // The lease update, one element per lease.
  struct Leases {
    std::vector<std::string> id, owner, token, expires, last_event_seq;
  } leases_;
  std::vector<std::string> unqueued_;  // runs whose message goes (leased, terminal or paused)
  absl::flat_hash_map<std::string, int> keyed_leases_;
};

}  // namespace runloom::store_internal
