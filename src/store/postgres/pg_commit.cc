// Lease and fenced writes of the PostgreSQL store. Each runs in a
// transaction that first locks the run's row and reads its fence, so the
// checks and the writes are atomic with respect to every other writer, on
// any machine. Commit and AcquireLease go through the store's commit group
// (pg_commit_group.h), which applies concurrent ones in one transaction.
#include "core/status_macros.h"
#include "store/postgres/pg_store.h"
#include "store/postgres/pg_write_batch.h"
#include "store/record_codec.h"

#include "absl/strings/str_cat.h"

#include <optional>
#include <utility>

namespace runloom::store_internal {
namespace {

constexpr char kRenew[] =
    "UPDATE runs SET lease_expires_at = $3 WHERE id = $1 AND lease_token = $2 "
    "AND status = 'running' RETURNING " RUNLOOM_RUN_COLUMNS;
constexpr char kRenewCheck[] =
    "SELECT status, lease_token, lease_owner, lease_expires_at, runloom_now() FROM runs "
    "WHERE id = $1 FOR UPDATE";
constexpr char kSavepoint[] = "SAVEPOINT first_write";
constexpr char kRollbackToSavepoint[] = "ROLLBACK TO SAVEPOINT first_write";
constexpr char kSetLastSeq[] = "UPDATE runs SET last_event_seq = $2 WHERE id = $1";
// Every lease that must find room under a concurrency key takes this one
// transaction-scoped lock first (any constant; this one spells "rlmc"), so
// the count below and the lease commit as one compare-and-set across
// processes. One lock, not one per key: a group transaction leasing runs
// of several keys could otherwise take two key locks in opposite orders.
constexpr char kConcurrencyLock[] = "SELECT pg_advisory_xact_lock(1919708515)";
// The runs of a concurrency key holding status running (index runs_keyed_limit).
constexpr char kRunningOfKey[] =
    "SELECT count(*) FROM runs WHERE status = 'running' AND concurrency_key = $1 "
    "AND concurrency_key <> ''";
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

class CommitOp final : public PgGroupOp {
 public:
  CommitOp(const RunWrite& write, const EncodedWrite& encoded) : w_(write), e_(encoded) {}
  const std::string& run_id() const override { return w_.run_id; }

  absl::Status AddTo(PgConn& c, absl::Time now, const Fence& f, PgWriteBatch& batch) override {
    status = PgWriteBatch::Check(w_, e_, f);
    if (!status.ok()) return absl::OkStatus();  // refused
    return batch.Add(c, now, w_, e_, f);
  }

  void RunAlone(PgHandle& h) override {
    status = h.Txn([&](PgConn& c) -> absl::Status {
      RUNLOOM_ASSIGN_OR_RETURN(auto locked, PgLockFence(c, w_.run_id));
      return PgCommitFenced(c, locked.second, w_, e_, locked.first);
    });
  }

 private:
  const RunWrite& w_;
  const EncodedWrite& e_;
};

// AcquireLease, with its optional first write (`first`, encoded as
// `encoded`; applied on the run's first lease only).
class LeaseOp final : public PgGroupOp {
 public:
  LeaseOp(PgHandle& h, const LeaseRequest& request, const std::vector<EncodedEvent>& events,
          std::optional<RunWrite> first, const EncodedWrite& encoded)
      : h_(h),
        run_id_(request.run_id),
        owner_(request.owner),
        ttl_(request.ttl),
        expected_attempt_(request.expected_attempt),
        events_(events),
        first_(std::move(first)),
        encoded_(encoded) {}
  const std::string& run_id() const override { return run_id_; }
  const Lease& lease() const { return lease_; }
  // The queue message the committed lease deleted (known in a group only).
  std::optional<int64_t> removed_message() const {
    return status.ok() && leased_in_group_ ? message_id : std::nullopt;
  }

  absl::Status AddTo(PgConn& c, absl::Time now, const Fence& f, PgWriteBatch& batch) override {
    Fence leased = f;
    RUNLOOM_RETURN_IF_ERROR(AddLease(c, now, &leased, batch));
    status = refusal_;
    leased_in_group_ = status.ok();
    if (!status.ok() || !FirstWriteDue(IsFirstLease(f))) return absl::OkStatus();
    lease_.first_write = PgWriteBatch::Check(*first_, encoded_, leased);
    if (!lease_.first_write.ok()) return absl::OkStatus();  // refused; the lease stands
    lease_.first_write_applied = true;
    return batch.Add(c, now, *first_, encoded_, leased);
  }

