// Store's helper for backends without a one-commit first write.
#include "runloom/store.h"

namespace runloom {

void RunStore::ApplyFirstWrite(const RunWrite& first, Lease& lease) {
  lease.first_write_applied = false;
  if (lease.attempt != 1) {
    lease.first_write = absl::FailedPreconditionError(
        "not the run's first lease: its recorded steps must be read first");
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
