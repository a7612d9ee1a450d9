// Lease and fenced writes of the SQLite store. Every method here is one op
// on the group-commit queue: it reads the run's fence (status, lease token,
// last event seq) and writes only if the fence matches, so the checks and the
// writes are atomic with respect to every other writer (BEGIN IMMEDIATE).
#include "core/injected_bug.h"
#include "core/status_macros.h"
#include "store/sqlite/codec.h"
#include "store/signal_codec.h"
#include "store/sqlite/sqlite_store.h"
#include "store/write_checks.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <optional>
#include <utility>

namespace runloom::store_internal {
namespace {

constexpr char kFence[] = "SELECT " RUNLOOM_FENCE_COLUMNS " FROM runs WHERE id = ?1";
// ?7: the phase a first step start moves to (NULL keeps it).
constexpr char kAcquire[] =
    "UPDATE runs SET status = 'running', lease_owner = ?2, lease_token = ?3, "
    "lease_expires_at = ?4, attempts = attempts + 1, last_event_seq = ?5, updated_at = ?6, "
    "finished_at = NULL, phase = COALESCE(?7, phase) WHERE id = ?1";
constexpr char kRenew[] = "UPDATE runs SET lease_expires_at = ?2 WHERE id = ?1";
constexpr char kSetLastSeq[] = "UPDATE runs SET last_event_seq = ?2 WHERE id = ?1";
constexpr char kDeleteMessage[] = "DELETE FROM queue WHERE run_id = ?1";  // by run
// Two statements, not DELETE ... RETURNING: SQLite materializes RETURNING
// rows in a temporary table, which cost ~3x the pair below on the lease path
// (callgrind, `runloom bench`).
// The runs of a concurrency key holding status running (index runs_keyed_limit).
constexpr char kRunningOfKey[] =
    "SELECT count(*) FROM runs WHERE status = 'running' AND concurrency_key = ?1 "
    "AND concurrency_key <> ''";
constexpr char kQueueIdOfRun[] = "SELECT id FROM queue WHERE run_id = ?1";  // run_id is UNIQUE
constexpr char kDeleteMessageById[] = "DELETE FROM queue WHERE id = ?1";
constexpr char kUpsertStep[] =
    "INSERT OR REPLACE INTO step_records (" RUNLOOM_SQLITE_STEP_COLUMNS
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)";
// NULL parameters keep the column (the RunWrite field was not set).
constexpr char kCommitUpdate[] =
    "UPDATE runs SET status = ?2, outcome = COALESCE(?3, outcome), "
    "error = COALESCE(?4, error), phase = COALESCE(?5, phase), "
    "revision = COALESCE(?6, revision), entry = COALESCE(?7, entry), "
    "context = COALESCE(?8, context), cancel_requested = COALESCE(?9, cancel_requested), "
    "attempts = CASE WHEN ?10 THEN 0 ELSE attempts END, "
    "lease_owner = CASE WHEN ?11 THEN '' ELSE lease_owner END, "
    "lease_token = CASE WHEN ?11 THEN '' ELSE lease_token END, "
    "lease_expires_at = CASE WHEN ?11 THEN NULL ELSE lease_expires_at END, "
    "finished_at = CASE ?12 WHEN 1 THEN ?14 WHEN 2 THEN NULL ELSE finished_at END, "
    "wake_at = ?15, wait_signal = ?16, wait_key = ?17, last_event_seq = ?13, updated_at = ?14 "
    "WHERE id = ?1";

// A write that keeps the status (an executor's step progress) leaves the
// status and lease columns out of the SET clause, so SQLite leaves the
// runs_status_lease index alone: the most frequent write touches one row.
constexpr char kProgressUpdate[] =
    "UPDATE runs SET outcome = COALESCE(?3, outcome), "
    "error = COALESCE(?4, error), phase = COALESCE(?5, phase), "
    "revision = COALESCE(?6, revision), entry = COALESCE(?7, entry), "
    "context = COALESCE(?8, context), cancel_requested = COALESCE(?9, cancel_requested), "
    "attempts = CASE WHEN ?10 THEN 0 ELSE attempts END, "
    "last_event_seq = ?13, updated_at = ?14 WHERE id = ?1";

// The mailbox (SignalStore; store/signal_codec.h).
constexpr char kMailboxHead[] =
    "SELECT seq FROM signals WHERE run_id = ?1 AND name = ?2 AND consumed_by IS NULL "
    "ORDER BY seq LIMIT 1";
constexpr char kSignalConsumer[] = "SELECT consumed_by FROM signals WHERE run_id = ?1 AND seq = ?2";
constexpr char kConsumeSignal[] =
    "UPDATE signals SET consumed_by = ?3, consumed_at = ?4 WHERE run_id = ?1 AND seq = ?2";
constexpr char kSignalByKey[] = "SELECT " RUNLOOM_SIGNAL_COLUMNS
                                " FROM signals WHERE run_id = ?1 AND idempotency_key = ?2";
constexpr char kUnconsumed[] =
    "SELECT count(*) FROM signals WHERE run_id = ?1 AND consumed_by IS NULL";
constexpr char kNextSeq[] = "SELECT COALESCE(MAX(seq), 0) + 1 FROM signals WHERE run_id = ?1";
constexpr char kWaitOf[] = "SELECT wait_signal, wait_key FROM runs WHERE id = ?1";
constexpr char kInsertSignal[] =
    "INSERT INTO signals (" RUNLOOM_SIGNAL_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";

// What finished_at does in kCommitUpdate.
enum FinishedAt : int64_t { kKeep = 0, kSet = 1, kClear = 2 };

absl::StatusOr<Fence> LoadFence(Db& db, const std::string& run_id) {
  RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kFence));
  st.BindText(1, run_id);
  RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("run ", run_id, " not found"));
  return FenceFromRow(st, run_id);
}

