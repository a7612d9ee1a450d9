#include "store/postgres/pg_write_batch.h"

#include "core/status_macros.h"
#include "store/event_check.h"
#include "store/postgres/pg_store.h"
#include "store/record_codec.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <utility>

namespace runloom::store_internal {
namespace {

constexpr char kUpsertSteps[] =
    "INSERT INTO step_records (" RUNLOOM_STEP_COLUMNS
    ") SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], "
    "$6::text[], $7::integer[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], "
    "$13::bigint[], $14::bigint[]) "
    "ON CONFLICT (run_id, revision, path) DO UPDATE SET step_id = EXCLUDED.step_id, "
    "kind = EXCLUDED.kind, phase = EXCLUDED.phase, attempt = EXCLUDED.attempt, "
    "state = EXCLUDED.state, output = EXCLUDED.output, error = EXCLUDED.error, "
    "error_class = EXCLUDED.error_class, stderr_tail = EXCLUDED.stderr_tail, "
    "started_at = EXCLUDED.started_at, finished_at = EXCLUDED.finished_at";
constexpr char kInsertEventsOfRuns[] =
    "INSERT INTO run_events (run_id, seq, type, schema_version, at, data) "
    "SELECT x.r, x.s, x.t, x.v, $6, x.d FROM unnest($1::text[], $2::bigint[], $3::text[], "
    "$4::integer[], $5::text[]) AS x(r, s, t, v, d)";
// A NULL keeps the column (the RunWrite field was not set); `fin` 1 sets
// finished_at, 2 clears it, 0 keeps it. A write that follows its run's lease
// in the batch carries the lease (owner, token, expiry, `inc` 1 for the
// attempt) in the same row update. `r.id = ANY($1)` lets the planner find
// the rows by the primary key: joined on `u.id` alone it hashed the array
// and scanned the whole table (a generic plan knows no row counts).
constexpr char kUpdateRuns[] =
    "UPDATE runs r SET status = u.status, outcome = COALESCE(u.outcome, r.outcome), "
    "error = COALESCE(u.error, r.error), phase = COALESCE(u.phase, r.phase), "
    "revision = COALESCE(u.revision, r.revision), entry = COALESCE(u.entry, r.entry), "
    "context = COALESCE(u.context, r.context), "
    "cancel_requested = COALESCE(u.cancel, r.cancel_requested), "
    "attempts = CASE WHEN u.reset THEN 0 ELSE r.attempts + u.inc END, "
    "lease_owner = CASE WHEN u.rel THEN '' ELSE COALESCE(u.owner, r.lease_owner) END, "
    "lease_token = CASE WHEN u.rel THEN '' ELSE COALESCE(u.token, r.lease_token) END, "
    "lease_expires_at = CASE WHEN u.rel THEN NULL ELSE COALESCE(u.expires, r.lease_expires_at) "
    "END, "
    "finished_at = CASE u.fin WHEN 1 THEN $19::bigint WHEN 2 THEN NULL ELSE r.finished_at END, "
    "wake_at = CASE WHEN u.status = 'waiting' THEN COALESCE(u.wake, r.wake_at) END, "
    "wait_signal = CASE WHEN u.status = 'waiting' THEN r.wait_signal END, "
    "wait_key = CASE WHEN u.status = 'waiting' THEN r.wait_key END, "
    "last_event_seq = u.last, updated_at = $19 "
    "FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], "
    "$7::text[], $8::text[], $9::integer[], $10::boolean[], $11::boolean[], $12::integer[], "
    "$13::bigint[], $14::text[], $15::text[], $16::bigint[], $17::integer[], $18::bigint[]) "
    "AS u(id, status, outcome, error, phase, revision, entry, context, cancel, reset, rel, fin, "
    "last, owner, token, expires, inc, wake) WHERE r.id = u.id AND r.id = ANY($1::text[])";
constexpr char kAcquire[] =
    "UPDATE runs r SET status = 'running', lease_owner = u.owner, lease_token = u.token, "
    "lease_expires_at = u.expires, attempts = r.attempts + 1, last_event_seq = u.last, "
    "updated_at = $6, finished_at = NULL FROM unnest($1::text[], $2::text[], $3::text[], "
    "$4::bigint[], $5::bigint[]) AS u(id, owner, token, expires, last) "
    "WHERE r.id = u.id AND r.id = ANY($1::text[])";
constexpr char kDeleteMessages[] = "DELETE FROM queue WHERE run_id = ANY($1::text[])";

// Defers `sql` with one text[] parameter per column, then `now` if set.
void DeferColumns(PgConn& c, const char* sql,
                  std::initializer_list<const std::vector<std::string>*> columns,
                  std::optional<absl::Time> now) {
  PgParams p;
  for (const std::vector<std::string>* column : columns) p.TextArray(*column);
  if (now.has_value()) p.Time(*now);
  c.Defer(sql, std::move(p));
}

std::string Micros(absl::Time t) { return absl::StrCat(absl::ToUnixMicros(t)); }
const char* Bool(bool b) { return b ? "true" : "false"; }

}  // namespace

absl::Status PgWriteBatch::Check(const RunWrite& write, const EncodedWrite& encoded,
                                 const Fence& f) {
  RUNLOOM_RETURN_IF_ERROR(CheckFence(write, f));
#ifdef RUNLOOM_TESTING
  for (const EncodedEvent& e : encoded.events) {
    RUNLOOM_RETURN_IF_ERROR(CheckEventOnWrite(write.run_id, e.type, e.schema_version, e.data));
  }
#else
  (void)encoded;
#endif
  return absl::OkStatus();
}

void PgWriteBatch::AddSteps(const RunWrite& write, const EncodedWrite& encoded) {
  Steps& t = steps_;
  for (size_t i = 0; i < write.steps.size(); ++i) {
    const StepRecord& s = write.steps[i];
    t.run_id.push_back(write.run_id);
    t.revision.push_back(absl::StrCat(s.revision));
    t.path.push_back(s.path);
    t.step_id.push_back(s.step_id);
    t.kind.push_back(s.kind);
    t.phase.push_back(s.phase);
    t.attempt.push_back(absl::StrCat(s.attempt));
    t.state.push_back(std::string(StepStateName(s.state)));
    t.output.push_back(encoded.step_outputs[i]);
    t.error.push_back(s.error);
    t.error_class.push_back(std::string(ErrorClassName(s.error_class)));
    t.stderr_tail.push_back(s.stderr_tail);
    t.started_at.push_back(Micros(s.started_at));
    t.finished_at.push_back(Micros(s.finished_at));
  }
}

void PgWriteBatch::AddEvents(const std::string& run_id, const std::vector<EncodedEvent>& events,
                             int64_t last_seq) {
  for (const EncodedEvent& e : events) {
    events_.run_id.push_back(run_id);
    events_.seq.push_back(absl::StrCat(++last_seq));
    events_.type.push_back(e.type);
    events_.schema_version.push_back(absl::StrCat(e.schema_version));
    events_.data.push_back(e.data);
  }
}

void PgWriteBatch::AddLease(const std::string& run_id, const std::string& owner,
                            const std::string& token, absl::Time expires,
                            const std::vector<EncodedEvent>& events, Fence* f) {
  AddEvents(run_id, events, f->last_event_seq);
  f->status = RunStatus::kRunning;
  f->lease_token = token;
  f->lease_owner = owner;
  f->lease_expires_at = expires;
  f->attempts += 1;
  f->last_event_seq += static_cast<int64_t>(events.size());
  leases_.id.push_back(run_id);
  leases_.owner.push_back(owner);
  leases_.token.push_back(token);
  leases_.expires.push_back(Micros(expires));
  leases_.last_event_seq.push_back(absl::StrCat(f->last_event_seq));
  // The lease now stands for the run's message (as on SQLite): a crashed
  // holder is recovered through lease expiry; the consumer's Ack is a no-op.
  unqueued_.push_back(run_id);
}

absl::Status PgWriteBatch::Add(PgConn& c, absl::Time now, const RunWrite& write,
                               const EncodedWrite& encoded, const Fence& f) {
  const std::string& id = write.run_id;
  const RunStatus to = write.new_status.value_or(f.status);
  const bool moves = write.new_status.has_value();
  const bool release = moves && (IsTerminal(to) || to == RunStatus::kPaused ||
                                 to == RunStatus::kWaiting || to == RunStatus::kQueued);
  int finished = 0;                              // keep
  if (moves) finished = IsTerminal(to) ? 1 : 2;  // set : clear
  // After this batch's lease of the run (a first write): the lease's
  // columns go in this write's row update, not in an update of their own.
  const bool with_lease = !leases_.id.empty() && leases_.id.back() == id;
  Runs& r = runs_;
  if (with_lease) {
    r.owner.push_back(std::move(leases_.owner.back()));
    r.token.push_back(std::move(leases_.token.back()));
    r.expires.push_back(std::move(leases_.expires.back()));
    r.inc.push_back("1");
    for (std::vector<std::string>* column :
         {&leases_.id, &leases_.owner, &leases_.token, &leases_.expires, &leases_.last_event_seq}) {
      column->pop_back();
    }
    if (finished == 0) finished = 2;  // as the lease's own update: not finished
  } else {
    r.owner.push_back(std::nullopt);
    r.token.push_back(std::nullopt);
    r.expires.push_back(std::nullopt);
    r.inc.push_back("0");
  }
  AddSteps(write, encoded);
  AddEvents(id, encoded.events, f.last_event_seq);
  const int64_t last = f.last_event_seq + static_cast<int64_t>(encoded.events.size());
  r.id.push_back(id);
  r.status.push_back(std::string(StatusName(to)));
  r.outcome.push_back(write.outcome);
  r.error.push_back(write.error);
  r.phase.push_back(write.phase);
  r.revision.push_back(write.revision.has_value()
                           ? std::optional<std::string>(absl::StrCat(*write.revision))
                           : std::nullopt);
  r.entry.push_back(write.entry.has_value()
                        ? std::optional<std::string>(ToString(*write.entry))
                        : std::nullopt);
  r.context.push_back(encoded.context);
  r.cancel_requested.push_back(write.cancel_requested.has_value()
                                   ? std::optional<std::string>(*write.cancel_requested ? "1" : "0")
                                   : std::nullopt);
  r.reset_attempts.push_back(Bool(write.reset_attempts));
  r.release.push_back(Bool(release));
  r.finished.push_back(absl::StrCat(finished));
  r.last_event_seq.push_back(absl::StrCat(last));
  r.wake.push_back(to == RunStatus::kWaiting && write.wake_at.has_value()
                       ? std::optional<std::string>(Micros(*write.wake_at))
                       : std::nullopt);
  if (moves && to == RunStatus::kQueued) {
    // After a lease of this batch: its message is replaced now, not deleted.
    unqueued_.erase(std::remove(unqueued_.begin(), unqueued_.end(), id), unqueued_.end());
    RUNLOOM_RETURN_IF_ERROR(PgEnsureQueueMessage(c, id, now).status());
  } else if (moves && (IsTerminal(to) || to == RunStatus::kPaused || to == RunStatus::kWaiting)) {
    unqueued_.push_back(id);  // a run that cannot be leased needs no message
  }
  return absl::OkStatus();
}

void PgWriteBatch::Defer(PgConn& c, absl::Time now) {
  if (!steps_.run_id.empty()) {
    const Steps& t = steps_;
    DeferColumns(
        c, kUpsertSteps,
        {&t.run_id, &t.revision, &t.path, &t.step_id, &t.kind, &t.phase, &t.attempt, &t.state,
         &t.output, &t.error, &t.error_class, &t.stderr_tail, &t.started_at, &t.finished_at},
        std::nullopt);
  }
  if (!events_.run_id.empty()) {
    const Events& e = events_;
    DeferColumns(c, kInsertEventsOfRuns, {&e.run_id, &e.seq, &e.type, &e.schema_version, &e.data}, now);
  }
  if (!leases_.id.empty()) {
    const Leases& l = leases_;
    DeferColumns(c, kAcquire, {&l.id, &l.owner, &l.token, &l.expires, &l.last_event_seq}, now);
  }
  if (!runs_.id.empty()) {
    const Runs& r = runs_;
    PgParams p;
    p.TextArray(r.id).TextArray(r.status).OptionalTextArray(r.outcome);
    p.OptionalTextArray(r.error).OptionalTextArray(r.phase).OptionalTextArray(r.revision);
    p.OptionalTextArray(r.entry).OptionalTextArray(r.context);
    p.OptionalTextArray(r.cancel_requested).TextArray(r.reset_attempts).TextArray(r.release);
    p.TextArray(r.finished).TextArray(r.last_event_seq).OptionalTextArray(r.owner);
    p.OptionalTextArray(r.token).OptionalTextArray(r.expires).TextArray(r.inc);
    p.OptionalTextArray(r.wake).Time(now);
    c.Defer(kUpdateRuns, std::move(p));
  }
  if (!unqueued_.empty()) c.Defer(kDeleteMessages, PgParams().TextArray(unqueued_));
}

}  // namespace runloom::store_internal
