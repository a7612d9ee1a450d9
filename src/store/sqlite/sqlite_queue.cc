// The embedded transport: the queue table of the SQLite file. Claims and
// acks are ops on the handle's group-commit queue, so two consumers (threads
// or processes) can never claim the same message in the same visibility
// window: each claim runs inside BEGIN IMMEDIATE, one at a time.
#include "runloom/events.h"

#include "core/status_macros.h"
#include "store/sqlite/handle.h"
#include "store/sqlite/sqlite_store.h"
#include "transport/claim_helpers.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace runloom::store_internal {
namespace {

// How often WaitForMessages looks for messages of other processes.
constexpr absl::Duration kPollInterval = absl::Milliseconds(20);

constexpr char kMessageOfRun[] = "SELECT id, claimed_by FROM queue WHERE run_id = ?1";
constexpr char kDeleteById[] = "DELETE FROM queue WHERE id = ?1";
// The row's fair group and priority from its run (schema version 13): the
// run's key while it is queued, else ''; a run that is not there is keyless
// with priority 0. The trigger runs_fair_group keeps the group in step when
// the run moves later.
constexpr char kInsertMessage[] =
    "INSERT INTO queue (run_id, enqueued_at, visible_at, deliveries, claimed_by, fair_key, "
    "priority) VALUES (?1, ?2, ?2, 0, '', COALESCE((SELECT CASE WHEN status = 'queued' THEN "
    "concurrency_key ELSE '' END FROM runs WHERE id = ?1), ''), "
    "COALESCE((SELECT priority FROM runs WHERE id = ?1), 0))";
constexpr char kVisible[] =
    "SELECT id, run_id, deliveries FROM queue WHERE visible_at <= ?1 ORDER BY id LIMIT ?2";
constexpr char kClaim[] =
    "UPDATE queue SET claimed_by = ?2, visible_at = ?3, deliveries = deliveries + 1 WHERE id = ?1";
constexpr char kDeadLetter[] =
    "INSERT INTO dead_letters (message_id, run_id, deliveries, reason, at) "
    "VALUES (?1, ?2, ?3, ?4, ?5)";
constexpr char kRunSeq[] = "SELECT last_event_seq, status FROM runs WHERE id = ?1";
constexpr char kSetRunSeq[] = "UPDATE runs SET last_event_seq = ?2 WHERE id = ?1";
// Runs among ?1 (a JSON array of ids) with a message, and with a live dead letter.
constexpr char kPendingOf[] =
    "SELECT DISTINCT run_id FROM queue WHERE run_id IN (SELECT value FROM json_each(?1))";
constexpr char kDeadLetteredOf[] =
    "SELECT DISTINCT run_id FROM dead_letters WHERE redriven_at IS NULL "
    "AND run_id IN (SELECT value FROM json_each(?1))";
constexpr char kListDeadLetters[] =
    "SELECT id, message_id, run_id, deliveries, reason, at FROM dead_letters "
    "WHERE redriven_at IS NULL ORDER BY id LIMIT ?1";
constexpr char kCountDeadLetters[] = "SELECT count(*) FROM dead_letters WHERE redriven_at IS NULL";
constexpr char kDeadLetterById[] =
    "SELECT run_id FROM dead_letters WHERE id = ?1 AND redriven_at IS NULL";
constexpr char kMarkRedriven[] = "UPDATE dead_letters SET redriven_at = ?2 WHERE id = ?1";
constexpr char kRunExists[] = "SELECT 1 FROM runs WHERE id = ?1";
constexpr char kAck[] = "DELETE FROM queue WHERE id = ?1 AND run_id = ?2";
constexpr char kRelease[] =
    "UPDATE queue SET claimed_by = '', visible_at = ?3, deliveries = MAX(deliveries - 1, 0) "
    "WHERE id = ?1 AND run_id = ?2";
constexpr char kMessageExists[] = "SELECT 1 FROM queue WHERE id = ?1 AND run_id = ?2";
constexpr char kAnyVisible[] = "SELECT 1 FROM queue WHERE visible_at <= ?1 LIMIT 1";

// Concurrency keys and priority (issue 23). Whether any queued run has a
// key or a priority (indexes runs_keyed_limit, runs_prioritized): when none
// has, a claim takes the visible messages in id order, as before (kVisible).
constexpr char kFairNeeded[] =
    "SELECT EXISTS (SELECT 1 FROM runs WHERE status = 'queued' AND concurrency_key <> '') "
    "OR EXISTS (SELECT 1 FROM runs WHERE status = 'queued' AND priority <> 0)";
// The fair order (FairVisible): the visible messages grouped by their
// row's fair_key (the run's key while it is queued; '' for a run without
// one, not queued, or gone), ranked in each group by priority (higher
// first) then age, and taken rank by rank across the groups: the head of
// every key before the second of any. A keyed group offers a message of
// rank n only if n <= its run's limit less the key's running runs, so a
// run over its limit is not claimed at all; the lease refuses the few a
// race lets through (AcquireLease).
//
// Found by index probes, whatever the backlog: kFairGroups lists the groups
// by a skip-scan of queue_fair (one probe per group), each with its key's
// running runs (runs_keyed_limit) and the largest limit of its queued runs
// (one probe of runs_keyed_limit); kFairGroupOrder then walks one group in
// claim order (queue_fair) only as far as a message could still be offered.
constexpr char kFairGroups[] =
    "WITH RECURSIVE g(k) AS (SELECT min(fair_key) FROM queue UNION ALL "
    "SELECT (SELECT min(fair_key) FROM queue WHERE fair_key > g.k) FROM g WHERE g.k IS NOT NULL) "
    "SELECT k, (SELECT count(*) FROM runs WHERE status = 'running' AND concurrency_key = g.k "
    "AND concurrency_key <> ''), COALESCE((SELECT max(concurrency_limit) FROM runs "
    "WHERE status = 'queued' AND concurrency_key = g.k AND concurrency_key <> ''), 0) "
    "FROM g WHERE k IS NOT NULL";
// One group's visible messages in claim order, with each one's run's limit.
// ?1: the group; ?2: now. (`+visible_at`: the walk is queue_fair's, never
// queue_visible's.)
constexpr char kFairGroupOrder[] =
    "SELECT id, run_id, deliveries, priority, "
    "COALESCE((SELECT concurrency_limit FROM runs WHERE runs.id = queue.run_id), 0) "
    "FROM queue WHERE fair_key = ?1 AND +visible_at <= ?2 ORDER BY priority DESC, id";

struct Row {
  int64_t id = 0;
  std::string run_id;
  int deliveries = 0;
};

// Whether a claim takes the fair order (kFairNeeded).
absl::StatusOr<bool> FairNeeded(Db& db) {
  RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kFairNeeded));
  RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
  return row && st.ColumnInt(0) != 0;
}