absl::Status UpsertSteps(Db& db, const std::string& run_id, const std::vector<StepRecord>& steps,
                         const std::vector<std::string>& outputs) {
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepRecord& s = steps[i];
    const std::string& output = outputs[i];
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kUpsertStep));
    st.BindText(1, run_id);
    st.BindInt(2, s.revision);
    st.BindText(3, s.path);
    st.BindText(4, s.step_id);
    st.BindText(5, s.kind);
    st.BindText(6, s.phase);
    st.BindInt(7, s.attempt);
    st.BindText(8, StepStateName(s.state));
    st.BindText(9, output);
    st.BindText(10, s.error);
    st.BindText(11, ErrorClassName(s.error_class));
    st.BindText(12, s.stderr_tail);
    st.BindTime(13, s.started_at);
    st.BindTime(14, s.finished_at);
    RUNLOOM_RETURN_IF_ERROR(st.Run());
  }
  return absl::OkStatus();
}

// The integer the one-parameter query `sql` reads for run `id`.
absl::StatusOr<int64_t> QueryIntOfRun(Db& db, const char* sql, const std::string& id) {
  RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(sql));
  st.BindText(1, id);
  RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return absl::InternalError(absl::StrCat("no row from: ", sql));
  return st.ColumnInt(0);
}

// The mailbox rules of a write, checked before it writes anything: a move to
// waiting for a signal the mailbox has is refused (kAlreadyExists), and a
// signal is consumed once (kAborted for a second time). Marks the consumed
// signal.
absl::Status ApplyMailboxRules(Db& db, absl::Time now, const RunWrite& write, RunStatus to) {
  const std::string& id = write.run_id;
  if (to == RunStatus::kWaiting && write.new_status.has_value() &&
      write.wait_for_signal.has_value() &&
      !RUNLOOM_INJECTED_BUG(InjectedBug::kParkIgnoresMailbox)) {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kMailboxHead));
    st.BindText(1, id);
    st.BindText(2, write.wait_for_signal->signal);
    RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (row) return MailboxNotEmpty(id, write.wait_for_signal->signal, st.ColumnInt(0));
  }
  if (!write.consume_signal.has_value()) return absl::OkStatus();
  const SignalConsumption& c = *write.consume_signal;
  {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kSignalConsumer));
    st.BindText(1, id);
    st.BindInt(2, c.seq);
    RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) {
      return absl::NotFoundError(absl::StrCat("run ", id, " has no signal ", c.seq));
    }
    if (!st.ColumnIsNull(0)) {
      return absl::AbortedError(absl::StrCat("signal ", c.seq, " of run ", id,
                                             " is consumed already (by ", st.ColumnText(0), ")"));
    }
  }
  RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kConsumeSignal));
  st.BindText(1, id);
  st.BindInt(2, c.seq);
  st.BindText(3, c.key);
  st.BindTime(4, now);
  return st.Run();
}

