// What every backend shares of the signal mailbox (SignalStore,
// include/runloom/store.h): the argument checks, the row codec, the events
// SendSignal appends, and the commit that queues the run whose wait a signal
// resolves. Each backend runs these inside its own transaction, under the
// run's row lock (PostgreSQL) or its one writer (SQLite), so a signal, a
// timer and a cancel race through one compare-and-set on the run.
//
// Thread-safety: stateless functions.
#pragma once

#include "runloom/store.h"

#include "store/record_codec.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#include <string>
#include <vector>

namespace runloom::store_internal {

// The columns a SignalRecord is read from, in SignalFromRow's order.
#define RUNLOOM_SIGNAL_COLUMNS \
  "run_id, seq, name, payload, idempotency_key, received_at, consumed_by, consumed_at"

// Bounds of what a mailbox keeps (the engine checks them first, with the
// field named; these hold for every caller of the store).
inline constexpr size_t kMaxSignalName = 128;
inline constexpr size_t kMaxSignalPayloadBytes = 64 * 1024;
inline constexpr size_t kMaxSignalIdempotencyKey = 200;

template <typename Row>
absl::StatusOr<SignalRecord> SignalFromRow(const Row& row) {
  SignalRecord s;
  s.run_id = row.ColumnText(0);
  s.seq = row.ColumnInt(1);
  s.name = row.ColumnText(2);
  RUNLOOM_ASSIGN_OR_RETURN(s.payload, ParseJson(row.ColumnText(3),
                                                absl::StrCat("signals.payload of run ", s.run_id,
                                                             " seq ", s.seq)));
  s.idempotency_key = row.ColumnText(4);
  s.received_at = row.ColumnTime(5);
  if (!row.ColumnIsNull(6)) s.consumed_by = row.ColumnText(6);
  s.consumed_at = row.ColumnOptionalTime(7);
  return s;
}

// The signal's checks and its payload's JSON text: kInvalidArgument for an
// empty or over-long name or key, or a payload over kMaxSignalPayloadBytes.
absl::StatusOr<std::string> EncodeNewSignal(const NewSignal& signal);

// The events SendSignal appends for signal `seq`: `signal.events`, each
// with "seq" and "resolved" in its data, then `signal.wake_events` as they
// are when it resolved the wait.
std::vector<Event> SignalEvents(const NewSignal& signal, int64_t seq, bool resolved);

// The commit that queues a run whose wait signal `seq` resolved
// (Party::kSignal, waiting -> queued), with `events`.
RunWrite SignalWakeWrite(const std::string& run_id, std::vector<Event> events);

// The record SendSignal inserted.
SignalRecord InsertedSignal(const NewSignal& signal, int64_t seq, absl::Time now,
                            const std::string& consumed_by);

// kFailedPrecondition for a finished run; kResourceExhausted for a full
// mailbox (`unconsumed` signals in it).
absl::Status CheckSignalable(const std::string& run_id, RunStatus status, int64_t unconsumed);

// kAlreadyExists: the refusal of a move to waiting for `signal` while signal
// `seq` of that name is in the mailbox (RunWrite::wait_for_signal).
absl::Status MailboxNotEmpty(const std::string& run_id, const std::string& signal, int64_t seq);

}  // namespace runloom::store_internal