// Up to `want` visible messages in id order (kVisible).
absl::StatusOr<std::vector<Row>> FifoVisible(Db& db, absl::Time now, int want) {
  RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kVisible));
  st.BindTime(1, now);
  st.BindInt(2, want);
  std::vector<Row> rows;
  while (true) {
    RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    rows.push_back(Row{st.ColumnInt(0), st.ColumnText(1), static_cast<int>(st.ColumnInt(2))});
  }
  return rows;
}

// Up to `want` visible messages in the fair order (kFairGroups). Each
// group is walked only while a message of it could still be among the
// first `want`: a group offers its messages in rank order, so no more than
// `want` of one group are needed, and a keyed group offers none past rank
// (its largest limit less its running runs). So a claim reads at most
// `want` rows of a group, whatever its backlog (with runs of differing
// limits under one key, up to its largest limit).
absl::StatusOr<std::vector<Row>> FairVisible(Db& db, absl::Time now, int want) {
  struct Group {
    std::string key;
    int64_t running = 0;
    int64_t top_limit = 0;
  };
  std::vector<Group> groups;
  {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kFairGroups));
    while (true) {
      RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      groups.push_back(Group{st.ColumnText(0), st.ColumnInt(1), st.ColumnInt(2)});
    }
  }
  struct Offered {
    Row row;
    int64_t rank = 0;
    int64_t priority = 0;
  };
  std::vector<Offered> offered;
  for (const Group& g : groups) {
    const bool keyed = !g.key.empty();
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kFairGroupOrder));
    st.BindText(1, g.key);
    st.BindTime(2, now);
    int64_t rank = 0;
    int taken = 0;
    while (taken < want && (!keyed || rank + g.running < g.top_limit)) {
      RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      ++rank;
      if (keyed && rank > st.ColumnInt(4) - g.running) continue;  // over its run's limit
      offered.push_back(
          Offered{Row{st.ColumnInt(0), st.ColumnText(1), static_cast<int>(st.ColumnInt(2))}, rank,
                  st.ColumnInt(3)});
      ++taken;
    }
  }
  std::sort(offered.begin(), offered.end(), [](const Offered& a, const Offered& b) {
    if (a.rank != b.rank) return a.rank < b.rank;
    if (a.priority != b.priority) return a.priority > b.priority;
    return a.row.id < b.row.id;
  });
  std::vector<Row> rows;
  for (Offered& o : offered) {
    if (static_cast<int>(rows.size()) == want) break;
    rows.push_back(std::move(o.row));
  }
  return rows;
}

