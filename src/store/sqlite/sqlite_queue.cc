// The embedded transport: the queue table of the SQLite file. Claims and
// acks are ops on the handle's group-commit queue, so two consumers (threads
// or processes) can never claim the same message in the same visibility
// window: each claim runs inside BEGIN IMMEDIATE, one at a time.
#include "core/status_macros.h"
#include "store/sqlite/handle.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace runloom::store_internal {
namespace {

// A message claimed this many times without an ack goes to dead_letters.
constexpr int kMaxDeliveries = 10;
// How often WaitForMessages looks for messages of other processes.
constexpr absl::Duration kPollInterval = absl::Milliseconds(20);

constexpr char kMessageOfRun[] = "SELECT id, claimed_by FROM queue WHERE run_id = ?1";
constexpr char kDeleteById[] = "DELETE FROM queue WHERE id = ?1";
constexpr char kInsertMessage[] =
    "INSERT INTO queue (run_id, enqueued_at, visible_at, deliveries, claimed_by) "
    "VALUES (?1, ?2, ?2, 0, '')";
constexpr char kVisible[] =
    "SELECT id, run_id, deliveries FROM queue WHERE visible_at <= ?1 ORDER BY id LIMIT ?2";
constexpr char kClaim[] =
    "UPDATE queue SET claimed_by = ?2, visible_at = ?3, deliveries = deliveries + 1 WHERE id = ?1";
constexpr char kDeadLetter[] =
    "INSERT INTO dead_letters (message_id, run_id, deliveries, reason, at) "
    "VALUES (?1, ?2, ?3, ?4, ?5)";
constexpr char kAck[] = "DELETE FROM queue WHERE id = ?1 AND run_id = ?2";
constexpr char kRelease[] =
    "UPDATE queue SET claimed_by = '', visible_at = ?3, deliveries = MAX(deliveries - 1, 0) "
    "WHERE id = ?1 AND run_id = ?2";
constexpr char kMessageExists[] = "SELECT 1 FROM queue WHERE id = ?1 AND run_id = ?2";
constexpr char kAnyVisible[] = "SELECT 1 FROM queue WHERE visible_at <= ?1 LIMIT 1";

struct Row {
  int64_t id = 0;
  std::string run_id;
  int deliveries = 0;
};

class SqliteTransport final : public Transport {
 public:
  explicit SqliteTransport(std::shared_ptr<SqliteHandle> handle) : h_(std::move(handle)) {}

  absl::StatusOr<std::vector<QueueMessage>> Claim(const std::string& consumer, int max,
                                                  absl::Duration visibility) override;
  absl::Status Ack(const QueueMessage& message) override;
  absl::Status Release(const QueueMessage& message) override;
  void WaitForMessages(absl::Time deadline) override ABSL_LOCKS_EXCLUDED(mu_);
  void Interrupt() override { h_->Interrupt(); }

 private:
  absl::Status ClaimInTxn(Db& db, const std::string& consumer, int max, absl::Time now,
                          absl::Duration visibility, std::vector<QueueMessage>& out);
  bool AnyVisible();

  const std::shared_ptr<SqliteHandle> h_;
  runloom::Mutex mu_;
  // The handle's produced-message count when the last wait returned.
  uint64_t last_seen_ ABSL_GUARDED_BY(mu_) = 0;
};

absl::StatusOr<std::vector<QueueMessage>> SqliteTransport::Claim(const std::string& consumer,
                                                                 int max,
                                                                 absl::Duration visibility) {
  if (consumer.empty()) return absl::InvalidArgumentError("queue consumer name is empty");
  if (max <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("Claim max must be positive, got ", max));
  }
  if (visibility <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Claim visibility must be positive, got ", absl::FormatDuration(visibility)));
  }
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
  while (static_cast<int>(out.size()) < max) {
    const int want = max - static_cast<int>(out.size());
    std::vector<Row> rows;
    {
      RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kVisible));
      st.BindTime(1, now);
      st.BindInt(2, want);
      while (true) {
        RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
        if (!row) break;
        rows.push_back(Row{st.ColumnInt(0), st.ColumnText(1), static_cast<int>(st.ColumnInt(2))});
      }
    }  // reset before the rows it visited are changed
    if (rows.empty()) break;
    bool dead_lettered = false;
    for (const Row& r : rows) {
      if (r.deliveries + 1 > kMaxDeliveries) {
        RUNLOOM_ASSIGN_OR_RETURN(Statement dl, db.Prepare(kDeadLetter));
        dl.BindInt(1, r.id);
        dl.BindText(2, r.run_id);
        dl.BindInt(3, r.deliveries);
        dl.BindText(4, absl::StrCat("delivered ", r.deliveries,
                                    " times without an ack (the cap is ", kMaxDeliveries, ")"));
        dl.BindTime(5, now);
        RUNLOOM_RETURN_IF_ERROR(dl.Run());
        RUNLOOM_ASSIGN_OR_RETURN(Statement del, db.Prepare(kDeleteById));
        del.BindInt(1, r.id);
        RUNLOOM_RETURN_IF_ERROR(del.Run());
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

absl::Status SqliteTransport::Ack(const QueueMessage& message) {
  int64_t id = 0;
  if (!absl::SimpleAtoi(message.id, &id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("queue message id '", message.id, "' is not an SQLite queue id"));
  }
  // Ids are never reused, so a message that is gone now is gone for good
  // (usually AcquireLease removed it): no write needed.
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

std::unique_ptr<Transport> NewSqliteTransport(std::shared_ptr<SqliteHandle> handle) {
  return std::make_unique<SqliteTransport>(std::move(handle));
}

}  // namespace runloom::store_internal