// Applies `write` to a run whose fence is `f` (read in this transaction).
absl::Status CommitFenced(Db& db, absl::Time now, const RunWrite& write,
                          const EncodedWrite& encoded, const Fence& f, bool& produced) {
  const std::string& id = write.run_id;
  RUNLOOM_RETURN_IF_ERROR(CheckFence(write, f));

  const RunStatus to = write.new_status.value_or(f.status);
  const bool moves = write.new_status.has_value();
  const bool release = moves && (IsTerminal(to) || to == RunStatus::kPaused ||
                                 to == RunStatus::kWaiting || to == RunStatus::kQueued);
  int64_t finished = kKeep;
  if (moves) finished = IsTerminal(to) ? kSet : kClear;
  RUNLOOM_RETURN_IF_ERROR(ApplyMailboxRules(db, now, write, to));

  RUNLOOM_RETURN_IF_ERROR(UpsertSteps(db, id, write.steps, encoded.step_outputs));
  RUNLOOM_ASSIGN_OR_RETURN(int64_t last,
                           AppendEvents(db, id, f.last_event_seq, encoded.events, now));
  {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(moves ? kCommitUpdate : kProgressUpdate));
    st.BindText(1, id);
    if (moves) st.BindText(2, StatusName(to));
    st.BindOptionalText(3, write.outcome);
    st.BindOptionalText(4, write.error);
    st.BindOptionalText(5, write.phase);
    if (write.revision.has_value()) {
      st.BindInt(6, *write.revision);
    } else {
      st.BindNull(6);
    }
    st.BindOptionalText(7, write.entry.has_value()
                               ? std::optional<std::string>(ToString(*write.entry))
                               : std::nullopt);
    st.BindOptionalText(8, encoded.context);
    if (write.cancel_requested.has_value()) {
      st.BindInt(9, *write.cancel_requested ? 1 : 0);
    } else {
      st.BindNull(9);
    }
    st.BindInt(10, write.reset_attempts ? 1 : 0);
    if (moves) {
      st.BindInt(11, release ? 1 : 0);
      st.BindInt(12, finished);
      if (to == RunStatus::kWaiting && write.wake_at.has_value()) {
        st.BindTime(15, *write.wake_at);
      } else {
        st.BindNull(15);
      }
      if (to == RunStatus::kWaiting && write.wait_for_signal.has_value()) {
        st.BindText(16, write.wait_for_signal->signal);
        st.BindText(17, write.wait_for_signal->key);
      } else {
        st.BindNull(16);
        st.BindNull(17);
      }
    }
    st.BindInt(13, last);
    st.BindTime(14, now);
    RUNLOOM_RETURN_IF_ERROR(st.Run());
  }
  if (moves && to != RunStatus::kRunning && f.status == RunStatus::kRunning &&
      !f.concurrency_key.empty()) {
    // A slot of its key frees: wake this process's waiting claimers (a
    // message held back by the key's limit may be claimable now; other
    // processes see it at their next poll).
    produced = true;
  }
  if (moves && to == RunStatus::kQueued) {
    bool queued = false;
    RUNLOOM_ASSIGN_OR_RETURN(queued, EnsureQueueMessage(db, id, now));
    produced = produced || queued;
  } else if (moves && (IsTerminal(to) || to == RunStatus::kPaused || to == RunStatus::kWaiting)) {
    // A run that cannot be leased needs no message; an in-flight one's ack
    // becomes a no-op.
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kDeleteMessage));
    st.BindText(1, id);
    RUNLOOM_RETURN_IF_ERROR(st.Run());
  }
  return absl::OkStatus();
}

// A first write offered to LeaseInTxn, and what became of it.
struct Rider {
  RunWrite* write = nullptr;  // its lease_token is set to the new token
  const EncodedWrite* encoded = nullptr;
  bool folded = false;       // out: written with the lease's statements (or refused: status)
  bool first_lease = false;  // out: the lease is the run's first (IsFirstLease)
  absl::Status status;       // out, when folded: OK, or the refusal (nothing of it written)
};