class SqliteTransport final : public Transport {
 public:
  SqliteTransport(std::shared_ptr<SqliteHandle> handle, const TransportOptions& options)
      : h_(std::move(handle)), max_deliveries_(options.max_deliveries) {}

  absl::StatusOr<std::vector<QueueMessage>> Claim(const std::string& consumer, int max,
                                                  absl::Duration visibility) override;
  absl::Status Ack(const QueueMessage& message) override;
  absl::Status Release(const QueueMessage& message) override;
  void WaitForMessages(absl::Time deadline) override ABSL_LOCKS_EXCLUDED(mu_);
  void Interrupt() override { h_->Interrupt(); }

  absl::Status Publish(const std::string& run_id) override;
  absl::StatusOr<MessagePresence> FindMessages(const std::vector<std::string>& run_ids) override;
  absl::StatusOr<std::vector<DeadLetter>> ListDeadLetters(int limit) override;
  absl::StatusOr<int64_t> CountDeadLetters() override;
  absl::Status Redrive(const std::string& dead_letter_id) override;

 private:
  absl::Status ClaimInTxn(Db& db, const std::string& consumer, int max, absl::Time now,
                          absl::Duration visibility, std::vector<QueueMessage>& out);
  absl::Status DeadLetterInTxn(Db& db, const Row& r, absl::Time now);
  // Marks dead letter `id` redriven and gives its run a fresh message, if
  // the run can still be leased. kNotFound: no such live dead letter.
  absl::Status RedriveInTxn(WriteTxn& txn, int64_t id, absl::Time now);
  bool AnyVisible();

  const std::shared_ptr<SqliteHandle> h_;
  const int max_deliveries_;
  runloom::Mutex mu_;
  // The handle's produced-message count when the last wait returned.
  uint64_t last_seen_ ABSL_GUARDED_BY(mu_) = 0;
};

absl::StatusOr<std::vector<QueueMessage>> SqliteTransport::Claim(const std::string& consumer,
                                                                 int max,
                                                                 absl::Duration visibility) {
  RUNLOOM_RETURN_IF_ERROR(transport_internal::CheckClaimArgs(consumer, max, visibility));
  std::vector<QueueMessage> out;
  RUNLOOM_RETURN_IF_ERROR(h_->Write([&](WriteTxn& txn) -> absl::Status {
    out.clear();
    return ClaimInTxn(txn.db, consumer, max, h_->Now(), visibility, out);
  }));
  return out;
}

