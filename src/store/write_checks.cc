#include "store/write_checks.h"

#include "core/injected_bug.h"
#include "core/status_macros.h"
#include "store/record_codec.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <utility>

namespace runloom::store_internal {
namespace {

// Checks the step records of a write and serializes their outputs.
absl::StatusOr<std::vector<std::string>> EncodeSteps(const std::string& run_id,
                                                     const std::vector<StepRecord>& steps) {
  std::vector<std::string> outputs;
  outputs.reserve(steps.size());
  for (const StepRecord& s : steps) {
    if (!s.run_id.empty() && s.run_id != run_id) {
      return absl::InvalidArgumentError(absl::StrCat("step record ", s.path, " names run ",
                                                     s.run_id, " but is written to run ", run_id));
    }
    if (s.path.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("a step record for run ", run_id, " has an empty path"));
    }
    RUNLOOM_ASSIGN_OR_RETURN(std::string output,
                             DumpJson(s.output, absl::StrCat("output of step ", s.path)));
    outputs.push_back(std::move(output));
  }
  return outputs;
}

}  // namespace

absl::Status CheckEvents(const std::string& run_id, const std::vector<Event>& events) {
  for (const Event& e : events) {
    if (e.type.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("an event for run ", run_id, " has an empty type"));
    }
    if (!e.run_id.empty() && e.run_id != run_id) {
      return absl::InvalidArgumentError(absl::StrCat("event ", e.type, " names run ", e.run_id,
                                                     " but is written to run ", run_id));
    }
    if (!e.data.is_null() && !e.data.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("event ", e.type, " for run ", run_id, " has non-object data"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<EncodedEvent>> EncodeEvents(const std::string& run_id,
                                                       const std::vector<Event>& events) {
  RUNLOOM_RETURN_IF_ERROR(CheckEvents(run_id, events));
  std::vector<EncodedEvent> out;
  out.reserve(events.size());
  for (const Event& e : events) {
    EncodedEvent enc{e.type, e.schema_version, ""};
    if (e.data.is_null()) {
      enc.data = "{}";
    } else {
      RUNLOOM_ASSIGN_OR_RETURN(enc.data, DumpJson(e.data, "event data"));
    }
    out.push_back(std::move(enc));
  }
  return out;
}

absl::Status CheckTtl(absl::Duration ttl) {
  if (ttl <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease ttl must be positive, got ", absl::FormatDuration(ttl)));
  }
  return absl::OkStatus();
}

absl::Time LeaseDeadline(absl::Time now, absl::Duration ttl) {
  return FromMicros(ToMicros(now + ttl));
}

std::string StatusList(const std::vector<RunStatus>& statuses) {
  return absl::StrJoin(statuses, ", ",
                       [](std::string* out, RunStatus s) { out->append(StatusName(s)); });
}

// The fence checks of a RunWrite, before anything is written.
absl::Status CheckFence(const RunWrite& w, const Fence& f) {
  const std::string& id = w.run_id;
  if (!w.expected.empty()) {
    bool match = false;
    for (RunStatus s : w.expected) match = match || s == f.status;
    if (!match) {
      return absl::AbortedError(absl::StrCat("run ", id, " is ", StatusName(f.status),
                                             ", expected ", StatusList(w.expected)));
    }
  }
  if (w.party == Party::kExecutor && f.status != RunStatus::kRunning) {
    return absl::AbortedError(absl::StrCat("stale lease token for run ", id, ": the run is ",
                                           StatusName(f.status), ", no lease is held"));
  }
  const bool token_required = w.party == Party::kExecutor || !w.lease_token.empty();
  const bool check_token = !RUNLOOM_INJECTED_BUG(InjectedBug::kStoreSkipsTokenCheck);
  if (check_token && token_required && (w.lease_token.empty() || w.lease_token != f.lease_token)) {
    return absl::AbortedError(absl::StrCat("stale lease token for run ", id,
                                           ": the lease is now held by '", f.lease_owner,
                                           "'; stop executing this run"));
  }
  if (w.expected_last_event_seq.has_value() && *w.expected_last_event_seq != f.last_event_seq) {
    return absl::AbortedError(
        absl::StrCat("run ", id, " changed since it was read: its last event is ", f.last_event_seq,
                     ", expected ", *w.expected_last_event_seq, "; re-read it and retry"));
  }
  // A timer wakes a run only once its wake time has come by the store's
  // clock, read in this commit: a run the sweeper found due, and that was
  // woken and parked again at a later time since, is not woken early
  // (simulation seed 296).
  if (w.party == Party::kTimer && !f.wake_due &&
      !RUNLOOM_INJECTED_BUG(InjectedBug::kTimerDueEarly)) {
    return absl::AbortedError(
        absl::StrCat("run ", id, ": its wake time has not come; a timer may not wake it yet"));
  }
  if (w.refuse_if_cancel_requested && f.cancel_requested) {
    return absl::CancelledError(absl::StrCat("run ", id, " has a cancel request; stop it"));
  }
  if (w.new_status.has_value()) {
    const Transition* t = FindTransition(f.status, *w.new_status, w.party);
    if (t == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("run ", id, ": ", PartyName(w.party), " may not move a run from ",
                       StatusName(f.status), " to ", StatusName(*w.new_status)));
    }
    if (check_token && t->needs_lease_token && w.lease_token != f.lease_token) {
      return absl::AbortedError(absl::StrCat("stale lease token for run ", id));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<EncodedWrite> EncodeWrite(const RunWrite& write) {
  // A wait needs its wake time or its signal (or both), and only a wait has
  // either.
  const bool waits = write.new_status == RunStatus::kWaiting;
  const bool for_something = write.wake_at.has_value() || write.wait_for_signal.has_value();
  if (waits != for_something) {
    return absl::InvalidArgumentError(absl::StrCat(
        "run ", write.run_id, ": ",
        waits ? "a move to waiting needs RunWrite::wake_at or RunWrite::wait_for_signal"
              : "RunWrite::wake_at or wait_for_signal is set, but the write does not move the "
                "run to waiting"));
  }
  if (write.wait_for_signal.has_value() &&
      (write.wait_for_signal->signal.empty() || write.wait_for_signal->key.empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat("run ", write.run_id, ": a wait for a signal needs its name and its key"));
  }
  if (write.consume_signal.has_value() &&
      (write.party != Party::kExecutor || write.consume_signal->key.empty() ||
       write.consume_signal->seq <= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "run ", write.run_id, ": only the executor consumes a signal, by its seq and a key"));
  }
  EncodedWrite out;
  RUNLOOM_ASSIGN_OR_RETURN(out.events, EncodeEvents(write.run_id, write.events));
  RUNLOOM_ASSIGN_OR_RETURN(out.step_outputs, EncodeSteps(write.run_id, write.steps));
  if (write.context.has_value()) {
    RUNLOOM_ASSIGN_OR_RETURN(
        out.context, DumpJson(*write.context, absl::StrCat("context of run ", write.run_id)));
  }
  return out;
}

absl::Status CheckLeaseArgs(const std::string& run_id, const std::string& owner, absl::Duration ttl,
                            const std::vector<Event>& events) {
  if (owner.empty()) return absl::InvalidArgumentError("lease owner is empty");
  RUNLOOM_RETURN_IF_ERROR(CheckTtl(ttl));
  return CheckEvents(run_id, events);
}

absl::StatusOr<LeaseFirstWrite> PrepareLease(LeaseRequest& request) {
  RUNLOOM_RETURN_IF_ERROR(
      CheckLeaseArgs(request.run_id, request.owner, request.ttl, request.events));
  if (request.expected_attempt < 0) {
    return absl::InvalidArgumentError(absl::StrCat("run ", request.run_id,
                                                   ": expected_attempt must be 0 (any) or more"));
  }
  LeaseFirstWrite out;
  RUNLOOM_ASSIGN_OR_RETURN(out.events, EncodeEvents(request.run_id, request.events));
  if (!request.first.has_value()) return out;
  out.write = std::move(request.first);
  request.first.reset();
  out.write->run_id = request.run_id;
  out.write->party = Party::kExecutor;
  // A lease's first write starts a step: the mailbox is no part of it.
  if (out.write->wait_for_signal.has_value() || out.write->consume_signal.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("run ", request.run_id, ": a lease's first write may not wait for or consume "
                     "a signal"));
  }
  RUNLOOM_ASSIGN_OR_RETURN(out.encoded, EncodeWrite(*out.write));
  return out;
}

// True when `w` only appends events and maybe moves the phase (a step
// start): the lease's own statements can carry it.
absl::Status CheckLeasable(const std::string& run_id, const Fence& f, absl::Time now) {
  if (FindTransition(f.status, RunStatus::kRunning, Party::kExecutor) == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("run ", run_id, " is ", StatusName(f.status),
                     "; only a queued run or a running run whose lease expired can be leased"));
  }
  if (f.status == RunStatus::kRunning && f.lease_expires_at.has_value() &&
      *f.lease_expires_at > now && !RUNLOOM_INJECTED_BUG(InjectedBug::kLeaseTakenWhileLive)) {
    return absl::AbortedError(absl::StrCat("run ", run_id, " is leased by '", f.lease_owner,
                                           "' until ", absl::FormatTime(*f.lease_expires_at)));
  }
  return absl::OkStatus();
}

absl::Status OverConcurrencyLimit(const std::string& run_id, const Fence& f, int64_t running) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "run ", run_id, " is over its concurrency limit: ", running, " run(s) of key '",
      f.concurrency_key, "' are running and its limit is ", f.concurrency_limit,
      "; it stays queued (no lease, no attempt) until one of them stops running"));
}

