// The PostgreSQL transport: the queue table of the store's database.
// Consumers claim with FOR UPDATE SKIP LOCKED, so any number of them, on any
// machine, never claim the same message in one visibility window and never
// wait on each other's locks; they wait for work on LISTEN (PgHandle's
// listener), woken by the queue table's NOTIFY trigger.
#include "runloom/events.h"

#include "core/status_macros.h"
#include "store/postgres/pg_store.h"
#include "store/record_codec.h"
#include "transport/claim_helpers.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include <algorithm>
#include <utility>

namespace runloom::store_internal {
namespace {

// How often WaitForMessages also looks at the table (and at the server's
// clock, for its deadline): a message whose visibility timeout ran out is
// announced by nobody.
constexpr absl::Duration kPollInterval = absl::Milliseconds(100);

// The claimed ids as an array, found again by the primary key: joined to a
// CTE of them, the update hashed the CTE and scanned the whole queue (the
// backlog) for every claim, in custom and generic plans alike. The new
// deadline's `(SELECT runloom_now())` is evaluated once, not once per row.
constexpr char kClaim[] =
    "UPDATE queue q SET claimed_by = $2, visible_at = (SELECT runloom_now()) + $4, "
    "deliveries = q.deliveries + 1 WHERE q.id = ANY (ARRAY(SELECT id FROM queue "
    "WHERE visible_at <= runloom_now() AND deliveries < $3 "
    "ORDER BY visible_at, id LIMIT $1 FOR UPDATE SKIP LOCKED)) "
    "RETURNING q.id, q.run_id, q.deliveries";
// Walks queue_delivered (schema version 9; `deliveries > 0` matches its
// predicate, and the cap is at least 1) down from the most delivered: in the
// usual case it looks at one index entry and finds nothing. (Ordered by id,
// it scanned the visible backlog for `deliveries >= $1`.)
constexpr char kExhausted[] =
    "SELECT id, run_id, deliveries FROM queue WHERE deliveries >= $1 AND deliveries > 0 "
    "AND visible_at <= runloom_now() ORDER BY deliveries DESC LIMIT 100 "
    "FOR UPDATE SKIP LOCKED";
constexpr char kDeleteById[] = "DELETE FROM queue WHERE id = $1";
// Once per message: a dead-lettering retried after a crash records nothing new.
constexpr char kDeadLetter[] =
    "INSERT INTO dead_letters (message_id, run_id, deliveries, reason, at) "
    "SELECT $1, $2, $3, $4, $5 WHERE NOT EXISTS "
    "(SELECT 1 FROM dead_letters WHERE message_id = $1) RETURNING id";
constexpr char kSetLastEventSeq[] = "UPDATE runs SET last_event_seq = $2 WHERE id = $1";
constexpr char kAck[] = "DELETE FROM queue WHERE id = $1 AND run_id = $2";
constexpr char kRelease[] =
    "UPDATE queue SET claimed_by = '', visible_at = runloom_now(), "
    "deliveries = GREATEST(deliveries - 1, 0) WHERE id = $1 AND run_id = $2 AND claimed_by <> ''";
constexpr char kPendingOf[] = "SELECT DISTINCT run_id FROM queue WHERE run_id = ANY($1::text[])";
constexpr char kDeadLetteredOf[] =
    "SELECT DISTINCT run_id FROM dead_letters WHERE redriven_at IS NULL "
    "AND run_id = ANY($1::text[])";
constexpr char kListDeadLetters[] =
    "SELECT id, message_id, run_id, deliveries, reason, at FROM dead_letters "
    "WHERE redriven_at IS NULL ORDER BY id LIMIT $1";
constexpr char kCountDeadLetters[] = "SELECT count(*) FROM dead_letters WHERE redriven_at IS NULL";
constexpr char kDeadLetterById[] =
    "SELECT run_id FROM dead_letters WHERE id = $1 AND redriven_at IS NULL FOR UPDATE";
constexpr char kMarkRedriven[] = "UPDATE dead_letters SET redriven_at = $2 WHERE id = $1";
// With a queued run that has a concurrency key or a priority (issue 23):
// the fair order of RUNLOOM_PG_FAIR_SELECT (pg_store.h), and only messages a claim would take
// (one held back by its key's limit must not wake the waiters, poll after
// poll, into claims that find nothing).
constexpr char kPoll[] =
    "SELECT runloom_now(), CASE WHEN " RUNLOOM_PG_FAIR_NEEDED " THEN EXISTS (SELECT 1 FROM "
    "(" RUNLOOM_PG_FAIR_SELECT(1) ") f) "
    "ELSE EXISTS (SELECT 1 FROM queue WHERE visible_at <= runloom_now()) END";
// The fair claim: up to four times $1 candidates in the fair order, locked
// in that order skipping those another claimer holds, at most $1 of them;
// the position in the order comes back so the batch keeps it.
constexpr char kFairClaim[] =
    "WITH cands AS MATERIALIZED (SELECT ARRAY(SELECT f.id FROM (" RUNLOOM_PG_FAIR_SELECT($1 * 4)
    ") f) AS a), "
    "locked AS (SELECT q.id FROM queue q, cands WHERE q.id = ANY (cands.a) "
    "AND q.visible_at <= runloom_now() AND q.deliveries < $3 "
    "ORDER BY array_position(cands.a, q.id) LIMIT $1 FOR UPDATE OF q SKIP LOCKED) "
    "UPDATE queue q SET claimed_by = $2, visible_at = (SELECT runloom_now()) + $4, "
    "deliveries = q.deliveries + 1 FROM locked, cands WHERE q.id = locked.id "
    "RETURNING q.id, q.run_id, q.deliveries, array_position(cands.a, q.id)";
constexpr char kFairNeeded[] = "SELECT " RUNLOOM_PG_FAIR_NEEDED;

absl::StatusOr<int64_t> ParseId(const std::string& id, absl::string_view what) {
  int64_t n = 0;
  if (!absl::SimpleAtoi(id, &n) || n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " id '", id, "' is not a PostgreSQL ", what, " id"));
  }
  return n;
}

