// The PostgreSQL side of a stream transport (transport/stream_database.h,
// served by the Redis Streams one): the queue table as the outbox, the
// dead-letter table, the server clock. src/backend/postgres_backend.cc picks
// the transport.
//
// The outbox: with a Redis queue nothing claims the queue table's rows for
// execution; the relay does, for publishing. Pending claims rows like a
// consumer would (FOR UPDATE SKIP LOCKED, claimed_by = 'relay', visible again
// after kRelayLease), so relays in many processes never publish one row at
// once and a relay that dies mid-publish only delays its rows.
// PgEnsureQueueMessage replaces a row a relay holds (its claimed_by is not
// empty), so a state change during a publish still gets a message after it.
#include "core/status_macros.h"
#include "store/postgres/pg_store.h"
#include "transport/stream_database.h"

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include <algorithm>
#include <utility>

namespace runloom::store_internal {
namespace {

// How long a relay holds the rows it is publishing.
constexpr absl::Duration kRelayLease = absl::Seconds(30);
// How long a published row of a keyed run counts against its key's room
// (kPublished) before it is published again.
constexpr absl::Duration kPublishedHold = absl::Seconds(30);

// The ids as an array, found again by the primary key (joined to a CTE of
// them, the update scanned the whole outbox: pg_queue.cc, kClaim).
constexpr char kRelayClaim[] =
    "UPDATE queue q SET claimed_by = 'relay', visible_at = (SELECT runloom_now()) + $2, "
    "deliveries = q.deliveries + 1 WHERE q.id = ANY (ARRAY(SELECT id FROM queue "
    "WHERE visible_at <= runloom_now() ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)) "
    "RETURNING q.id, q.run_id";
// With a queued run that has a concurrency key or a priority (issue 23),
// the relay takes rows in the fair order and only those whose key has room
// (RUNLOOM_PG_FAIR_SELECT): the store decides, the stream only carries. A
// run published while its key had room and refused at its lease (another
// of its key leased first) gets a fresh row here (AcquireLease), published
// again once the key has room.
constexpr char kFairRelayClaim[] =
    "WITH cands AS MATERIALIZED (SELECT ARRAY(SELECT f.id FROM (" RUNLOOM_PG_FAIR_SELECT($1 * 4)
    ") f) AS a), "
    "locked AS (SELECT q.id FROM queue q, cands WHERE q.id = ANY (cands.a) "
    "AND q.visible_at <= runloom_now() "
    "ORDER BY array_position(cands.a, q.id) LIMIT $1 FOR UPDATE OF q SKIP LOCKED) "
    "UPDATE queue q SET claimed_by = 'relay', visible_at = (SELECT runloom_now()) + $2, "
    "deliveries = q.deliveries + 1 FROM locked, cands WHERE q.id = locked.id "
    "RETURNING q.id, q.run_id, array_position(cands.a, q.id)";
constexpr char kRelayFairNeeded[] = "SELECT " RUNLOOM_PG_FAIR_NEEDED;
// A published row is done with, except that of a queued run with a
// concurrency key: kept as 'published' for kPublishedHold, so the fair
// select counts it against its key's room until the run's lease deletes
// it (or a refused lease replaces it with a pending row). Should the
// stream lose the message, the row is published again when the hold ends.
constexpr char kPublished[] =
    "WITH kept AS (UPDATE queue q SET claimed_by = 'published', "
    "visible_at = (SELECT runloom_now()) + $2 FROM runs r "
    "WHERE q.id = ANY ($1::text[]::bigint[]) AND r.id = q.run_id AND r.status = 'queued' "
    "AND r.concurrency_key <> '' RETURNING q.id) "
    "DELETE FROM queue WHERE id = ANY ($1::text[]::bigint[]) AND id NOT IN (SELECT id FROM kept)";
// Backoff: 200 ms doubling per failed attempt, at most 30 s.
constexpr char kFailed[] =
    "UPDATE queue SET claimed_by = '', last_error = $2, visible_at = runloom_now() + "
    "LEAST(200000 * power(2, LEAST(deliveries - 1, 10)), 30000000)::bigint WHERE id = $1";
// The lease rule of CheckLeasable (store/write_checks.h), for many runs; a
// run of $1 with no row here is one the store does not have.
constexpr char kLeasable[] =
    "SELECT id, status, status = 'queued' OR (status = 'running' AND "
    "(lease_expires_at IS NULL OR lease_expires_at <= runloom_now())) "
    "FROM runs WHERE id = ANY($1::text[])";
constexpr char kInstanceId[] = "SELECT value FROM meta WHERE key = 'instance_id'";

class PgStreamDatabase final : public transport_internal::StreamDatabase {
 public:
  explicit PgStreamDatabase(std::shared_ptr<PgHandle> h) : h_(h), table_(NewPgTransport(h)) {}