absl::Status CheckNewRun(const NewRun& run) {
  RUNLOOM_RETURN_IF_ERROR(RequireNonEmpty(run.id, "run id"));
  RUNLOOM_RETURN_IF_ERROR(RequireNonEmpty(run.workflow_name, "workflow name of a new run"));
  if (!run.parent_run_id.empty() && run.idempotency_key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "child run ", run.id, " of ", run.parent_run_id,
        " has no idempotency key; a child run needs one (its parent's resume must find it)"));
  }
  if (run.max_attempts < 1) {
    return absl::InvalidArgumentError(absl::StrCat("run ", run.id, " has max_attempts ",
                                                   run.max_attempts, "; it must be at least 1"));
  }
  if (run.concurrency_key.size() > kMaxConcurrencyKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat("run ", run.id, " has a concurrency key of ",
                                                   run.concurrency_key.size(),
                                                   " bytes; at most ", kMaxConcurrencyKeyBytes));
  }
  if (!run.concurrency_key.empty() &&
      (run.concurrency_limit < 1 || run.concurrency_limit > kMaxConcurrencyLimit)) {
    return absl::InvalidArgumentError(absl::StrCat("run ", run.id, " has concurrency limit ",
                                                   run.concurrency_limit, "; it must be from 1 to ",
                                                   kMaxConcurrencyLimit));
  }
  if (run.priority < 0 || run.priority > kMaxPriority) {
    return absl::InvalidArgumentError(absl::StrCat("run ", run.id, " has priority ", run.priority,
                                                   "; it must be from 0 to ", kMaxPriority));
  }
  return absl::OkStatus();
}