absl::Status SqliteTransport::ClaimInTxn(Db& db, const std::string& consumer, int max,
                                         absl::Time now, absl::Duration visibility,
                                         std::vector<QueueMessage>& out) {
  const absl::Time hidden_until = FromMicros(ToMicros(now + visibility));
  // The fair order while some queued run has a concurrency key or a
  // priority, else id order.
  RUNLOOM_ASSIGN_OR_RETURN(const bool fair, FairNeeded(db));
  while (static_cast<int>(out.size()) < max) {
    const int want = max - static_cast<int>(out.size());
    // Read in full (the statements reset) before the rows are changed.
    RUNLOOM_ASSIGN_OR_RETURN(std::vector<Row> rows,
                             fair ? FairVisible(db, now, want) : FifoVisible(db, now, want));
    if (rows.empty()) break;
    bool dead_lettered = false;
    for (const Row& r : rows) {
      if (r.deliveries + 1 > max_deliveries_) {
        RUNLOOM_RETURN_IF_ERROR(DeadLetterInTxn(db, r, now));
        dead_lettered = true;
        continue;
      }
      RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kClaim));
      st.BindInt(1, r.id);
      st.BindText(2, consumer);
      st.BindTime(3, hidden_until);
      RUNLOOM_RETURN_IF_ERROR(st.Run());
      out.push_back(QueueMessage{absl::StrCat(r.id), r.run_id, r.deliveries + 1});
    }
    // Fewer rows than asked means nothing more is visible, unless some were
    // dead-lettered and left room for more.
    if (static_cast<int>(rows.size()) < want || !dead_lettered) break;
  }
  return absl::OkStatus();
}

absl::Status SqliteTransport::DeadLetterInTxn(Db& db, const Row& r, absl::Time now) {
  const std::string reason = absl::StrCat(
      "delivered ", r.deliveries, " times without an ack (the cap is ", max_deliveries_, ")");
  {
    RUNLOOM_ASSIGN_OR_RETURN(Statement dl, db.Prepare(kDeadLetter));
    dl.BindInt(1, r.id);
    dl.BindText(2, r.run_id);
    dl.BindInt(3, r.deliveries);
    dl.BindText(4, reason);
    dl.BindTime(5, now);
    RUNLOOM_RETURN_IF_ERROR(dl.Run());
  }
  {
    RUNLOOM_ASSIGN_OR_RETURN(Statement del, db.Prepare(kDeleteById));
    del.BindInt(1, r.id);
    RUNLOOM_RETURN_IF_ERROR(del.Run());
  }
  // The run says so too: a reader of its events sees why nothing runs it.
  int64_t last_seq = 0;
  {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kRunSeq));
    st.BindText(1, r.run_id);
    RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) return absl::OkStatus();  // the run is gone: the dead letter is enough
    last_seq = st.ColumnInt(0);
  }
  Event e = RunDeadLetteredEvent(
      r.run_id, {.message_id = absl::StrCat(r.id), .deliveries = r.deliveries, .reason = reason});
  std::vector<EncodedEvent> events = {EncodedEvent{e.type, e.schema_version, e.data.dump()}};
  RUNLOOM_ASSIGN_OR_RETURN(int64_t last, AppendEvents(db, r.run_id, last_seq, events, now));
  RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kSetRunSeq));
  st.BindText(1, r.run_id);
  st.BindInt(2, last);
  return st.Run();
}

