// RunWriter: every durable write of one execution of one run, fenced by its
// lease, and the two protocols that save commits on the hot path.
//
// Deferred writes: a finished step's record (and its event) may be held and
// committed with the execution's next write (the next step's start, a retry,
// a pause or the terminal status), which always comes before anything that
// depends on the step runs. One transaction per step instead of two.
//
// First lease: a run that was never leased is created without a lease; its
// first write takes the lease in the same transaction
// (Store::AcquireLease's first write), so a fresh run's lease and first step start
// cost one commit. If the run was leased by someone else in between, the
// lease is still taken but nothing is written with it, and the caller must go
// on as for a resumed run (read the recorded steps, new execution).
//
// A refused write (stale token, or the run moved on) marks the lease lost,
// stops the execution's root StopSource, and makes every later write fail
// without touching the store.
//
// Thread-safety: every method is thread-safe. Writes are serialised by
// writing_ under write_mu_ (parallel branches of one run write through one
// RunWriter; the lock is not held across a commit, which may suspend a
// fiber: core/fiber.h, SuspendableRegion);
// lease_mu_ guards the lease, which the lease keeper reads from its thread.
#pragma once

#include "runloom/mutex.h"
#include "runloom/run.h"
#include "runloom/store.h"

#include "engine/run/secrets.h"
#include "engine/run/stop.h"

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace runloom::engine_internal {

// What a never-leased run's first write takes the lease with.
struct FirstLeaseRequest {
  std::string owner;
  absl::Duration ttl;
  std::vector<Event> events;                    // run.started
  std::function<void(const Lease&)> on_leased;  // may be empty
  int attempt = 1;                              // the attempt `events` name
};

class RunWriter {
 public:
  // `lease`: the lease held (token empty when `first_lease` is set). `root`
  // is stopped when a write is refused; it must outlive the writer.
  // `scrubber` (may be null; must outlive the writer) removes secret values
  // from every write before it reaches the store.
  RunWriter(Store* store, std::string run_id, Lease lease,
            std::optional<FirstLeaseRequest> first_lease, StopSource& root,
            const SecretScrubber* scrubber = nullptr);
  RunWriter(const RunWriter&) = delete;
  RunWriter& operator=(const RunWriter&) = delete;

  // A fenced executor write (run_id, party and lease token are filled in).
  // With `defer`, the write's step records and events are held and committed
  // with the next non-deferred write. Returns kAborted once the lease is
  // lost (nothing more is written), kCancelled when the store refused a step
  // start because a cancel was requested (the held records are kept for the
  // cancelled status that follows), or the store's error.
  absl::Status Write(RunWrite write, bool defer = false) ABSL_LOCKS_EXCLUDED(write_mu_, lease_mu_);

  // The lease (token empty while a first execution has not taken it yet).
  Lease lease() const ABSL_LOCKS_EXCLUDED(lease_mu_);
  // For a first execution: why the lease could not be taken (the run's first
  // write was refused as a whole), else OK.
  absl::Status lease_error() const ABSL_LOCKS_EXCLUDED(lease_mu_);
  // For a first execution: true when the lease was taken but it was not the
  // run's first, so nothing was written with it.
  bool lease_needs_records() const ABSL_LOCKS_EXCLUDED(lease_mu_);
  // True from the start of a write that moves the run off running (a
  // terminal status, a pause, a park, a release: each ends the lease) until
  // it fails; once set by a write that commits, it stays. A lease renewal
  // refused meanwhile is that write's doing, not a lease lost.
  bool releasing() const ABSL_LOCKS_EXCLUDED(lease_mu_);

 private:
  // The first write of a first execution: takes the lease with it. Sets
  // *lost when nothing more may be written (not leased, or leased but not
  // first). Called with writing_ set, without write_mu_.
  absl::Status WriteTakingLease(RunWrite& write, bool* lost) ABSL_LOCKS_EXCLUDED(write_mu_);

  // Constant after construction.
  Store* const store_;
  const SecretScrubber* const scrubber_;
  const std::string run_id_;
  const std::optional<FirstLeaseRequest> first_lease_;
  StopSource& root_;

  mutable runloom::Mutex lease_mu_;
  Lease lease_ ABSL_GUARDED_BY(lease_mu_);
  bool lease_pending_ ABSL_GUARDED_BY(lease_mu_) = false;
  absl::Status lease_error_ ABSL_GUARDED_BY(lease_mu_);
  bool lease_needs_records_ ABSL_GUARDED_BY(lease_mu_) = false;
  bool releasing_ ABSL_GUARDED_BY(lease_mu_) = false;

  runloom::Mutex write_mu_;
  // Orders this run's writes (parallel branches): set while one commits,
  // without write_mu_ held (its fiber may suspend there); the next waits.
  bool writing_ ABSL_GUARDED_BY(write_mu_) = false;
  runloom::CondVar write_done_;
  bool lease_lost_ ABSL_GUARDED_BY(write_mu_) = false;
  RunWrite pending_ ABSL_GUARDED_BY(write_mu_);  // deferred records and events
};

}  // namespace runloom::engine_internal