// Takes the lease inside the current transaction. `*f` is the run's fence
// afterwards; `*removed_message` the id of the queue row it deleted. With a rider that RidesOnLease
// on the run's first lease, its events and phase go into the lease's INSERT and UPDATE.
absl::StatusOr<Lease> LeaseInTxn(SqliteHandle& h, Db& db, const LeaseRequest& request,
                                 std::vector<EncodedEvent> encoded, absl::Time now, Fence* f,
                                 std::optional<int64_t>* removed_message, Rider* rider) {
  const std::string& run_id = request.run_id;
  const std::string& owner = request.owner;
  RUNLOOM_ASSIGN_OR_RETURN(*f, LoadFence(db, run_id));
  RUNLOOM_RETURN_IF_ERROR(CheckLeasable(run_id, *f, now));
  RUNLOOM_RETURN_IF_ERROR(CheckLeaseAttempt(run_id, request.expected_attempt, *f));
  if (NeedsConcurrencyRoom(*f) &&
      !RUNLOOM_INJECTED_BUG(InjectedBug::kLeaseIgnoresConcurrencyLimit)) {
    // The count and the lease are one transaction of the file's single
    // writer: no other lease of the key can commit in between.
    RUNLOOM_ASSIGN_OR_RETURN(Statement count, db.Prepare(kRunningOfKey));
    count.BindText(1, f->concurrency_key);
    RUNLOOM_ASSIGN_OR_RETURN(bool row, count.Step());
    const int64_t running = row ? count.ColumnInt(0) : 0;
    if (running >= f->concurrency_limit) return OverConcurrencyLimit(run_id, *f, running);
  }
  const int attempt = f->attempts + 1;
  const std::string token = h.NewLeaseToken();
  const absl::Time expires = LeaseDeadline(now, request.ttl);
  const std::optional<std::string>* phase = nullptr;
  if (rider != nullptr) rider->first_lease = IsFirstLease(*f);
  if (rider != nullptr && rider->first_lease && RidesOnLease(*rider->write)) {
    // The rider's checks against the run as the lease leaves it.
    Fence after = *f;
    after.status = RunStatus::kRunning;
    after.lease_token = token;
    after.lease_owner = owner;
    after.attempts = attempt;
    rider->write->lease_token = token;
    rider->folded = true;
    rider->status = CheckFence(*rider->write, after);
    if (rider->status.ok()) {
      for (const EncodedEvent& e : rider->encoded->events) encoded.push_back(e);
      phase = &rider->write->phase;
    }
  }
  RUNLOOM_ASSIGN_OR_RETURN(int64_t last, AppendEvents(db, run_id, f->last_event_seq, encoded, now));
  RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kAcquire));
  st.BindText(1, run_id);
  st.BindText(2, owner);
  st.BindText(3, token);
  st.BindTime(4, expires);
  st.BindInt(5, last);
  st.BindTime(6, now);
  if (phase != nullptr) {
    st.BindOptionalText(7, *phase);
  } else {
    st.BindNull(7);
  }
  RUNLOOM_RETURN_IF_ERROR(st.Run());
  // The lease now stands for the run's message: a crashed holder is
  // recovered through lease expiry (the sweeper). The consumer's Ack that
  // follows finds the id in SqliteHandle's memo and does no I/O.
  {
    std::optional<int64_t> message;
    {
      RUNLOOM_ASSIGN_OR_RETURN(Statement find, db.Prepare(kQueueIdOfRun));
      find.BindText(1, run_id);
      RUNLOOM_ASSIGN_OR_RETURN(bool row, find.Step());
      if (row) message = find.ColumnInt(0);
    }  // reset before the delete
    if (message.has_value()) {
      const int64_t id = *message;
      RUNLOOM_ASSIGN_OR_RETURN(Statement del, db.Prepare(kDeleteMessageById));
      del.BindInt(1, id);
      RUNLOOM_RETURN_IF_ERROR(del.Run());
      if (removed_message != nullptr) *removed_message = id;
    }
  }
  f->status = RunStatus::kRunning;
  f->lease_token = token;
  f->lease_owner = owner;
  f->lease_expires_at = expires;
  f->attempts = attempt;
  f->last_event_seq = last;
  Lease lease;
  lease.run_id = run_id;
  lease.owner = owner;
  lease.token = token;
  lease.attempt = attempt;
  lease.expires_at = expires;
  return lease;
}

}  // namespace