absl::Status SqliteTransport::Ack(const QueueMessage& message) {
  int64_t id = 0;
  if (!absl::SimpleAtoi(message.id, &id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("queue message id '", message.id, "' is not an SQLite queue id"));
  }
  // The usual case: the run's lease removed this message (see
  // SqliteHandle::NoteRemovedByLease). No database access.
  if (h_->TakeRemovedByLease(id)) return absl::OkStatus();
  // Ids are never reused, so a message that is gone now is gone for good:
  // no write needed.
  RUNLOOM_ASSIGN_OR_RETURN(bool exists, h_->Read([&](Db& db) -> absl::StatusOr<bool> {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kMessageExists));
    st.BindInt(1, id);
    st.BindText(2, message.run_id);
    return st.Step();
  }));
  if (!exists) return absl::OkStatus();
  return h_->Write([&](WriteTxn& txn) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kAck));
    st.BindInt(1, id);
    st.BindText(2, message.run_id);
    return st.Run();
  });
}

absl::Status SqliteTransport::Publish(const std::string& run_id) {
  if (run_id.empty()) return absl::InvalidArgumentError("Publish: run id is empty");
  return h_->Write([&](WriteTxn& txn) -> absl::Status {
    {
      RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kRunExists));
      st.BindText(1, run_id);
      RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) return absl::NotFoundError(absl::StrCat("run ", run_id, " not found"));
    }
    RUNLOOM_ASSIGN_OR_RETURN(txn.produced_message, EnsureQueueMessage(txn.db, run_id, h_->Now()));
    return absl::OkStatus();
  });
}

absl::StatusOr<MessagePresence> SqliteTransport::FindMessages(
    const std::vector<std::string>& run_ids) {
  MessagePresence out;
  if (run_ids.empty()) return out;
  const std::string ids = nlohmann::json(run_ids).dump();
  RUNLOOM_RETURN_IF_ERROR(h_->Read([&](Db& db) -> absl::Status {
    for (auto [sql, list] :
         {std::pair{kPendingOf, &out.pending}, std::pair{kDeadLetteredOf, &out.dead_lettered}}) {
      RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(sql));
      st.BindText(1, ids);
      while (true) {
        RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
        if (!row) break;
        list->push_back(st.ColumnText(0));
      }
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::vector<DeadLetter>> SqliteTransport::ListDeadLetters(int limit) {
  return h_->Read([&](Db& db) -> absl::StatusOr<std::vector<DeadLetter>> {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kListDeadLetters));
    st.BindInt(1, limit <= 0 ? -1 : limit);
    std::vector<DeadLetter> out;
    while (true) {
      RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      out.push_back(DeadLetter{absl::StrCat(st.ColumnInt(0)), absl::StrCat(st.ColumnInt(1)),
                               st.ColumnText(2), static_cast<int>(st.ColumnInt(3)),
                               st.ColumnText(4), st.ColumnTime(5)});
    }
    return out;
  });
}

absl::StatusOr<int64_t> SqliteTransport::CountDeadLetters() {
  return h_->Read([&](Db& db) -> absl::StatusOr<int64_t> {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kCountDeadLetters));
    RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) return absl::InternalError("counting dead letters: no row");
    return st.ColumnInt(0);
  });
}

absl::Status SqliteTransport::RedriveInTxn(WriteTxn& txn, int64_t id, absl::Time now) {
  std::string run_id;
  {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kDeadLetterById));
    st.BindInt(1, id);
    RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) {
      return absl::NotFoundError(
          absl::StrCat("no dead letter ", id, " waiting for a redrive (unknown, or redriven)"));
    }
    run_id = st.ColumnText(0);
  }
  {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kMarkRedriven));
    st.BindInt(1, id);
    st.BindTime(2, now);
    RUNLOOM_RETURN_IF_ERROR(st.Run());
  }
  std::string status;
  {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kRunSeq));
    st.BindText(1, run_id);
    RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (row) status = st.ColumnText(1);
  }
  // A run that moved on (cancelled, finished) needs no message.
  if (status != "queued" && status != "running") return absl::OkStatus();
  RUNLOOM_ASSIGN_OR_RETURN(bool produced, EnsureQueueMessage(txn.db, run_id, now));
  txn.produced_message = txn.produced_message || produced;
  return absl::OkStatus();
}

