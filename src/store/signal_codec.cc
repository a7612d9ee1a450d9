#include "store/signal_codec.h"

#include "absl/strings/str_cat.h"

#include <utility>

namespace runloom::store_internal {

absl::StatusOr<std::string> EncodeNewSignal(const NewSignal& signal) {
  if (signal.run_id.empty()) return absl::InvalidArgumentError("NewSignal::run_id is empty");
  if (signal.name.empty() || signal.name.size() > kMaxSignalName) {
    return absl::InvalidArgumentError(absl::StrCat("signal name must be 1 to ", kMaxSignalName,
                                                   " bytes, got ", signal.name.size()));
  }
  if (signal.idempotency_key.size() > kMaxSignalIdempotencyKey) {
    return absl::InvalidArgumentError(absl::StrCat("signal idempotency key is over ",
                                                   kMaxSignalIdempotencyKey, " bytes"));
  }
  RUNLOOM_ASSIGN_OR_RETURN(std::string text,
                           DumpJson(signal.payload, absl::StrCat("the payload of signal ",
                                                                 signal.name)));
  if (text.size() > kMaxSignalPayloadBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the payload of signal ", signal.name, " is ",
                                                   text.size(), " bytes, over the limit of ",
                                                   kMaxSignalPayloadBytes));
  }
  return text;
}

std::vector<Event> SignalEvents(const NewSignal& signal, int64_t seq, bool resolved) {
  std::vector<Event> out = signal.events;
  for (Event& e : out) {
    if (!e.data.is_object()) e.data = nlohmann::json::object();
    e.data["seq"] = seq;
    e.data["resolved"] = resolved;
  }
  // The wake events (run.resumed) are the run's, not the signal's: their
  // data stays as the caller built it.
  if (resolved) out.insert(out.end(), signal.wake_events.begin(), signal.wake_events.end());
  return out;
}

RunWrite SignalWakeWrite(const std::string& run_id, std::vector<Event> events) {
  RunWrite w;
  w.run_id = run_id;
  w.party = Party::kSignal;
  w.expected = {RunStatus::kWaiting};
  w.new_status = RunStatus::kQueued;
  w.reset_attempts = true;  // the wait was no failed attempt
  w.entry = RunEntry::kResume;
  w.events = std::move(events);
  return w;
}

SignalRecord InsertedSignal(const NewSignal& signal, int64_t seq, absl::Time now,
                            const std::string& consumed_by) {
  SignalRecord r;
  r.run_id = signal.run_id;
  r.seq = seq;
  r.name = signal.name;
  r.payload = signal.payload;
  r.idempotency_key = signal.idempotency_key;
  r.received_at = now;
  r.consumed_by = consumed_by;
  if (!consumed_by.empty()) r.consumed_at = now;
  return r;
}

absl::Status CheckSignalable(const std::string& run_id, RunStatus status, int64_t unconsumed) {
  if (IsTerminal(status)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "run ", run_id, " is ", StatusName(status), ": a finished run takes no signals"));
  }
  if (unconsumed >= SignalStore::kMaxMailbox) {
    return absl::ResourceExhaustedError(
        absl::StrCat("run ", run_id, " has ", unconsumed,
                     " signals not yet consumed, the most its mailbox keeps; send again once "
                     "its waits consume them"));
  }
  return absl::OkStatus();
}

absl::Status MailboxNotEmpty(const std::string& run_id, const std::string& signal, int64_t seq) {
  return absl::AlreadyExistsError(absl::StrCat("run ", run_id, ": signal ", signal, " (seq ", seq,
                                               ") is in its mailbox; consume it, do not wait"));
}

}  // namespace runloom::store_internal
