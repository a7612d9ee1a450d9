// The Store interface's default AcquireFirstLease: two transactions.
#include "runloom/store.h"

#include "core/status_macros.h"

namespace runloom {

absl::StatusOr<Store::FirstLease> Store::AcquireFirstLease(const std::string& run_id,
                                                           const std::string& owner,
                                                           absl::Duration ttl,
                                                           std::vector<Event> events,
                                                           const RunWrite& first) {
  FirstLease out;
  RUNLOOM_ASSIGN_OR_RETURN(out.lease, AcquireLease(run_id, owner, ttl, std::move(events)));
  if (out.lease.attempt != 1) {
    out.first_write = absl::FailedPreconditionError(
        "not the run's first lease: its recorded steps must be read first");
    return out;
  }
  RunWrite w = first;
  w.run_id = run_id;
  w.party = Party::kExecutor;
  w.lease_token = out.lease.token;
  out.first_write = Commit(w);
  return out;
}

}  // namespace runloom
