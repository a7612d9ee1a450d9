// Lease and fenced writes of the PostgreSQL store. Each is one transaction
// that first locks the run's row and reads its fence (PgLockFence), so the
// checks and the writes are atomic with respect to every other writer, on
// any machine.
#include "core/status_macros.h"
#include "store/postgres/pg_store.h"
#include "store/record_codec.h"

#include "absl/strings/str_cat.h"

#include <optional>
#include <utility>

namespace runloom::store_internal {
namespace {

constexpr char kAcquire[] =
    "UPDATE runs SET status = 'running', lease_owner = $2, lease_token = $3, "
    "lease_expires_at = $4, attempts = attempts + 1, last_event_seq = $5, updated_at = $6, "
    "finished_at = NULL WHERE id = $1";
constexpr char kDeleteMessageOfRun[] = "DELETE FROM queue WHERE run_id = $1";
constexpr char kRenew[] =
    "UPDATE runs SET lease_expires_at = $3 WHERE id = $1 AND lease_token = $2 "
    "AND status = 'running' RETURNING " RUNLOOM_RUN_COLUMNS;
constexpr char kRenewCheck[] =
    "SELECT status, lease_token, lease_owner, lease_expires_at, runloom_now() FROM runs "
    "WHERE id = $1 FOR UPDATE";
constexpr char kSavepoint[] = "SAVEPOINT first_write";
constexpr char kRollbackToSavepoint[] = "ROLLBACK TO SAVEPOINT first_write";
constexpr char kSetLastSeq[] = "UPDATE runs SET last_event_seq = $2 WHERE id = $1";
constexpr char kUpsertStep[] =
    "INSERT INTO step_records (" RUNLOOM_STEP_COLUMNS
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) "
    "ON CONFLICT (run_id, revision, path) DO UPDATE SET step_id = EXCLUDED.step_id, "
    "kind = EXCLUDED.kind, phase = EXCLUDED.phase, attempt = EXCLUDED.attempt, "
    "state = EXCLUDED.state, output = EXCLUDED.output, error = EXCLUDED.error, "
    "error_class = EXCLUDED.error_class, stderr_tail = EXCLUDED.stderr_tail, "
    "started_at = EXCLUDED.started_at, finished_at = EXCLUDED.finished_at";
// NULL parameters keep the column (the RunWrite field was not set).
constexpr char kCommitUpdate[] =
    "UPDATE runs SET status = $2, outcome = COALESCE($3, outcome), "
    "error = COALESCE($4, error), phase = COALESCE($5, phase), "
    "revision = COALESCE($6::bigint, revision), entry = COALESCE($7, entry), "
    "context = COALESCE($8, context), "
    "cancel_requested = COALESCE($9::integer, cancel_requested), "
    "attempts = CASE WHEN $10::boolean THEN 0 ELSE attempts END, "
    "lease_owner = CASE WHEN $11::boolean THEN '' ELSE lease_owner END, "
    "lease_token = CASE WHEN $11::boolean THEN '' ELSE lease_token END, "
    "lease_expires_at = CASE WHEN $11::boolean THEN NULL ELSE lease_expires_at END, "
    "finished_at = CASE $12::integer WHEN 1 THEN $14::bigint WHEN 2 THEN NULL "
    "ELSE finished_at END, last_event_seq = $13, updated_at = $14 WHERE id = $1";

void UpsertSteps(PgConn& c, const std::string& run_id, const std::vector<StepRecord>& steps,
                 const std::vector<std::string>& outputs) {
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepRecord& s = steps[i];
    PgParams p;
    p.Text(run_id).Int(s.revision).Text(s.path).Text(s.step_id).Text(s.kind).Text(s.phase);
    p.Int(s.attempt).Text(StepStateName(s.state)).Text(outputs[i]).Text(s.error);
    p.Text(ErrorClassName(s.error_class)).Text(s.stderr_tail).Time(s.started_at);
    p.Time(s.finished_at);
    c.Defer(kUpsertStep, std::move(p));
  }
}

