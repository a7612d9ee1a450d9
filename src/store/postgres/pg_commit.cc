// Lease and fenced writes of the PostgreSQL store. Each is one transaction
// that first locks the run's row and reads its fence (PgLockFence), so the
// checks and the writes are atomic with respect to every other writer, on
// any machine.
#include "core/status_macros.h"
#include "store/postgres/pg_store.h"
#include "store/postgres/pg_write_batch.h"
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
}  // namespace

absl::Status PgCommitFenced(PgConn& c, absl::Time now, const RunWrite& write,
                            const EncodedWrite& encoded, const Fence& f) {
  RUNLOOM_RETURN_IF_ERROR(PgWriteBatch::Check(write, encoded, f));
  PgWriteBatch batch;
  RUNLOOM_RETURN_IF_ERROR(batch.Add(c, now, write, encoded, f));
  batch.Defer(c, now);
  return absl::OkStatus();
}

namespace {

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
    out.first_write = PgCommitFenced(c, now, *w, encoded, f);
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
  return group_.Commit(write, encoded);
}

absl::Status PgStore::Enqueue(const std::string& run_id, std::vector<Event> events) {
  RUNLOOM_ASSIGN_OR_RETURN(std::vector<EncodedEvent> encoded, EncodeEvents(run_id, events));
  return h_->Txn([&](PgConn& c) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(auto locked, PgLockFence(c, run_id));
    RUNLOOM_RETURN_IF_ERROR(CheckEnqueueable(run_id, locked.first));
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
