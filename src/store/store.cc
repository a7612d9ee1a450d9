// Store's helper for backends without a one-commit first write.
#include "runloom/store.h"

#include "store/write_checks.h"

namespace runloom {

bool IsLeaseAttemptMoved(const absl::Status& s) {
  return s.code() == absl::StatusCode::kAborted &&
         s.GetPayload(store_internal::kLeaseAttemptMovedPayload).has_value();
}

void RunStore::ApplyFirstWrite(const RunWrite& first, Lease& lease) {
  lease.first_write_applied = false;
  // The run's first lease ever leaves it with its creation and this lease's
  // run.started (IsFirstLease, store/write_checks.h): a rerun resets the
  // attempts, so attempt 1 alone does not say it. A run with more events is
  // refused, which is always safe (the executor reads its records).
  absl::StatusOr<RunRecord> run = GetRun(lease.run_id);
  if (!run.ok()) {
    lease.first_write = run.status();
    return;
  }
  if (lease.attempt != 1 || run->last_event_seq > 2) {
    lease.first_write = absl::FailedPreconditionError(store_internal::kNotFirstLease);
    return;
  }
  RunWrite w = first;
  w.run_id = lease.run_id;
  w.party = Party::kExecutor;
  w.lease_token = lease.token;
  lease.first_write = Commit(w);
  lease.first_write_applied = lease.first_write.ok();
}

}  // namespace runloom