// Applies `write` to a run whose fence is `f` (locked by this transaction).
absl::Status CommitFenced(PgConn& c, absl::Time now, const RunWrite& write,
                          const EncodedWrite& encoded, const Fence& f) {
  const std::string& id = write.run_id;
  RUNLOOM_RETURN_IF_ERROR(CheckFence(write, f));
  const RunStatus to = write.new_status.value_or(f.status);
  const bool moves = write.new_status.has_value();
  const bool release =
      moves && (IsTerminal(to) || to == RunStatus::kPaused || to == RunStatus::kQueued);
  int64_t finished = 0;                          // keep
  if (moves) finished = IsTerminal(to) ? 1 : 2;  // set : clear
  UpsertSteps(c, id, write.steps, encoded.step_outputs);
  RUNLOOM_ASSIGN_OR_RETURN(int64_t last,
                           PgAppendEvents(c, id, f.last_event_seq, encoded.events, now));
  PgParams p;
  p.Text(id).Text(StatusName(to)).OptionalText(write.outcome).OptionalText(write.error);
  p.OptionalText(write.phase).OptionalInt(write.revision).OptionalText(write.entry);
  p.OptionalText(encoded.context);
  if (write.cancel_requested.has_value()) {
    p.Int(*write.cancel_requested ? 1 : 0);
  } else {
    p.Null();
  }
  p.Text(write.reset_attempts ? "true" : "false").Text(release ? "true" : "false");
  p.Int(finished).Int(last).Time(now);
  c.Defer(kCommitUpdate, std::move(p));
  if (moves && to == RunStatus::kQueued) {
    RUNLOOM_RETURN_IF_ERROR(PgEnsureQueueMessage(c, id, now).status());
  } else if (moves && (IsTerminal(to) || to == RunStatus::kPaused)) {
    // A run that cannot be leased needs no message.
    c.Defer(kDeleteMessageOfRun, PgParams().Text(id));
  }
  return absl::OkStatus();
}