  absl::StatusOr<std::vector<OutboxRow>> Pending(int max) override {
    std::vector<OutboxRow> out;
    bool fair = false;
    absl::flat_hash_map<std::string, int64_t> positions;  // row id -> place in the fair order
    // Each statement its own transaction (every claim runs a relay pass
    // first): the fair one locks what it takes, so a stale answer to the
    // first only picks the order.
    RUNLOOM_RETURN_IF_ERROR(h_->Read([&](PgConn& c) -> absl::Status {
      out.clear();
      positions.clear();
      RUNLOOM_ASSIGN_OR_RETURN(PgResult needed, c.Exec(kRelayFairNeeded));
      fair = needed.row(0).ColumnInt(0) != 0;
      PgParams p;
      p.Int(max).Int(absl::ToInt64Microseconds(kRelayLease));
      RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(fair ? kFairRelayClaim : kRelayClaim, p));
      for (int i = 0; i < r.rows(); ++i) {
        out.push_back(OutboxRow{r.row(i).ColumnText(0), r.row(i).ColumnText(1)});
        if (fair) positions[out.back().id] = r.row(i).ColumnInt(2);
      }
      return absl::OkStatus();
    }));
    std::sort(out.begin(), out.end(), [&](const OutboxRow& a, const OutboxRow& b) {
      if (fair) return positions[a.id] < positions[b.id];
      return a.id.size() != b.id.size() ? a.id.size() < b.id.size() : a.id < b.id;
    });
    return out;
  }
  absl::Status MarkPublished(const std::vector<std::string>& row_ids) override {
    return h_->Read([&](PgConn& c) {
      return c.Exec(kPublished, PgParams().TextArray(row_ids).Int(
                                    absl::ToInt64Microseconds(kPublishedHold)))
          .status();
    });
  }
  absl::Status MarkFailed(const std::string& row_id, const std::string& reason) override {
    int64_t id = 0;
    if (!absl::SimpleAtoi(row_id, &id)) {
      return absl::InvalidArgumentError(absl::StrCat("outbox row id '", row_id, "'"));
    }
    return h_->Read(
        [&](PgConn& c) { return c.Exec(kFailed, PgParams().Int(id).Text(reason)).status(); });
  }

  absl::StatusOr<absl::Time> Now() override { return h_->ServerNow(); }
  absl::StatusOr<LeasableRuns> Leasable(const std::vector<std::string>& run_ids) override {
    LeasableRuns out;
    RUNLOOM_RETURN_IF_ERROR(h_->Read([&](PgConn& c) -> absl::Status {
      RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kLeasable, PgParams().TextArray(run_ids)));
      out = LeasableRuns{};
      absl::flat_hash_set<std::string> found;
      for (int i = 0; i < r.rows(); ++i) {
        found.insert(r.row(i).ColumnText(0));
        if (r.row(i).ColumnInt(2) == 0) continue;  // not leasable now
        (r.row(i).ColumnText(1) == "queued" ? out.queued : out.expired)
            .push_back(r.row(i).ColumnText(0));
      }
      for (const std::string& id : run_ids) {
        if (!found.contains(id)) out.missing.push_back(id);
      }
      return absl::OkStatus();
    }));
    return out;
  }
  absl::Status RecordDeadLetter(const std::string& message_id, const std::string& run_id,
                                int deliveries, const std::string& reason) override {
    return h_->Txn([&](PgConn& c) {
      return PgRecordDeadLetter(c, message_id, run_id, deliveries, reason).status();
    });
  }
  // The queue-table transport's answers are the right ones here: its rows
  // are the outbox, and its Redrive writes an outbox row.
  absl::StatusOr<MessagePresence> FindMessages(const std::vector<std::string>& run_ids) override {
    return table_->FindMessages(run_ids);
  }
  absl::StatusOr<std::vector<DeadLetter>> ListDeadLetters(int limit) override {
    return table_->ListDeadLetters(limit);
  }
  absl::StatusOr<int64_t> CountDeadLetters() override { return table_->CountDeadLetters(); }
  absl::Status Redrive(const std::string& dead_letter_id) override {
    return table_->Redrive(dead_letter_id);
  }
  absl::StatusOr<int> RedriveAll() override { return table_->RedriveAll(); }

  uint64_t signals() override { return h_->queue_signals(); }
  void AwaitSignal(uint64_t seen, absl::Time local_deadline) override {
    h_->AwaitQueueSignal(seen, local_deadline);
  }
  void Interrupt() override { h_->Interrupt(); }

 private:
  const std::shared_ptr<PgHandle> h_;
  const std::unique_ptr<Transport> table_;
};

}  // namespace

absl::StatusOr<std::string> PgInstanceId(PgHandle& h) {
  std::string id;
  RUNLOOM_RETURN_IF_ERROR(h.Read([&](PgConn& c) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kInstanceId));
    if (r.rows() == 0) return absl::InternalError("runloom.meta has no instance_id");
    id = r.row(0).ColumnText(0);
    return absl::OkStatus();
  }));
  return id;
}

std::shared_ptr<transport_internal::StreamDatabase> NewPgStreamDatabase(
    std::shared_ptr<PgHandle> h) {
  return std::make_shared<PgStreamDatabase>(std::move(h));
}

}  // namespace runloom::store_internal