absl::StatusOr<Lease> SqliteStore::AcquireLease(LeaseRequest request) {
  RUNLOOM_ASSIGN_OR_RETURN(LeaseFirstWrite prepared, PrepareLease(request));
  const std::string& run_id = request.run_id;
  std::optional<RunWrite>& w = prepared.write;
  const EncodedWrite& encoded = prepared.encoded;
  Lease out;
  std::optional<int64_t> removed;
  absl::Status over_limit;
  RUNLOOM_RETURN_IF_ERROR(h_->Write([&](WriteTxn& txn) -> absl::Status {
    const absl::Time now = h_->Now();
    Fence f;
    removed.reset();
    over_limit = absl::OkStatus();
    Rider rider{w.has_value() ? &*w : nullptr, &encoded};
    absl::StatusOr<Lease> leased = LeaseInTxn(*h_, txn.db, request, prepared.events, now, &f,
                                              &removed, w.has_value() ? &rider : nullptr);
    if (leased.status().code() == absl::StatusCode::kResourceExhausted) {
      // Over its key's limit: the run keeps a pending message (the claimed
      // one replaced), which claims offer again once the key has room. No
      // wake-up: no claim could take it now.
      over_limit = leased.status();
      return EnsureQueueMessage(txn.db, run_id, now).status();
    }
    RUNLOOM_RETURN_IF_ERROR(leased.status());
    out = *std::move(leased);
    if (!w.has_value()) return absl::OkStatus();
    if (rider.folded) {
      out.first_write = rider.status;
      out.first_write_applied = rider.status.ok();
      return absl::OkStatus();
    }
    if (!rider.first_lease) {
      out.first_write = absl::FailedPreconditionError(kNotFirstLease);
      return absl::OkStatus();
    }
    w->lease_token = out.token;
    const sqlite3_int64 changes_before = sqlite3_total_changes64(txn.db.raw());
    out.first_write = CommitFenced(txn.db, now, *w, encoded, f, txn.produced_message);
    out.first_write_applied = out.first_write.ok();
    // A write refused on its checks changed nothing: the lease stands alone.
    // One that failed after changing rows fails the whole transaction.
    if (!out.first_write.ok() && sqlite3_total_changes64(txn.db.raw()) != changes_before) {
      return out.first_write;
    }
    return absl::OkStatus();
  }));
  RUNLOOM_RETURN_IF_ERROR(over_limit);
  // Committed: the consumer's Ack of the removed message needs no I/O.
  if (removed.has_value()) h_->NoteRemovedByLease(*removed);
  return out;
}

absl::StatusOr<RunRecord> SqliteStore::RenewLease(const std::string& run_id,
                                                  const std::string& token, absl::Duration ttl) {
  RUNLOOM_RETURN_IF_ERROR(CheckTtl(ttl));
  RunRecord out;
  RUNLOOM_RETURN_IF_ERROR(h_->Write([&](WriteTxn& txn) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(RunRecord r, LoadRun(txn.db, run_id));
    if (r.status != RunStatus::kRunning) {
      return absl::AbortedError(absl::StrCat("lease lost: run ", run_id, " is ",
                                             StatusName(r.status), "; stop executing it"));
    }
    if (token.empty() || r.lease_token != token) {
      return absl::AbortedError(absl::StrCat("lease lost: run ", run_id, " is leased by '",
                                             r.lease_owner,
                                             "' with another token; stop executing it"));
    }
    const absl::Time now = h_->Now();
    if (!r.lease_expires_at.has_value() || *r.lease_expires_at <= now) {
      return absl::AbortedError(absl::StrCat(
          "lease lost: the lease on run ", run_id, " expired at ",
          r.lease_expires_at.has_value() ? absl::FormatTime(*r.lease_expires_at) : "(unset)",
          "; stop executing it"));
    }
    const absl::Time expires = LeaseDeadline(now, ttl);
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kRenew));
    st.BindText(1, run_id);
    st.BindTime(2, expires);
    RUNLOOM_RETURN_IF_ERROR(st.Run());
    r.lease_expires_at = expires;
    out = std::move(r);
    return absl::OkStatus();
  }));
  return out;
}

absl::Status SqliteStore::Commit(const RunWrite& write) {
  if (write.run_id.empty()) return absl::InvalidArgumentError("RunWrite::run_id is empty");
  // Everything that can be checked or serialized without the database is
  // done here, on the caller's thread, not by the single writer.
  RUNLOOM_ASSIGN_OR_RETURN(EncodedWrite encoded, EncodeWrite(write));
  return h_->Write([&](WriteTxn& txn) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(Fence f, LoadFence(txn.db, write.run_id));
    return CommitFenced(txn.db, h_->Now(), write, encoded, f, txn.produced_message);
  });
}

