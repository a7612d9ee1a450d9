// The signal mailbox of the PostgreSQL store (SignalStore; the reads are
// SqlStore's): SendSignal, and the commits that wait for or consume a
// signal. Each runs alone in a transaction that first locks the run's row,
// so a signal, the executor's park, the timer and a cancel are ordered by
// that lock, as SQLite's one writer orders them.
#include "core/status_macros.h"
#include "store/postgres/pg_store.h"
#include "store/signal_codec.h"

#include "absl/strings/str_cat.h"

#include <utility>

namespace runloom::store_internal {
namespace {

constexpr char kMailboxHead[] =
    "SELECT seq FROM signals WHERE run_id = $1 AND name = $2 AND consumed_by IS NULL "
    "ORDER BY seq LIMIT 1";
constexpr char kSignalConsumer[] =
    "SELECT consumed_by FROM signals WHERE run_id = $1 AND seq = $2";
constexpr char kConsumeSignal[] =
    "UPDATE signals SET consumed_by = $3, consumed_at = $4 WHERE run_id = $1 AND seq = $2";
constexpr char kSetWait[] = "UPDATE runs SET wait_signal = $2, wait_key = $3 WHERE id = $1";
constexpr char kSignalByKey[] = "SELECT " RUNLOOM_SIGNAL_COLUMNS
                                " FROM signals WHERE run_id = $1 AND idempotency_key = $2";
// The unconsumed count, the next seq and the run's wait, in one round trip.
constexpr char kMailboxState[] =
    "SELECT (SELECT count(*) FROM signals WHERE run_id = $1 AND consumed_by IS NULL), "
    "(SELECT COALESCE(MAX(seq), 0) + 1 FROM signals WHERE run_id = $1), "
    "wait_signal, wait_key FROM runs WHERE id = $1";
constexpr char kInsertSignal[] =
    "INSERT INTO signals (" RUNLOOM_SIGNAL_COLUMNS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
constexpr char kSignalLastSeq[] = "UPDATE runs SET last_event_seq = $2 WHERE id = $1";

}  // namespace

bool PgTouchesMailbox(const RunWrite& write) {
  return write.wait_for_signal.has_value() || write.consume_signal.has_value();
}

absl::Status PgCommitWithMailbox(PgHandle& h, const RunWrite& write, const EncodedWrite& encoded) {
  const std::string& id = write.run_id;
  return h.Txn([&](PgConn& c) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(auto locked, PgLockFence(c, id));
    const Fence& f = locked.first;
    const absl::Time now = locked.second;
    RUNLOOM_RETURN_IF_ERROR(CheckFence(write, f));
    const bool parks = write.new_status == RunStatus::kWaiting && write.wait_for_signal.has_value();
    if (parks) {
      RUNLOOM_ASSIGN_OR_RETURN(
          PgResult r, c.Exec(kMailboxHead, PgParams().Text(id).Text(write.wait_for_signal->signal)));
      if (r.rows() > 0) {
        return MailboxNotEmpty(id, write.wait_for_signal->signal, r.row(0).ColumnInt(0));
      }
    }
    if (write.consume_signal.has_value()) {
      const SignalConsumption& s = *write.consume_signal;
      RUNLOOM_ASSIGN_OR_RETURN(PgResult r,
                               c.Exec(kSignalConsumer, PgParams().Text(id).Int(s.seq)));
      if (r.rows() == 0) {
        return absl::NotFoundError(absl::StrCat("run ", id, " has no signal ", s.seq));
      }
      if (!r.row(0).ColumnIsNull(0)) {
        return absl::AbortedError(absl::StrCat("signal ", s.seq, " of run ", id,
                                               " is consumed already (by ",
                                               r.row(0).ColumnText(0), ")"));
      }
    }
    RUNLOOM_RETURN_IF_ERROR(PgCommitFenced(c, now, write, encoded, f));
    if (parks) {
      c.Defer(kSetWait, PgParams()
                            .Text(id)
                            .Text(write.wait_for_signal->signal)
                            .Text(write.wait_for_signal->key));
    }
    if (write.consume_signal.has_value()) {
      c.Defer(kConsumeSignal, PgParams()
                                  .Text(id)
                                  .Int(write.consume_signal->seq)
                                  .Text(write.consume_signal->key)
                                  .Time(now));
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<SendSignalResult> PgStore::SendSignal(const NewSignal& signal) {
  RUNLOOM_ASSIGN_OR_RETURN(const std::string payload, EncodeNewSignal(signal));
  RUNLOOM_RETURN_IF_ERROR(CheckEvents(signal.run_id, signal.events));
  RUNLOOM_RETURN_IF_ERROR(CheckEvents(signal.run_id, signal.wake_events));
  const std::string& id = signal.run_id;
  SendSignalResult out;
  RUNLOOM_RETURN_IF_ERROR(h_->Txn([&](PgConn& c) -> absl::Status {
    out = SendSignalResult{};
    RUNLOOM_ASSIGN_OR_RETURN(auto locked, PgLockFence(c, id));
    const Fence& f = locked.first;
    const absl::Time now = locked.second;
    if (!signal.idempotency_key.empty()) {
      RUNLOOM_ASSIGN_OR_RETURN(
          PgResult r, c.Exec(kSignalByKey, PgParams().Text(id).Text(signal.idempotency_key)));
      if (r.rows() > 0) {
        RUNLOOM_ASSIGN_OR_RETURN(out.signal, SignalFromRow(r.row(0)));
        out.created = false;
        return absl::OkStatus();
      }
    }
    RUNLOOM_ASSIGN_OR_RETURN(PgResult state, c.Exec(kMailboxState, PgParams().Text(id)));
    if (state.rows() == 0) return absl::NotFoundError(absl::StrCat("run ", id, " not found"));
    const PgRow row = state.row(0);
    RUNLOOM_RETURN_IF_ERROR(CheckSignalable(id, f.status, row.ColumnInt(0)));
    const int64_t seq = row.ColumnInt(1);
    const std::string wait_signal = row.ColumnIsNull(2) ? "" : row.ColumnText(2);
    const std::string wait_key = row.ColumnIsNull(3) ? "" : row.ColumnText(3);
    // The wait's compare-and-set: the run still rests waiting for it.
    const bool resolves = f.status == RunStatus::kWaiting && wait_signal == signal.name &&
                          !wait_key.empty();
    PgParams insert;
    insert.Text(id).Int(seq).Text(signal.name).Text(payload).Text(signal.idempotency_key).Time(
        now);
    if (resolves) {
      insert.Text(wait_key).Time(now);
    } else {
      insert.Null().Null();
    }
    c.Defer(kInsertSignal, std::move(insert));
    std::vector<Event> events = SignalEvents(signal, seq, resolves);
    if (resolves) {
      const RunWrite wake = SignalWakeWrite(id, std::move(events));
      RUNLOOM_ASSIGN_OR_RETURN(EncodedWrite encoded, EncodeWrite(wake));
      RUNLOOM_RETURN_IF_ERROR(PgCommitFenced(c, now, wake, encoded, f));
    } else if (!events.empty()) {
      RUNLOOM_ASSIGN_OR_RETURN(std::vector<EncodedEvent> encoded, EncodeEvents(id, events));
      RUNLOOM_ASSIGN_OR_RETURN(int64_t last, PgAppendEvents(c, id, f.last_event_seq, encoded, now));
      c.Defer(kSignalLastSeq, PgParams().Text(id).Int(last));
    }
    out.signal = InsertedSignal(signal, seq, now, resolves ? wait_key : "");
    out.resolved = resolves;
    return absl::OkStatus();
  }));
  return out;
}

}  // namespace runloom::store_internal
