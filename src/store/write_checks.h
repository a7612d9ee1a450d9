// The checks and encodings of a write that do not depend on the backend:
// events and step records checked and serialized before the write
// transaction, and the fence rules of a RunWrite (include/runloom/store.h)
// against the run's current fence. Every backend applies the same rules, so a
// compare-and-set means the same on SQLite and PostgreSQL.
//
// Thread-safety: stateless functions.
#pragma once

#include "runloom/run.h"
#include "runloom/status.h"
#include "runloom/store.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

#include <optional>
#include <string>
#include <vector>

namespace runloom::store_internal {

// An event checked and serialized before its write transaction, so that the
// single writer does no JSON work.
struct EncodedEvent {
  std::string type;
  int schema_version = 0;
  std::string data;  // JSON text
};

// kInvalidArgument when an event of `events` has no type, names another run
// than `run_id`, or has data that is not a JSON object.
absl::Status CheckEvents(const std::string& run_id, const std::vector<Event>& events);

// CheckEvents, then serializes the events' data.
// kInvalidArgument: an event without a type, naming another run, or with
// data that is not a JSON object or not valid UTF-8.
absl::StatusOr<std::vector<EncodedEvent>> EncodeEvents(const std::string& run_id,
                                                       const std::vector<Event>& events);

// What a write is checked against: the run's row as the write's transaction
// reads it (under its lock).
struct Fence {
  RunStatus status = RunStatus::kQueued;
  std::string lease_token;
  int64_t last_event_seq = 0;
  std::optional<absl::Time> lease_expires_at;
  std::string lease_owner;
  int attempts = 0;
  bool cancel_requested = false;
  // Concurrency (issue 23): the run's key ("" = none) and its limit.
  std::string concurrency_key;
  int concurrency_limit = 0;
  // Whether the run's wake time has come by the store's clock, read in the
  // commit's own statement (a timer may wake it only then: CheckFence).
  bool wake_due = false;
};

// The columns a fence is read from, in the order FenceFromRow reads them.
#define RUNLOOM_FENCE_COLUMNS                                                                   \
  "status, lease_token, last_event_seq, lease_expires_at, lease_owner, attempts, cancel_requested, " \
  "concurrency_key, concurrency_limit, "                                                         \
  "CASE WHEN wake_at IS NOT NULL AND wake_at <= runloom_now() THEN 1 ELSE 0 END"
// How many columns RUNLOOM_FENCE_COLUMNS has (a query's next column's index).
inline constexpr int kFenceColumnCount = 10;

// The fence in the first columns of `row` (RUNLOOM_FENCE_COLUMNS), a
// backend's row type as in store/record_codec.h; kDataLoss for an unknown
// status.
template <typename Row>
absl::StatusOr<Fence> FenceFromRow(const Row& row, const std::string& run_id) {
  Fence f;
  const std::string status = row.ColumnText(0);
  std::optional<RunStatus> parsed = ParseRunStatus(status);
  if (!parsed.has_value()) {
    return absl::DataLossError(
        absl::StrCat("run ", run_id, " has unknown status '", status, "' in the database"));
  }
  f.status = *parsed;
  f.lease_token = row.ColumnText(1);
  f.last_event_seq = row.ColumnInt(2);
  f.lease_expires_at = row.ColumnOptionalTime(3);
  f.lease_owner = row.ColumnText(4);
  f.attempts = static_cast<int>(row.ColumnInt(5));
  f.cancel_requested = row.ColumnInt(6) != 0;
  f.concurrency_key = row.ColumnText(7);
  f.concurrency_limit = static_cast<int>(row.ColumnInt(8));
  f.wake_due = row.ColumnInt(9) != 0;
  return f;
}

// Whether a lease taken on the run as `before` shows it is the run's first
// ever: never leased, and nothing recorded but its creation (a rerun or a
// decision resets the attempts, so attempt 1 alone does not say it). Only
// then may AcquireLease apply its first write: an executor that read the
// run before a rerun must not start the new revision with the old one's
// state (found by the simulation, seed 726; tests/regressions/).
inline bool IsFirstLease(const Fence& before) {
  return before.attempts == 0 && before.last_event_seq <= 1;
}
inline constexpr char kNotFirstLease[] =
    "not the run's first lease: its recorded steps must be read first";

// kInvalidArgument unless ttl > 0.
absl::Status CheckTtl(absl::Duration ttl);
// now + ttl, in whole microseconds (what the stores keep).
absl::Time LeaseDeadline(absl::Time now, absl::Duration ttl);

// The fence checks of a RunWrite, before anything is written: kAborted
// (status, token or last event seq moved, or a timer's wake before the
// run's wake time has come), kCancelled (a cancel request and
// refuse_if_cancel_requested), kFailedPrecondition (not in the transition table).
absl::Status CheckFence(const RunWrite& w, const Fence& f);

// A RunWrite's JSON, serialized on the caller's thread.
struct EncodedWrite {
  std::vector<EncodedEvent> events;
  std::vector<std::string> step_outputs;
  std::optional<std::string> context;
};
absl::StatusOr<EncodedWrite> EncodeWrite(const RunWrite& write);

// Whether a lease on a run with fence `f` must first find room under its
// concurrency key: a first lease of this execution (the run is queued)
// with a key. A running run taken over after its lease expired already
// counts among its key's running runs.
inline bool NeedsConcurrencyRoom(const Fence& f) {
  return f.status == RunStatus::kQueued && !f.concurrency_key.empty();
}
// AcquireLease's refusal of a run over its key's limit (store.h).
absl::Status OverConcurrencyLimit(const std::string& run_id, const Fence& f, int64_t running);
// CreateRun's checks of a NewRun (kInvalidArgument naming the field): its
// id and workflow, a child's idempotency key, max_attempts, the
// concurrency fields.
absl::Status CheckNewRun(const NewRun& run);

// AcquireLease's argument checks.
absl::Status CheckLeaseArgs(const std::string& run_id, const std::string& owner, absl::Duration ttl,
                            const std::vector<Event>& events);

// A lease's optional first write as the store applies it: for the leased
// run, by the executor (the store sets its lease token once the lease is
// taken), with its JSON serialized on the caller's thread.
struct LeaseFirstWrite {
  std::optional<RunWrite> write;  // none: a lease alone
  EncodedWrite encoded;
  std::vector<EncodedEvent> events;  // the lease's own events, serialized as given
};
// Checks `request`'s arguments (CheckLeaseArgs), serializes its events and
// takes its first write (moved out of it) for the leased run.
absl::StatusOr<LeaseFirstWrite> PrepareLease(LeaseRequest& request);

// Whether a run with fence `f` may be leased at `now`: kFailedPrecondition
// when paused or terminal, kAborted while another lease is live.
absl::Status CheckLeasable(const std::string& run_id, const Fence& f, absl::Time now);

// Whether Enqueue may write for a run with fence `f`: kAborted when the run
// is paused or finished. Such a run moved on since the caller read it (e.g.
// a sweeper's candidate whose holder finished it meanwhile): it gets no
// queue message and no event.
absl::Status CheckEnqueueable(const std::string& run_id, const Fence& f);

// LeaseRequest::expected_attempt against the run's fence: kAborted when
// the lease would be another attempt than the one the caller's events name.
// The refusal carries the payload kLeaseAttemptMovedPayload
// (IsLeaseAttemptMoved, runloom/store.h).
absl::Status CheckLeaseAttempt(const std::string& run_id, int expected_attempt, const Fence& f);
inline constexpr char kLeaseAttemptMovedPayload[] = "runloom/lease-attempt-moved";

// True when `w` only appends events and maybe moves the phase (a step
// start): a lease's own statements can carry it.
bool RidesOnLease(const RunWrite& w);

// ListRuns' argument checks (kInvalidArgument for a combination the
// filter's fields refuse).
absl::Status CheckRunFilter(const RunFilter& filter);
// Whether the run an idempotency-key lookup found passes the filter's other
// fields (status, parent, tenant, input value, created_since).
bool PassesKeyedFilter(const RunFilter& filter, const RunRecord& run);
// RunFilter::input_value's test, as the stores' SQL does it.
bool MatchesInputValue(const RunRecord& run, const std::string& value);

}  // namespace runloom::store_internal