absl::Status SqliteStore::Enqueue(const std::string& run_id, std::vector<Event> events) {
  RUNLOOM_ASSIGN_OR_RETURN(std::vector<EncodedEvent> encoded, EncodeEvents(run_id, events));
  return h_->Write([&](WriteTxn& txn) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(Fence f, LoadFence(txn.db, run_id));
    RUNLOOM_RETURN_IF_ERROR(CheckEnqueueable(run_id, f));
    const absl::Time now = h_->Now();
    RUNLOOM_ASSIGN_OR_RETURN(txn.produced_message, EnsureQueueMessage(txn.db, run_id, now));
    if (encoded.empty()) return absl::OkStatus();
    RUNLOOM_ASSIGN_OR_RETURN(int64_t last,
                             AppendEvents(txn.db, run_id, f.last_event_seq, encoded, now));
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kSetLastSeq));
    st.BindText(1, run_id);
    st.BindInt(2, last);
    return st.Run();
  });
}

absl::StatusOr<SendSignalResult> SqliteStore::SendSignal(const NewSignal& signal) {
  RUNLOOM_ASSIGN_OR_RETURN(const std::string payload, EncodeNewSignal(signal));
  RUNLOOM_RETURN_IF_ERROR(CheckEvents(signal.run_id, signal.events));
  RUNLOOM_RETURN_IF_ERROR(CheckEvents(signal.run_id, signal.wake_events));
  const std::string& id = signal.run_id;
  SendSignalResult out;
  RUNLOOM_RETURN_IF_ERROR(h_->Write([&](WriteTxn& txn) -> absl::Status {
    out = SendSignalResult{};
    Db& db = txn.db;
    const absl::Time now = h_->Now();
    RUNLOOM_ASSIGN_OR_RETURN(Fence f, LoadFence(db, id));
    if (!signal.idempotency_key.empty()) {
      RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kSignalByKey));
      st.BindText(1, id);
      st.BindText(2, signal.idempotency_key);
      RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
      if (row) {
        RUNLOOM_ASSIGN_OR_RETURN(out.signal, SignalFromRow(st));
        out.created = false;
        return absl::OkStatus();
      }
    }
    RUNLOOM_ASSIGN_OR_RETURN(int64_t unconsumed, QueryIntOfRun(db, kUnconsumed, id));
    RUNLOOM_RETURN_IF_ERROR(CheckSignalable(id, f.status, unconsumed));
    RUNLOOM_ASSIGN_OR_RETURN(const int64_t seq, QueryIntOfRun(db, kNextSeq, id));
    std::string wait_signal, wait_key;
    {
      RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kWaitOf));
      st.BindText(1, id);
      RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
      if (row && !st.ColumnIsNull(0)) wait_signal = st.ColumnText(0);
      if (row && !st.ColumnIsNull(1)) wait_key = st.ColumnText(1);
    }
    // The wait's compare-and-set: the run still rests waiting for it.
    const bool resolves = f.status == RunStatus::kWaiting && wait_signal == signal.name &&
                          !wait_key.empty();
    {
      RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kInsertSignal));
      st.BindText(1, id);
      st.BindInt(2, seq);
      st.BindText(3, signal.name);
      st.BindText(4, payload);
      st.BindText(5, signal.idempotency_key);
      st.BindTime(6, now);
      if (resolves) {
        st.BindText(7, wait_key);
        st.BindTime(8, now);
      } else {
        st.BindNull(7);
        st.BindNull(8);
      }
      RUNLOOM_RETURN_IF_ERROR(st.Run());
    }
    std::vector<Event> events = SignalEvents(signal, seq, resolves);
    if (resolves) {
      const RunWrite wake = SignalWakeWrite(id, std::move(events));
      RUNLOOM_ASSIGN_OR_RETURN(EncodedWrite encoded, EncodeWrite(wake));
      RUNLOOM_RETURN_IF_ERROR(CommitFenced(db, now, wake, encoded, f, txn.produced_message));
    } else if (!events.empty()) {
      RUNLOOM_ASSIGN_OR_RETURN(std::vector<EncodedEvent> encoded, EncodeEvents(id, events));
      RUNLOOM_ASSIGN_OR_RETURN(int64_t last,
                               AppendEvents(db, id, f.last_event_seq, encoded, now));
      RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kSetLastSeq));
      st.BindText(1, id);
      st.BindInt(2, last);
      RUNLOOM_RETURN_IF_ERROR(st.Run());
    }
    out.signal = InsertedSignal(signal, seq, now, resolves ? wait_key : "");
    out.resolved = resolves;
    return absl::OkStatus();
  }));
  return out;
}

std::unique_ptr<Store> NewSqliteStore(std::shared_ptr<SqliteHandle> handle) {
  return std::make_unique<SqliteStore>(std::move(handle));
}

}  // namespace runloom::store_internal