// Takes the lease in the current transaction; `*f` is the fence afterwards.
absl::StatusOr<Lease> LeaseInTxn(PgConn& c, PgHandle& h, const std::string& run_id,
                                 const std::string& owner, absl::Duration ttl,
                                 const std::vector<Event>& events, Fence* f, absl::Time* now) {
  RUNLOOM_ASSIGN_OR_RETURN(auto locked, PgLockFence(c, run_id));
  *f = std::move(locked.first);
  *now = locked.second;
  RUNLOOM_RETURN_IF_ERROR(CheckLeasable(run_id, *f, *now));
  const int attempt = f->attempts + 1;
  RUNLOOM_ASSIGN_OR_RETURN(std::vector<EncodedEvent> encoded,
                           EncodeLeaseEvents(events, attempt, owner));
  const std::string token = h.NewLeaseToken();
  const absl::Time expires = LeaseDeadline(*now, ttl);
  RUNLOOM_ASSIGN_OR_RETURN(int64_t last,
                           PgAppendEvents(c, run_id, f->last_event_seq, encoded, *now));
  PgParams p;
  p.Text(run_id).Text(owner).Text(token).Time(expires).Int(last).Time(*now);
  c.Defer(kAcquire, std::move(p));
  // The lease now stands for the run's message (as on SQLite): a crashed
  // holder is recovered through lease expiry; the consumer's Ack is a no-op.
  c.Defer(kDeleteMessageOfRun, PgParams().Text(run_id));
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

absl::StatusOr<Lease> PgStore::AcquireLease(const std::string& run_id, const std::string& owner,
                                            absl::Duration ttl, std::vector<Event> events,
                                            const RunWrite* first) {
  RUNLOOM_RETURN_IF_ERROR(CheckLeaseArgs(run_id, owner, ttl, events));
  std::optional<RunWrite> w;
  EncodedWrite encoded;
  if (first != nullptr) {
    w = *first;
    w->run_id = run_id;
    w->party = Party::kExecutor;
    RUNLOOM_ASSIGN_OR_RETURN(encoded, EncodeWrite(*w));
  }
  Lease out;
  RUNLOOM_RETURN_IF_ERROR(h_->Txn([&](PgConn& c) -> absl::Status {
    Fence f;
    absl::Time now;
    RUNLOOM_ASSIGN_OR_RETURN(out, LeaseInTxn(c, *h_, run_id, owner, ttl, events, &f, &now));
    if (!w.has_value()) return absl::OkStatus();
    if (out.attempt != 1) {
      out.first_write = absl::FailedPreconditionError(
          "not the run's first lease: its recorded steps must be read first");
      return absl::OkStatus();
    }
    w->lease_token = out.token;
    // A savepoint (sent with the lease's writes): a first write refused
    // part-way leaves the lease standing.
    RUNLOOM_RETURN_IF_ERROR(c.Exec(kSavepoint).status());
    out.first_write = CommitFenced(c, now, *w, encoded, f);
    if (out.first_write.ok()) out.first_write = c.Flush();
    out.first_write_applied = out.first_write.ok();
    if (!out.first_write.ok()) {
      c.DropDeferred();
      if (!c.ok()) return out.first_write;
      return c.Exec(kRollbackToSavepoint).status();
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<RunRecord> PgStore::RenewLease(const std::string& run_id, const std::string& token,
                                              absl::Duration ttl) {
  RUNLOOM_RETURN_IF_ERROR(CheckTtl(ttl));
  RunRecord out;
  RUNLOOM_RETURN_IF_ERROR(h_->Txn([&](PgConn& c) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kRenewCheck, PgParams().Text(run_id)));
    if (r.rows() == 0) return absl::NotFoundError(absl::StrCat("run ", run_id, " not found"));
    const PgRow row = r.row(0);
    const std::string status = row.ColumnText(0);
    if (status != "running") {
      return absl::AbortedError(
          absl::StrCat("lease lost: run ", run_id, " is ", status, "; stop executing it"));
    }
    if (token.empty() || row.ColumnText(1) != token) {
      return absl::AbortedError(absl::StrCat("lease lost: run ", run_id, " is leased by '",
                                             row.ColumnText(2),
                                             "' with another token; stop executing it"));
    }
    const std::optional<absl::Time> expires_at = row.ColumnOptionalTime(3);
    const absl::Time now = row.ColumnTime(4);
    if (!expires_at.has_value() || *expires_at <= now) {
      return absl::AbortedError(
          absl::StrCat("lease lost: the lease on run ", run_id, " expired at ",
                       expires_at.has_value() ? absl::FormatTime(*expires_at) : "(unset)",
                       "; stop executing it"));
    }
    const absl::Time expires = LeaseDeadline(now, ttl);
    RUNLOOM_ASSIGN_OR_RETURN(PgResult run,
                             c.Exec(kRenew, PgParams().Text(run_id).Text(token).Time(expires)));
    RUNLOOM_ASSIGN_OR_RETURN(out, RunFromRow(run.row(0)));
    return absl::OkStatus();
  }));
  return out;
}

absl::Status PgStore::Commit(const RunWrite& write) {
  if (write.run_id.empty()) return absl::InvalidArgumentError("RunWrite::run_id is empty");
  RUNLOOM_ASSIGN_OR_RETURN(EncodedWrite encoded, EncodeWrite(write));
  return h_->Txn([&](PgConn& c) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(auto locked, PgLockFence(c, write.run_id));
    return CommitFenced(c, locked.second, write, encoded, locked.first);
  });
}

absl::Status PgStore::Enqueue(const std::string& run_id, std::vector<Event> events) {
  RUNLOOM_ASSIGN_OR_RETURN(std::vector<EncodedEvent> encoded, EncodeEvents(run_id, events));
  return h_->Txn([&](PgConn& c) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(auto locked, PgLockFence(c, run_id));
    const absl::Time now = locked.second;
    RUNLOOM_RETURN_IF_ERROR(PgEnsureQueueMessage(c, run_id, now).status());
    if (encoded.empty()) return absl::OkStatus();
    RUNLOOM_ASSIGN_OR_RETURN(int64_t last,
                             PgAppendEvents(c, run_id, locked.first.last_event_seq, encoded, now));
    c.Defer(kSetLastSeq, PgParams().Text(run_id).Int(last));
    return absl::OkStatus();
  });
}

}  // namespace runloom::store_internal
