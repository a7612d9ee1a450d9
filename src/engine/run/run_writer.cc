#include "engine/run/run_writer.h"

#include "core/crash_point.h"
#include "core/fiber.h"

#include "absl/strings/str_cat.h"

namespace runloom::engine_internal {

RunWriter::RunWriter(Store* store, std::string run_id, Lease lease,
                     std::optional<FirstLeaseRequest> first_lease, StopSource& root,
                     const SecretScrubber* scrubber)
    : store_(store),
      scrubber_(scrubber),
      run_id_(std::move(run_id)),
      first_lease_(std::move(first_lease)),
      root_(root),
      lease_(std::move(lease)) {
  lease_pending_ = first_lease_.has_value();
}

Lease RunWriter::lease() const {
  runloom::MutexLock l(&lease_mu_);
  return lease_;
}

absl::Status RunWriter::lease_error() const {
  runloom::MutexLock l(&lease_mu_);
  return lease_error_;
}

bool RunWriter::lease_needs_records() const {
  runloom::MutexLock l(&lease_mu_);
  return lease_needs_records_;
}

bool RunWriter::releasing() const {
  runloom::MutexLock l(&lease_mu_);
  return releasing_;
}

absl::Status RunWriter::Write(RunWrite write, bool defer) {
  write_mu_.Lock();
  // One write of this run at a time (parallel branches write through this
  // writer), in the order they got here; write_mu_ itself is not held across
  // the commit, which may suspend this run's fiber (below).
  while (writing_) write_done_.Wait(&write_mu_);
  if (lease_lost_) {
    write_mu_.Unlock();
    return absl::AbortedError("lease lost");
  }
  // Before anything is kept: deferred records are written later, as they are.
  if (scrubber_ != nullptr) scrubber_->Scrub(write);
  if (defer) {
    // A finished step's record rides on the next write (the next step's
    // start, a retry, a pause or the terminal status), which always comes
    // before anything that depends on the step runs. One transaction per
    // step instead of two; a crash in between loses the record, and the step
    // runs again, as a crash just before its own commit would.
    for (StepRecord& r : write.steps) pending_.steps.push_back(std::move(r));
    for (Event& e : write.events) pending_.events.push_back(std::move(e));
    write_mu_.Unlock();
    return absl::OkStatus();
  }
  RunWrite pending = std::move(pending_);
  pending_ = RunWrite{};
  const bool merged = !pending.steps.empty() || !pending.events.empty();
  if (merged) {
    for (StepRecord& r : write.steps) pending.steps.push_back(std::move(r));
    for (Event& e : write.events) pending.events.push_back(std::move(e));
    write.steps = std::move(pending.steps);
    write.events = std::move(pending.events);
  }
  write.run_id = run_id_;
  write.party = Party::kExecutor;
  bool take_lease;
  const bool releases = write.new_status.has_value() && *write.new_status != RunStatus::kRunning;
  {
    runloom::MutexLock ll(&lease_mu_);
    take_lease = lease_pending_;
    write.lease_token = lease_.token;
    if (releases) releasing_ = true;
  }
  writing_ = true;
  write_mu_.Unlock();
  absl::Status s;
  bool lost = false;  // the lease is lost, or was never this write's to take
  {
    // The commit may suspend this run's fiber while it waits for its group
    // (store/internal/group_leader.h): no lock is held here, and the only
    // other writers of this run wait on writing_ above.
    fiber::SuspendableRegion suspendable;
    s = take_lease ? WriteTakingLease(write, &lost) : store_->Commit(write);
  }
  runloom::MutexLock l(&write_mu_);
  writing_ = false;
  write_done_.SignalAll();  // a waiter that finds the lease lost returns at once
  if (lost) lease_lost_ = true;
  if (releases && !s.ok()) {
    runloom::MutexLock ll(&lease_mu_);
    releasing_ = false;
  }
  if (take_lease && lease_lost_) return s;  // not leased, or leased but not first
  if (s.code() == absl::StatusCode::kCancelled) {
    // A cancel was requested before this step could start. Keep the records
    // that rode on this write for the cancelled status that follows.
    if (merged) {
      pending_.steps = std::move(write.steps);
      for (Event& e : write.events) {
        if (e.type != "step.started") pending_.events.push_back(std::move(e));
      }
    }
    root_.RequestStop(StopReason::kCancel);
    return absl::CancelledError("cancel requested");
  }
  if (s.code() == absl::StatusCode::kAborted || s.code() == absl::StatusCode::kFailedPrecondition) {
    // Someone else holds the run now (or it moved on without us): stop, and
    // make sure nothing else this execution does gets written.
    lease_lost_ = true;
    root_.RequestStop(StopReason::kLeaseLost);
    return absl::AbortedError(absl::StrCat("lease lost on run ", run_id_, ": ", s.message()));
  }
  if (s.ok() && !write.steps.empty()) RUNLOOM_CRASH_POINT(CrashPoint::kAfterStepCommit);
  return s;
}

absl::Status RunWriter::WriteTakingLease(RunWrite& write, bool* lost) {
  // A first execution: this write takes the lease too.
  const FirstLeaseRequest& req = *first_lease_;
  auto first = store_->AcquireLease(LeaseRequest{.run_id = run_id_,
                                                 .owner = req.owner,
                                                 .ttl = req.ttl,
                                                 .events = req.events,
                                                 .first = write,
                                                 .expected_attempt = req.attempt});
  if (!first.ok()) {
    runloom::MutexLock l(&lease_mu_);
    lease_pending_ = false;
    lease_error_ = first.status();
    *lost = true;
    root_.RequestStop(StopReason::kLeaseLost);
    return absl::AbortedError(
        absl::StrCat("run ", run_id_, " could not be leased: ", first.status().message()));
  }
  // Not the run's first lease (leased before, or rerun since it was read).
  const bool needs_records = first->first_write.code() == absl::StatusCode::kFailedPrecondition;
  {
    runloom::MutexLock l(&lease_mu_);
    lease_pending_ = false;
    lease_ = *first;
    lease_needs_records_ = needs_records;
  }
  if (req.on_leased) req.on_leased(*first);
  if (needs_records) {
    // Leased, but someone ran the run in between: stop writing; the
    // caller goes on with this lease and the recorded steps.
    *lost = true;
    root_.RequestStop(StopReason::kLeaseLost);
    return absl::AbortedError("the run was leased before: read its records first");
  }
  return first->first_write;
}

}  // namespace runloom::engine_internal