class PgTransport final : public Transport {
 public:
  explicit PgTransport(std::shared_ptr<PgHandle> h)
      : h_(std::move(h)), max_deliveries_(h_->transport_options().max_deliveries) {}

  absl::StatusOr<std::vector<QueueMessage>> Claim(const std::string& consumer, int max,
                                                  absl::Duration visibility) override;
  absl::Status Ack(const QueueMessage& message) override;
  absl::Status Release(const QueueMessage& message) override;
  void WaitForMessages(absl::Time deadline) override;
  void Interrupt() override { h_->Interrupt(); }
  absl::Status Publish(const std::string& run_id) override;
  absl::StatusOr<MessagePresence> FindMessages(const std::vector<std::string>& run_ids) override;
  absl::StatusOr<std::vector<DeadLetter>> ListDeadLetters(int limit) override;
  absl::StatusOr<int64_t> CountDeadLetters() override;
  absl::Status Redrive(const std::string& dead_letter_id) override;

 private:
  absl::Status DeadLetterInTxn(PgConn& c, int64_t id, const std::string& run_id, int deliveries);

  const std::shared_ptr<PgHandle> h_;
  const int max_deliveries_;
  transport_internal::SignalWaiter waiter_;
};

absl::Status PgTransport::DeadLetterInTxn(PgConn& c, int64_t id, const std::string& run_id,
                                          int deliveries) {
  const std::string reason = absl::StrCat(
      "delivered ", deliveries, " times without an ack (the cap is ", max_deliveries_, ")");
  RUNLOOM_RETURN_IF_ERROR(
      PgRecordDeadLetter(c, absl::StrCat(id), run_id, deliveries, reason).status());
  return c.Exec(kDeleteById, PgParams().Int(id)).status();
}