  // Alone, the first write goes after a savepoint: refused part-way (by a
  // statement), it leaves the lease standing.
  void RunAlone(PgHandle& h) override {
    leased_in_group_ = false;
    over_limit_ = absl::OkStatus();
    status = h.Txn([&](PgConn& c) -> absl::Status {
      over_limit_ = absl::OkStatus();
      RUNLOOM_ASSIGN_OR_RETURN(auto locked, PgLockFence(c, run_id_));
      const absl::Time now = locked.second;
      Fence leased = locked.first;
      PgWriteBatch lease;
      RUNLOOM_RETURN_IF_ERROR(AddLease(c, now, &leased, lease));
      if (refusal_.code() == absl::StatusCode::kResourceExhausted) {
        over_limit_ = refusal_;  // committed with the run's fresh message
        return absl::OkStatus();
      }
      RUNLOOM_RETURN_IF_ERROR(refusal_);
      lease.Defer(c, now);
      if (!FirstWriteDue(IsFirstLease(locked.first))) return absl::OkStatus();
      RUNLOOM_RETURN_IF_ERROR(c.Exec(kSavepoint).status());  // sent with the lease's writes
      lease_.first_write = PgCommitFenced(c, now, *first_, encoded_, leased);
      if (lease_.first_write.ok()) lease_.first_write = c.Flush();
      lease_.first_write_applied = lease_.first_write.ok();
      if (lease_.first_write.ok()) return absl::OkStatus();
      c.DropDeferred();
      if (!c.ok()) return lease_.first_write;
      return c.Exec(kRollbackToSavepoint).status();
    });
    if (status.ok() && !over_limit_.ok()) status = over_limit_;
  }

 private:
  // Checks that the run may be leased and adds the lease to `batch`; `*f`
  // becomes the leased run's fence. Returns a statement's failure on `c`
  // (the transaction's); sets refusal_ to the lease's own outcome: OK, or
  // its refusal (nothing added), kResourceExhausted over the concurrency
  // limit after giving the run a fresh pending message (statements on `c`).
  absl::Status AddLease(PgConn& c, absl::Time now, Fence* f, PgWriteBatch& batch) {
    lease_ = Lease{};
    refusal_ = CheckLeasable(run_id_, *f, now);
    if (refusal_.ok()) refusal_ = CheckLeaseAttempt(run_id_, expected_attempt_, *f);
    if (!refusal_.ok()) return absl::OkStatus();
    if (NeedsConcurrencyRoom(*f)) {
      RUNLOOM_RETURN_IF_ERROR(c.Exec(kConcurrencyLock).status());
      RUNLOOM_ASSIGN_OR_RETURN(PgResult n,
                               c.Exec(kRunningOfKey, PgParams().Text(f->concurrency_key)));
      int& in_batch = batch.keyed_leases(f->concurrency_key);
      const int64_t running = n.row(0).ColumnInt(0) + in_batch;
      if (running >= f->concurrency_limit) {
        RUNLOOM_RETURN_IF_ERROR(PgEnsureQueueMessage(c, run_id_, now).status());
        refusal_ = OverConcurrencyLimit(run_id_, *f, running);
        return absl::OkStatus();
      }
      ++in_batch;
    }
    const int attempt = f->attempts + 1;
    lease_.run_id = run_id_;
    lease_.owner = owner_;
    lease_.token = h_.NewLeaseToken();
    lease_.attempt = attempt;
    lease_.expires_at = LeaseDeadline(now, ttl_);
    batch.AddLease(run_id_, owner_, lease_.token, lease_.expires_at, events_, f);
    return absl::OkStatus();
  }

  // Whether a first write goes with this lease; sets the refusal when the
  // lease is not the run's first.
  // `first_lease`: IsFirstLease of the run before this lease.
  bool FirstWriteDue(bool first_lease) {
    if (!first_.has_value()) return false;
    if (!first_lease) {
      lease_.first_write = absl::FailedPreconditionError(kNotFirstLease);
      return false;
    }
    first_->lease_token = lease_.token;
    return true;
  }

  PgHandle& h_;
  const std::string& run_id_;
  const std::string& owner_;
  const absl::Duration ttl_;
  const int expected_attempt_;
  const std::vector<EncodedEvent>& events_;
  std::optional<RunWrite> first_;
  const EncodedWrite& encoded_;
  Lease lease_;
  bool leased_in_group_ = false;
  absl::Status refusal_;     // AddLease's outcome for the lease
  absl::Status over_limit_;  // RunAlone: the refusal committed with the fresh message
};

}  // namespace

absl::StatusOr<Lease> PgStore::AcquireLease(LeaseRequest request) {
  RUNLOOM_ASSIGN_OR_RETURN(LeaseFirstWrite prepared, PrepareLease(request));
  LeaseOp op(*h_, request, prepared.events, std::move(prepared.write), prepared.encoded);
  group_.Run(&op);
  RUNLOOM_RETURN_IF_ERROR(op.status);
  // The lease deleted the run's message: the consumer's Ack that follows
  // needs no statement.
  if (std::optional<int64_t> m = op.removed_message(); m.has_value()) h_->NoteRemovedByLease(*m);
  return op.lease();
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
  if (PgTouchesMailbox(write)) return PgCommitWithMailbox(*h_, write, encoded);
  CommitOp op(write, encoded);
  group_.Run(&op);
  return op.status;
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