absl::Status SqliteTransport::Redrive(const std::string& dead_letter_id) {
  int64_t id = 0;
  if (!absl::SimpleAtoi(dead_letter_id, &id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dead letter id '", dead_letter_id, "' is not an SQLite dead letter id"));
  }
  return h_->Write([&](WriteTxn& txn) { return RedriveInTxn(txn, id, h_->Now()); });
}

absl::Status SqliteTransport::Release(const QueueMessage& message) {
  int64_t id = 0;
  if (!absl::SimpleAtoi(message.id, &id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("queue message id '", message.id, "' is not an SQLite queue id"));
  }
  bool released = false;
  RUNLOOM_RETURN_IF_ERROR(h_->Write([&](WriteTxn& txn) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kRelease));
    st.BindInt(1, id);
    st.BindText(2, message.run_id);
    st.BindTime(3, h_->Now());
    RUNLOOM_RETURN_IF_ERROR(st.Run());
    released = sqlite3_changes(txn.db.raw()) > 0;
    txn.produced_message = released;
    return absl::OkStatus();
  }));
  return absl::OkStatus();
}

bool SqliteTransport::AnyVisible() {
  const absl::Time now = h_->Now();
  absl::StatusOr<bool> any = h_->Read([&](Db& db) -> absl::StatusOr<bool> {
    // Only a message a claim would take: one held back by its key's limit
    // must not wake the dispatcher into a claim that finds nothing, again
    // and again, until the key has room.
    RUNLOOM_ASSIGN_OR_RETURN(const bool fair, FairNeeded(db));
    if (fair) {
      RUNLOOM_ASSIGN_OR_RETURN(std::vector<Row> head, FairVisible(db, now, 1));
      return !head.empty();
    }
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kAnyVisible));
    st.BindTime(1, now);
    return st.Step();
  });
  // On a read error, wake the caller: its Claim reports the error.
  return !any.ok() || *any;
}

void SqliteTransport::WaitForMessages(absl::Time deadline) {
  uint64_t seen;
  {
    runloom::MutexLock l(&mu_);
    seen = last_seen_;
  }
  const uint64_t interrupts = h_->interrupts();
  Clock* clock = h_->clock();
  while (true) {
    const absl::Time poll_at = std::min(deadline, clock->Now() + kPollInterval);
    const uint64_t produced = h_->AwaitProduced(seen, interrupts, poll_at);
    if (produced != seen) {
      runloom::MutexLock l(&mu_);
      last_seen_ = produced;
      return;
    }
    if (h_->interrupts() != interrupts) return;
    if (clock->Now() >= deadline) return;
    if (AnyVisible()) return;  // produced by another process
  }
}

}  // namespace

absl::StatusOr<bool> EnsureQueueMessage(Db& db, const std::string& run_id, absl::Time now) {
  std::optional<int64_t> in_flight;
  {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kMessageOfRun));
    st.BindText(1, run_id);
    RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (row) {
      if (st.ColumnText(1).empty()) return false;  // pending: keep it
      in_flight = st.ColumnInt(0);
    }
  }
  if (in_flight.has_value()) {
    // A consumer holds it and will ack it; a new id makes that ack a no-op.
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kDeleteById));
    st.BindInt(1, *in_flight);
    RUNLOOM_RETURN_IF_ERROR(st.Run());
  }
  RUNLOOM_RETURN_IF_ERROR(InsertQueueMessage(db, run_id, now));
  return true;
}

absl::Status InsertQueueMessage(Db& db, const std::string& run_id, absl::Time now) {
  RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kInsertMessage));
  st.BindText(1, run_id);
  st.BindTime(2, now);
  return st.Run();
}

std::unique_ptr<Transport> NewSqliteTransport(std::shared_ptr<SqliteHandle> handle,
                                              const TransportOptions& options) {
  return std::make_unique<SqliteTransport>(std::move(handle), options);
}

}  // namespace runloom::store_internal