absl::StatusOr<std::vector<QueueMessage>> PgTransport::Claim(const std::string& consumer, int max,
                                                             absl::Duration visibility) {
  RUNLOOM_RETURN_IF_ERROR(transport_internal::CheckClaimArgs(consumer, max, visibility));
  std::vector<QueueMessage> out;
  bool fair = false;
  absl::flat_hash_map<std::string, int64_t> positions;  // message id -> place in the fair order
  RUNLOOM_RETURN_IF_ERROR(h_->Txn([&](PgConn& c) -> absl::Status {
    out.clear();
    RUNLOOM_ASSIGN_OR_RETURN(PgResult spent, c.Exec(kExhausted, PgParams().Int(max_deliveries_)));
    for (int i = 0; i < spent.rows(); ++i) {
      const PgRow r = spent.row(i);
      RUNLOOM_RETURN_IF_ERROR(
          DeadLetterInTxn(c, r.ColumnInt(0), r.ColumnText(1), static_cast<int>(r.ColumnInt(2))));
    }
    RUNLOOM_ASSIGN_OR_RETURN(PgResult needed, c.Exec(kFairNeeded));
    fair = needed.row(0).ColumnInt(0) != 0;
    PgParams p;
    p.Int(max).Text(consumer).Int(max_deliveries_).Int(absl::ToInt64Microseconds(visibility));
    RUNLOOM_ASSIGN_OR_RETURN(PgResult claimed, c.Exec(fair ? kFairClaim : kClaim, p));
    positions.clear();
    for (int i = 0; i < claimed.rows(); ++i) {
      const PgRow r = claimed.row(i);
      out.push_back(QueueMessage{absl::StrCat(r.ColumnInt(0)), r.ColumnText(1),
                                 static_cast<int>(r.ColumnInt(2))});
      if (fair) positions[out.back().id] = r.ColumnInt(3);
    }
    return absl::OkStatus();
  }));
  // In the order claimed: the fair order, else the message ids' (the order
  // they were queued in).
  std::sort(out.begin(), out.end(), [&](const QueueMessage& a, const QueueMessage& b) {
    if (fair) return positions[a.id] < positions[b.id];
    return a.id.size() != b.id.size() ? a.id.size() < b.id.size() : a.id < b.id;
  });
  return out;
}

absl::Status PgTransport::Ack(const QueueMessage& message) {
  RUNLOOM_ASSIGN_OR_RETURN(int64_t id, ParseId(message.id, "queue message"));
  // The usual case: the run's lease deleted this message (ids are never
  // reused, so it is gone for good). No statement.
  if (h_->TakeRemovedByLease(id)) return absl::OkStatus();
  return h_->Read(
      [&](PgConn& c) { return c.Exec(kAck, PgParams().Int(id).Text(message.run_id)).status(); });
}

absl::Status PgTransport::Release(const QueueMessage& message) {
  RUNLOOM_ASSIGN_OR_RETURN(int64_t id, ParseId(message.id, "queue message"));
  return h_->Read([&](PgConn& c) {
    return c.Exec(kRelease, PgParams().Int(id).Text(message.run_id)).status();
  });
}

absl::Status PgTransport::Publish(const std::string& run_id) {
  if (run_id.empty()) return absl::InvalidArgumentError("Publish: run id is empty");
  return h_->Txn([&](PgConn& c) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(auto locked, PgLockFence(c, run_id));  // kNotFound: no such run
    return PgEnsureQueueMessage(c, run_id, locked.second).status();
  });
}