absl::Status CheckEnqueueable(const std::string& run_id, const Fence& f) {
  if (f.status == RunStatus::kPaused || f.status == RunStatus::kWaiting || IsTerminal(f.status)) {
    return absl::AbortedError(absl::StrCat("run ", run_id, " is ", StatusName(f.status),
                                           "; a paused, waiting or finished run is not enqueued"));
  }
  return absl::OkStatus();
}

absl::Status CheckLeaseAttempt(const std::string& run_id, int expected_attempt, const Fence& f) {
  if (expected_attempt == 0 || expected_attempt == f.attempts + 1) return absl::OkStatus();
  absl::Status s = absl::AbortedError(
      absl::StrCat("run ", run_id, " would be leased for attempt ", f.attempts + 1, ", not ",
                   expected_attempt, ": another lease came since it was read; read it again"));
  s.SetPayload(kLeaseAttemptMovedPayload, absl::Cord("1"));
  return s;
}

bool RidesOnLease(const RunWrite& w) {
  return !w.new_status.has_value() && w.steps.empty() && !w.outcome.has_value() &&
         !w.error.has_value() && !w.revision.has_value() && !w.entry.has_value() &&
         !w.context.has_value() && !w.cancel_requested.has_value() && !w.reset_attempts &&
         !w.expected_last_event_seq.has_value() && !w.wait_for_signal.has_value() &&
         !w.consume_signal.has_value();
}

absl::Status CheckRunFilter(const RunFilter& filter) {
  if (filter.after.has_value() && filter.updated_since.has_value()) {
    return absl::InvalidArgumentError("RunFilter: after and updated_since do not combine");
  }
  if (filter.idempotency_key.empty()) return absl::OkStatus();
  if (filter.workflow_name.empty()) {
    return absl::InvalidArgumentError(
        "RunFilter: idempotency_key needs workflow_name (a key is unique per workflow)");
  }
  if (filter.after.has_value() || filter.updated_since.has_value()) {
    return absl::InvalidArgumentError(
        "RunFilter: idempotency_key does not combine with after or updated_since");
  }
  return absl::OkStatus();
}

bool MatchesInputValue(const RunRecord& run, const std::string& value) {
  if (run.idempotency_key == value) return true;
  if (!run.inputs.is_object()) return false;
  for (const auto& [key, v] : run.inputs.items()) {
    if (v.is_string() && v.get_ref<const std::string&>() == value) return true;
    if (v.is_number_integer() && v.dump() == value) return true;
  }
  return false;
}

bool PassesKeyedFilter(const RunFilter& filter, const RunRecord& run) {
  // (Any limit, <= 0 meaning none, lets the one run through.)
  if (filter.status.has_value() && run.status != *filter.status) return false;
  if (!filter.parent_run_id.empty() && run.parent_run_id != filter.parent_run_id) return false;
  if (!filter.tenant.empty()) {
    const nlohmann::json* tenant = nullptr;
    if (run.context.is_object()) {
      auto budget = run.context.find("budget");
      if (budget != run.context.end() && budget->is_object()) {
        auto t = budget->find("tenant");
        if (t != budget->end()) tenant = &*t;
      }
    }
    if (tenant == nullptr || !tenant->is_string() || *tenant != filter.tenant) return false;
  }
  if (!filter.input_value.empty() && !MatchesInputValue(run, filter.input_value)) return false;
  return !filter.created_since.has_value() || run.created_at >= *filter.created_since;
}

}  // namespace runloom::store_internal
