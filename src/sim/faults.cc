#include "sim/faults.h"

#include "runloom/status.h"

#include "core/status_macros.h"

#include "absl/strings/str_cat.h"

namespace runloom::sim {
namespace {
std::string Name(RunStatus s) { return std::string(ToString(s)); }
}  // namespace

absl::Status FaultStore::Before(const char* what, bool writes) {
  ++faults_->operations;
  auto crashed = [&] {
    return absl::UnavailableError(absl::StrCat(inc_->name, " crashed; ", what, " never sent"));
  };
  if (!inc_->alive) return crashed();
  if (!injects_ || !faults_->on) {
    ++faults_->calls_returned;
    return absl::OkStatus();
  }
  Rng& rng = world_->rng();
  if (rng.Chance(faults_->rates.stop)) {
    ++faults_->faults;
    inc_->paused_until = world_->now() + faults_->rates.stop_for;
    world_->Record(absl::StrCat(world_->Stamp(), " ", inc_->name, " stopped before ", what, " for ",
                                absl::FormatDuration(faults_->rates.stop_for)));
    world_->AdvanceTo(inc_->paused_until);
    world_->Record(absl::StrCat(world_->Stamp(), " ", inc_->name, " wakes, calls ", what));
  } else if (rng.Chance(faults_->rates.slow)) {
    world_->AdvanceTo(world_->now() + rng.Millis(1, 400));
  }
  if (!inc_->alive) return crashed();
  if (rng.Chance(writes ? faults_->rates.store_fail : faults_->rates.store_fail / 2)) {
    ++faults_->faults;
    world_->Record(absl::StrCat(world_->Stamp(), " ", inc_->name, " ", what, " fails (injected)"));
    return absl::UnavailableError(absl::StrCat("injected: ", what, " failed before the store"));
  }
  ++faults_->calls_returned;
  return absl::OkStatus();
}

bool FaultStore::ReplyLost(const char* what) {
  if (!injects_ || !faults_->on || !world_->rng().Chance(faults_->rates.lost_reply)) return false;
  ++faults_->faults;
  world_->Record(
      absl::StrCat(world_->Stamp(), " ", inc_->name, " ", what, " applied, reply lost (injected)"));
  return true;
}

void FaultStore::CheckFenced(const char* what, const RunRecord& before, const std::string& token) {
  // The token is the fence: until another lease is taken, an expired
  // lease's token is still the current one (the store compares tokens, and
  // RenewLease alone also asks for a live lease).
  if (token.empty() || token != before.lease_token || before.status != RunStatus::kRunning) {
    world_->Violate(absl::StrCat(
        "stale write accepted: ", what, " by ", inc_->name, " on run ", before.id, " (",
        Name(before.status),
        token == before.lease_token ? ", no lease held" : ", another lease's token", ")"));
  }
}

absl::StatusOr<CreateRunResult> FaultStore::CreateRun(const NewRun& run,
                                                      std::vector<Event> events) {
  if (absl::Status s = Before("CreateRun", true); !s.ok()) return s;
  return StoreWrapper::CreateRun(run, std::move(events));
}

absl::StatusOr<RunRecord> FaultStore::GetRun(const std::string& run_id) {
  if (absl::Status s = Before("GetRun", false); !s.ok()) return s;
  return StoreWrapper::GetRun(run_id);
}

// The executor's check of a run's pinned workflow (PinnedCatalog): a
// failed read must leave the run to be tried again, not fail it.
absl::StatusOr<WorkflowVersion> FaultStore::GetWorkflow(const std::string& name, int64_t version) {
  if (absl::Status s = Before("GetWorkflow", false); !s.ok()) return s;
  return StoreWrapper::GetWorkflow(name, version);
}

absl::StatusOr<Lease> FaultStore::AcquireLease(LeaseRequest request) {
  if (absl::Status s = Before("AcquireLease", true); !s.ok()) return s;
  absl::StatusOr<RunRecord> before = base_->GetRun(request.run_id);
  const std::string run_id = request.run_id;
  const bool had_first = request.first.has_value();
  const bool first_parks = had_first && request.first->new_status == RunStatus::kWaiting;
  absl::StatusOr<Lease> lease = StoreWrapper::AcquireLease(std::move(request));
  if (lease.status().code() == absl::StatusCode::kResourceExhausted) {
    // Over its concurrency limit: nothing of the run written, no attempt
    // spent (issue 23).
    ++faults_->over_limit;
    absl::StatusOr<RunRecord> after = base_->GetRun(run_id);
    if (before.ok() && after.ok() &&
        (after->attempts != before->attempts || after->last_event_seq != before->last_event_seq ||
         after->status != before->status || after->lease_token != before->lease_token)) {
      world_->Violate(absl::StrCat("a lease refused over its concurrency limit changed run ",
                                   run_id, ": attempts ", before->attempts, " -> ",
                                   after->attempts, ", events ", before->last_event_seq, " -> ",
                                   after->last_event_seq));
    }
  }
  if (lease.ok() && before.ok() && !before->concurrency_key.empty()) ++faults_->keyed_leases;
  if (lease.ok() && first_parks && lease->first_write_applied) {
    // A first execution whose first write parks the run (a long sleep first).
    ++faults_->parks;
    absl::StatusOr<RunRecord> after = base_->GetRun(run_id);
    if (after.ok() && (!after->lease_token.empty() || !after->wake_at.has_value())) {
      world_->Violate(absl::StrCat("run ", run_id, " parked with a lease or without a wake time"));
    }
  }
  if (lease.ok() && before.ok()) {
    if (before->status == RunStatus::kRunning && before->lease_expires_at.has_value() &&
        *before->lease_expires_at > world_->now()) {
      world_->Violate(absl::StrCat("lease taken while another is live: run ", run_id, " by ",
                                   inc_->name, " (held by ", before->lease_owner, ")"));
    }
    if (FindTransition(before->status, RunStatus::kRunning, Party::kExecutor) == nullptr) {
      world_->Violate(absl::StrCat("lease taken on a ", Name(before->status), " run ", run_id));
    }
  }
  if (lease.ok() && ReplyLost(had_first ? "AcquireLease+first write" : "AcquireLease")) {
    return absl::UnavailableError("injected: AcquireLease's reply lost");
  }
  return lease;
}

absl::StatusOr<RunRecord> FaultStore::RenewLease(const std::string& run_id,
                                                 const std::string& token, absl::Duration ttl) {
  if (absl::Status s = Before("RenewLease", true); !s.ok()) return s;
  absl::StatusOr<RunRecord> before = base_->GetRun(run_id);
  absl::StatusOr<RunRecord> r = StoreWrapper::RenewLease(run_id, token, ttl);
  if (r.ok() && before.ok()) CheckFenced("RenewLease", *before, token);
  if (r.ok() && ReplyLost("RenewLease")) return absl::UnavailableError("injected: reply lost");
  return r;
}

absl::Status FaultStore::Commit(const RunWrite& write) {
  if (absl::Status s = Before("Commit", true); !s.ok()) return s;
  absl::StatusOr<RunRecord> before = base_->GetRun(write.run_id);
  absl::Status s = StoreWrapper::Commit(write);
  if (s.ok() && before.ok()) {
    const Transition* t = nullptr;
    if (write.new_status.has_value()) {
      t = FindTransition(before->status, *write.new_status, write.party);
      if (t == nullptr) {
        world_->Violate(absl::StrCat("a write outside the transition table was accepted: run ",
                                     write.run_id, " ", Name(before->status), " -> ",
                                     Name(*write.new_status), " by party ",
                                     static_cast<int>(write.party)));
      }
    }
    if (write.party == Party::kExecutor || (t != nullptr && t->needs_lease_token)) {
      CheckFenced("Commit", *before, write.lease_token);
    }
    // A timer is woken only once it is due, by the store's clock (the
    // world's here), and a parked run holds no lease.
    if (t != nullptr && before->status == RunStatus::kWaiting && write.party == Party::kTimer &&
        (!before->wake_at.has_value() || *before->wake_at > world_->now())) {
      world_->Violate(absl::StrCat("run ", write.run_id, " was woken before its timer was due"));
    }
    if (t != nullptr && write.party == Party::kTimer) ++faults_->wakes;
    if (write.new_status == RunStatus::kWaiting) {
      ++faults_->parks;
      if (write.wait_for_signal.has_value()) ++faults_->signal_parks;
      absl::StatusOr<RunRecord> after = base_->GetRun(write.run_id);
      if (after.ok() && (!after->lease_token.empty() ||
                         (!after->wake_at.has_value() && after->wait_signal.empty()))) {
        world_->Violate(absl::StrCat("run ", write.run_id,
                                     " parked with a lease, or with neither a wake time nor a "
                                     "signal to wait for"));
      }
    }
  }
  if (s.ok() && ReplyLost("Commit")) return absl::UnavailableError("injected: Commit's reply lost");
  return s;
}

absl::StatusOr<std::vector<StepRecord>> FaultStore::ListSteps(const std::string& run_id,
                                                              std::optional<int64_t> revision) {
  if (absl::Status s = Before("ListSteps", false); !s.ok()) return s;
  return StoreWrapper::ListSteps(run_id, revision);
}

absl::StatusOr<std::vector<RecoveryCandidate>> FaultStore::FindRecoverable(
    absl::Duration queued_grace, int limit) {
  if (absl::Status s = Before("FindRecoverable", false); !s.ok()) return s;
  return StoreWrapper::FindRecoverable(queued_grace, limit);
}

absl::StatusOr<std::vector<LiveLease>> FaultStore::ListLiveLeases(int limit) {
  if (absl::Status s = Before("ListLiveLeases", false); !s.ok()) return s;
  return StoreWrapper::ListLiveLeases(limit);
}

absl::Status FaultStore::ExpireLease(const std::string& run_id, const std::string& token) {
  if (absl::Status s = Before("ExpireLease", true); !s.ok()) return s;
  // Restart recovery's promise (issue 27): a lease is ended before its
  // expiry only when its holder is dead; a live one (a stopped one too)
  // keeps it until it expires.
  if (absl::StatusOr<RunRecord> run = base_->GetRun(run_id);
      run.ok() && run->status == RunStatus::kRunning && run->lease_token == token) {
    std::shared_ptr<Incarnation> holder = world_->Find(run->lease_owner);
    if (holder != nullptr && holder->alive) {
      world_->Violate(absl::StrCat("the live lease of run ", run_id, " held by ", run->lease_owner,
                                   ", alive, was ended early by ", inc_->name));
    }
  }
  absl::Status s = StoreWrapper::ExpireLease(run_id, token);
  if (s.ok()) ++faults_->leases_ended;
  if (s.ok() && ReplyLost("ExpireLease")) return absl::UnavailableError("injected: reply lost");
  return s;
}

absl::StatusOr<std::vector<std::string>> FaultStore::FindCancelRequested(
    const std::vector<std::string>& run_ids) {
  if (absl::Status s = Before("FindCancelRequested", false); !s.ok()) return s;
  return StoreWrapper::FindCancelRequested(run_ids);
}

absl::Status FaultStore::Enqueue(const std::string& run_id, std::vector<Event> events) {
  if (absl::Status s = Before("Enqueue", true); !s.ok()) return s;
  absl::Status s = StoreWrapper::Enqueue(run_id, std::move(events));
  if (s.ok() && ReplyLost("Enqueue")) return absl::UnavailableError("injected: reply lost");
  return s;
}

absl::StatusOr<BeginWriteResult> FaultStore::BeginWrite(const WriteIntent& intent) {
  if (absl::Status s = Before("BeginWrite", true); !s.ok()) return s;
  absl::StatusOr<RunRecord> before = base_->GetRun(intent.key.run_id);
  absl::StatusOr<BeginWriteResult> r = StoreWrapper::BeginWrite(intent);
  if (r.ok() && before.ok()) CheckFenced("BeginWrite", *before, intent.lease_token);
  if (r.ok() && ReplyLost("BeginWrite")) return absl::UnavailableError("injected: reply lost");
  return r;
}

absl::StatusOr<WriteOperation> FaultStore::FinishWrite(const WriteKey& key,
                                                       const WriteResult& result) {
  if (absl::Status s = Before("FinishWrite", true); !s.ok()) return s;
  absl::StatusOr<WriteOperation> r = StoreWrapper::FinishWrite(key, result);
  if (r.ok() && ReplyLost("FinishWrite")) return absl::UnavailableError("injected: reply lost");
  return r;
}

absl::StatusOr<ReserveResult> FaultStore::Reserve(const BudgetRequest& request) {
  if (absl::Status s = Before("Reserve", true); !s.ok()) return s;
  absl::StatusOr<RunRecord> before = base_->GetRun(request.key.run_id);
  absl::StatusOr<std::vector<Reservation>> held = base_->ListReservations(request.key.run_id);
  absl::StatusOr<ReserveResult> r = StoreWrapper::Reserve(request);
  if (r.ok() && r->granted && before.ok()) {
    CheckFenced("Reserve", *before, request.key.lease_token);
    // An earlier lease's reservations go back before the new lease reserves
    // (the executor that held it is gone): none may still be held now.
    for (const Reservation& old : held.ok() ? *held : std::vector<Reservation>{}) {
      if (old.state == ReservationState::kReserved &&
          old.key.lease_token != request.key.lease_token) {
        world_->Violate(absl::StrCat("run ", request.key.run_id, " reserved under a new lease (",
                                     inc_->name, ") while a reservation of an earlier lease, ",
                                     old.key.step_path, " attempt ", old.key.attempt,
                                     ", was still held"));
        break;
      }
    }
  }
  if (r.ok() && ReplyLost("Reserve")) return absl::UnavailableError("injected: reply lost");
  return r;
}

absl::StatusOr<Reservation> FaultStore::SettleReservation(const BudgetKey& key,
                                                          int64_t cost_micros) {
  if (absl::Status s = Before("SettleReservation", true); !s.ok()) return s;
  absl::StatusOr<Reservation> r = StoreWrapper::SettleReservation(key, cost_micros);
  if (r.ok() && ReplyLost("SettleReservation")) return absl::UnavailableError("injected: lost");
  return r;
}

absl::StatusOr<int64_t> FaultStore::ReleaseReservations(const std::string& run_id) {
  if (absl::Status s = Before("ReleaseReservations", true); !s.ok()) return s;
  absl::StatusOr<int64_t> r = StoreWrapper::ReleaseReservations(run_id);
  if (r.ok() && ReplyLost("ReleaseReservations")) return absl::UnavailableError("injected: lost");
  return r;
}

// Retention (issue 25): a batch refused before it ran, or committed with
// its reply lost (the next pass finds nothing of it left to delete).
absl::StatusOr<PruneResult> FaultStore::PruneRuns(const PruneRequest& request) {
  if (absl::Status s = Before("PruneRuns", true); !s.ok()) return s;
  absl::StatusOr<PruneResult> r = StoreWrapper::PruneRuns(request);
  if (r.ok() && ReplyLost("PruneRuns")) return absl::UnavailableError("injected: reply lost");
  return r;
}

// A signal (issue 23): kept, and when it resolves a wait, only for a run
// resting waiting for a signal of its name; a finished run keeps none.
absl::StatusOr<SendSignalResult> FaultStore::SendSignal(const NewSignal& signal) {
  if (absl::Status s = Before("SendSignal", true); !s.ok()) return s;
  absl::StatusOr<RunRecord> before = base_->GetRun(signal.run_id);
  absl::StatusOr<SendSignalResult> r = StoreWrapper::SendSignal(signal);
  if (r.ok() && before.ok() && r->created) {
    ++faults_->signals_kept;
    if (IsTerminal(before->status)) {
      world_->Violate(absl::StrCat("signal ", signal.name, " kept for run ", signal.run_id,
                                   ", which is ", Name(before->status)));
    }
    const bool waits_for_it =
        before->status == RunStatus::kWaiting && before->wait_signal == signal.name;
    if (r->resolved != waits_for_it) {
      world_->Violate(absl::StrCat("signal ", signal.name, " (seq ", r->signal.seq, ") of run ",
                                   signal.run_id, r->resolved ? " resolved" : " did not resolve",
                                   " a run ", Name(before->status), " waiting for '",
                                   before->wait_signal, "'"));
    }
    if (r->resolved) ++faults_->signals_resolved;
  }
  if (r.ok() && ReplyLost("SendSignal")) return absl::UnavailableError("injected: reply lost");
  return r;
}

absl::StatusOr<std::optional<SignalRecord>> FaultStore::NextSignal(const std::string& run_id,
                                                                   const std::string& name) {
  if (absl::Status s = Before("NextSignal", false); !s.ok()) return s;
  return StoreWrapper::NextSignal(run_id, name);
}

absl::StatusOr<std::optional<SignalRecord>> FaultStore::SignalConsumedBy(const std::string& run_id,
                                                                         const std::string& key) {
  if (absl::Status s = Before("SignalConsumedBy", false); !s.ok()) return s;
  return StoreWrapper::SignalConsumedBy(run_id, key);
}

absl::StatusOr<std::vector<QueueMessage>> FaultTransport::Claim(const std::string& consumer,
                                                                int max,
                                                                absl::Duration visibility) {
  ++faults_->operations;
  if (!inc_->alive) return absl::UnavailableError(absl::StrCat(inc_->name, " crashed"));
  absl::StatusOr<std::vector<QueueMessage>> msgs = base_->Claim(consumer, max, visibility);
  if (!msgs.ok() || msgs->empty() || !faults_->on) return msgs;
  Rng& rng = world_->rng();
  const QueueMessage& m = msgs->front();
  if (rng.Chance(faults_->rates.message_lost)) {
    ++faults_->faults;
    world_->Record(absl::StrCat(world_->Stamp(), " queue loses the message of ", m.run_id));
    base_->Ack(m).IgnoreError();  // gone: only the reconciler brings the run back
    return std::vector<QueueMessage>{};
  }
  if (rng.Chance(faults_->rates.message_delayed)) {
    ++faults_->faults;
    world_->Record(absl::StrCat(world_->Stamp(), " queue delays the message of ", m.run_id));
    base_->Release(m).IgnoreError();
    return std::vector<QueueMessage>{};
  }
  if (rng.Chance(faults_->rates.message_duplicated)) {
    ++faults_->faults;
    world_->Record(absl::StrCat(world_->Stamp(), " queue duplicates the message of ", m.run_id));
    base_->Publish(m.run_id).IgnoreError();
  }
  return msgs;
}

absl::Status FaultTransport::Ack(const QueueMessage& m) {
  ++faults_->operations;
  if (!inc_->alive) return absl::UnavailableError(absl::StrCat(inc_->name, " crashed"));
  return base_->Ack(m);
}

absl::Status FaultTransport::Release(const QueueMessage& m) {
  ++faults_->operations;
  if (!inc_->alive) return absl::UnavailableError(absl::StrCat(inc_->name, " crashed"));
  return base_->Release(m);
}

absl::StatusOr<steps_internal::Reply> SimService::Send(const steps_internal::Exchange& e) {
  std::shared_ptr<Incarnation> inc = world_->acting();
  if (inc == nullptr || !inc->alive) return absl::UnavailableError("connection refused");
  std::string key;
  for (const auto& [name, value] : e.headers) {
    if (name == "Idempotency-Key") key = value;
  }
  if (key.empty()) return steps_internal::Reply{400, R"({"error":"no Idempotency-Key"})"};
  if (e.method == "GET") {
    const bool applied = effects_.count(key) > 0;
    return steps_internal::Reply{applied ? 200 : 404, applied ? R"({"found":true})" : "{}"};
  }
  const int n = ++effects_[key];
  world_->Record(absl::StrCat(world_->Stamp(), " service applies ", key, " (effect ", n, ")"));
  if (faults_->on && world_->rng().Chance(faults_->rates.answer_dropped)) {
    ++faults_->faults;
    world_->Record(absl::StrCat(world_->Stamp(), " service drops the answer to ", key));
    return absl::UnavailableError("connection reset after the request was applied");
  }
  return steps_internal::Reply{201, absl::StrCat(R"({"applied":)", n, "}")};
}

absl::Status SimPublisher::Publish(const std::string& channel, const std::string& payload) {
  if (!inc_->alive) {
    connected_ = false;
    return absl::UnavailableError(absl::StrCat(inc_->name, " crashed; stage event not sent"));
  }
  if (faults_->on && world_->rng().Chance(faults_->rates.store_fail)) {
    ++faults_->faults;
    connected_ = false;
    world_->Record(absl::StrCat(world_->Stamp(), " ", inc_->name, " stage event to ", channel,
                                " fails (injected)"));
    return absl::UnavailableError("injected: the stage event's server is down");
  }
  connected_ = true;
  check_(inc_->name, channel, payload);
  return absl::OkStatus();
}

absl::Status FaultCapBoard::Before(const char* what) {
  auto crashed = [&] {
    return absl::UnavailableError(absl::StrCat(inc_->name, " crashed; ", what, " never sent"));
  };
  if (!inc_->alive) return crashed();
  if (!faults_->on) return absl::OkStatus();
  Rng& rng = world_->rng();
  if (rng.Chance(faults_->rates.stop)) {
    ++faults_->faults;
    inc_->paused_until = world_->now() + faults_->rates.stop_for;
    world_->Record(absl::StrCat(world_->Stamp(), " ", inc_->name, " stopped before cap board ",
                                what, " for ", absl::FormatDuration(faults_->rates.stop_for)));
    world_->AdvanceTo(inc_->paused_until);
  } else if (rng.Chance(faults_->rates.slow)) {
    world_->AdvanceTo(world_->now() + rng.Millis(1, 400));
  }
  if (!inc_->alive) return crashed();
  if (rng.Chance(faults_->rates.store_fail)) {
    ++faults_->faults;
    world_->Record(
        absl::StrCat(world_->Stamp(), " ", inc_->name, " cap board ", what, " fails (injected)"));
    return absl::UnavailableError(absl::StrCat("injected: cap board ", what, " failed"));
  }
  return absl::OkStatus();
}

void FaultCapBoard::CheckCap(const char* what, int cap) {
  if (cap < 1 || cap > ledger_->max_cap) {
    world_->Violate(absl::StrCat(inc_->name, " ", what, " the LLM cap ", cap, ", outside [1, ",
                                 ledger_->max_cap, "]"));
  }
}

absl::StatusOr<std::string> FaultCapBoard::Lead(const std::string& provider,
                                                const std::string& candidate,
                                                absl::Duration lease) {
  RUNLOOM_RETURN_IF_ERROR(Before("lead"));
  absl::StatusOr<std::string> holder = base_->Lead(provider, candidate, lease);
  if (!holder.ok()) return holder;
  const absl::Time now = world_->now();
  if (*holder != ledger_->holder) {
    if (!ledger_->holder.empty() && ledger_->expires > now) {
      world_->Violate(absl::StrCat(
          "two controllers hold the lease on the LLM cap of ", provider, ": ", ledger_->holder,
          " until ", absl::FormatDuration(ledger_->expires - now), " from now, and ", *holder));
    }
    ++ledger_->takeovers;
    world_->Record(absl::StrCat(world_->Stamp(), " ", *holder, " decides the LLM cap"));
    ledger_->holder = *holder;
  }
  if (*holder == candidate) ledger_->expires = now + lease;
  return holder;
}

absl::StatusOr<bool> FaultCapBoard::Publish(const std::string& provider, const std::string& leader,
                                            int cap, absl::Duration ttl) {
  RUNLOOM_RETURN_IF_ERROR(Before("publish"));
  absl::StatusOr<bool> published = base_->Publish(provider, leader, cap, ttl);
  if (!published.ok() || !*published) return published;
  if (leader != ledger_->holder || ledger_->expires <= world_->now()) {
    world_->Violate(absl::StrCat(leader, " published the LLM cap ", cap, " of ", provider,
                                 " without a live lease (the lease is ", ledger_->holder, "'s",
                                 ledger_->expires <= world_->now() ? ", expired" : "", ")"));
  }
  CheckCap("published", cap);
  ++ledger_->publications;
  return published;
}

absl::Status FaultCapBoard::Cut(const std::string& provider, int cap, absl::Duration ttl) {
  RUNLOOM_RETURN_IF_ERROR(Before("cut"));
  CheckCap("cut", cap);
  return base_->Cut(provider, cap, ttl);
}

absl::StatusOr<std::optional<int>> FaultCapBoard::Read(const std::string& provider) {
  RUNLOOM_RETURN_IF_ERROR(Before("read"));
  return base_->Read(provider);
}

absl::StatusOr<std::string> FaultCapBoard::Report(const std::string& provider,
                                                  const SenseReport& report) {
  RUNLOOM_RETURN_IF_ERROR(Before("report"));
  return base_->Report(provider, report);
}

absl::StatusOr<std::vector<SenseReport>> FaultCapBoard::ReadReports(const std::string& provider,
                                                                    std::string* after,
                                                                    int* malformed) {
  RUNLOOM_RETURN_IF_ERROR(Before("read reports"));
  return base_->ReadReports(provider, after, malformed);
}

}  // namespace runloom::sim