absl::StatusOr<MessagePresence> PgTransport::FindMessages(const std::vector<std::string>& run_ids) {
  MessagePresence out;
  if (run_ids.empty()) return out;
  RUNLOOM_RETURN_IF_ERROR(h_->Read([&](PgConn& c) -> absl::Status {
    for (auto [sql, list] :
         {std::pair{kPendingOf, &out.pending}, std::pair{kDeadLetteredOf, &out.dead_lettered}}) {
      RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(sql, PgParams().TextArray(run_ids)));
      list->clear();
      for (int i = 0; i < r.rows(); ++i) list->push_back(r.row(i).ColumnText(0));
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::vector<DeadLetter>> PgTransport::ListDeadLetters(int limit) {
  std::vector<DeadLetter> out;
  RUNLOOM_RETURN_IF_ERROR(h_->Read([&](PgConn& c) -> absl::Status {
    PgParams p;
    p.OptionalInt(limit <= 0 ? std::nullopt : std::optional<int64_t>(limit));
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kListDeadLetters, p));
    out.clear();
    for (int i = 0; i < r.rows(); ++i) {
      const PgRow row = r.row(i);
      out.push_back(DeadLetter{absl::StrCat(row.ColumnInt(0)), row.ColumnText(1), row.ColumnText(2),
                               static_cast<int>(row.ColumnInt(3)), row.ColumnText(4),
                               row.ColumnTime(5)});
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<int64_t> PgTransport::CountDeadLetters() {
  int64_t n = 0;
  RUNLOOM_RETURN_IF_ERROR(h_->Read([&](PgConn& c) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kCountDeadLetters, PgParams()));
    n = r.row(0).ColumnInt(0);
    return absl::OkStatus();
  }));
  return n;
}

absl::Status PgTransport::Redrive(const std::string& dead_letter_id) {
  RUNLOOM_ASSIGN_OR_RETURN(int64_t id, ParseId(dead_letter_id, "dead letter"));
  return h_->Txn([&](PgConn& c) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(PgResult d, c.Exec(kDeadLetterById, PgParams().Int(id)));
    if (d.rows() == 0) {
      return absl::NotFoundError(
          absl::StrCat("no dead letter ", id, " waiting for a redrive (unknown, or redriven)"));
    }
    const std::string run_id = d.row(0).ColumnText(0);
    absl::StatusOr<std::pair<Fence, absl::Time>> locked = PgLockFence(c, run_id);
    if (!locked.ok() && locked.status().code() != absl::StatusCode::kNotFound) {
      return locked.status();
    }
    absl::Time now;
    if (locked.ok()) {
      now = locked->second;
    } else {
      RUNLOOM_ASSIGN_OR_RETURN(now, PgServerNow(c));
    }
    RUNLOOM_RETURN_IF_ERROR(c.Exec(kMarkRedriven, PgParams().Int(id).Time(now)).status());
    // A run that moved on (cancelled, finished) or is gone needs no message.
    if (!locked.ok() || (locked->first.status != RunStatus::kQueued &&
                         locked->first.status != RunStatus::kRunning)) {
      return absl::OkStatus();
    }
    return PgEnsureQueueMessage(c, run_id, now).status();
  });
}

void PgTransport::WaitForMessages(absl::Time deadline) {
  waiter_.Wait(
      deadline, kPollInterval, [&] { return h_->queue_signals(); },
      [&]() -> absl::StatusOr<transport_internal::SignalWaiter::Poll> {
        transport_internal::SignalWaiter::Poll p;
        RUNLOOM_RETURN_IF_ERROR(h_->Read([&](PgConn& c) -> absl::Status {
          RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kPoll));
          p.now = r.row(0).ColumnTime(0);
          p.visible = r.row(0).ColumnInt(1) != 0;
          return absl::OkStatus();
        }));
        return p;
      },
      [&](uint64_t seen, absl::Time local) { h_->AwaitQueueSignal(seen, local); });
}

}  // namespace

absl::StatusOr<bool> PgRecordDeadLetter(PgConn& c, const std::string& message_id,
                                        const std::string& run_id, int deliveries,
                                        const std::string& reason) {
  absl::StatusOr<std::pair<Fence, absl::Time>> locked = PgLockFence(c, run_id);
  if (!locked.ok() && locked.status().code() != absl::StatusCode::kNotFound) return locked.status();
  absl::Time now;
  if (locked.ok()) {
    now = locked->second;
  } else {
    RUNLOOM_ASSIGN_OR_RETURN(now, PgServerNow(c));
  }
  PgParams p;
  p.Text(message_id).Text(run_id).Int(deliveries).Text(reason).Time(now);
  RUNLOOM_ASSIGN_OR_RETURN(PgResult inserted, c.Exec(kDeadLetter, p));
  if (inserted.rows() == 0) return false;  // recorded before (a retried dead-lettering)
  if (!locked.ok()) return true;           // the run is gone: the dead letter is enough
  // The run says so too: a reader of its events sees why nothing runs it.
  Event e = RunDeadLetteredEvent(
      run_id, {.message_id = message_id, .deliveries = deliveries, .reason = reason});
  std::vector<EncodedEvent> events = {EncodedEvent{e.type, e.schema_version, e.data.dump()}};
  RUNLOOM_ASSIGN_OR_RETURN(int64_t last,
                           PgAppendEvents(c, run_id, locked->first.last_event_seq, events, now));
  RUNLOOM_RETURN_IF_ERROR(c.Exec(kSetLastEventSeq, PgParams().Text(run_id).Int(last)).status());
  return true;
}

std::unique_ptr<Transport> NewPgTransport(std::shared_ptr<PgHandle> handle) {
  return std::make_unique<PgTransport>(std::move(handle));
}

}  // namespace runloom::store_internal
