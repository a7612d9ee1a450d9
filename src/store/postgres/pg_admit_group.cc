#include "store/postgres/pg_admit_group.h"

#include "core/status_macros.h"
#include "store/internal/group_leader.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <utility>

namespace runloom::store_internal {
namespace {

// Groups running at once, each on its own pooled connection. With one, a
// caller that arrives while a group runs waits for it and then for its own
// (two commits per admission): `runloom bench` with 2 processes admitted
// fewer runs per second than with a transaction per admission. 4 measured
// best of 1, 2 and 4 (docs/performance.md).
constexpr int kMaxLeaders = 4;

// Every run row, its events and its queue message in one statement (the
// message's fair group is its run's key: the run is queued). The
// foreign keys of the events and messages are checked at the statement's
// end, when the run rows are there. $1-$10 and $16-$18: the runs' columns;
// $11-$15: the events' (run id, seq, type, schema version, data).
constexpr char kAdmit[] =
    "WITH t AS (SELECT runloom_now() AS now), "
    "r AS (INSERT INTO runs (id, workflow_name, workflow_version, workflow_digest, status, "
    "inputs, inputs_digest, idempotency_key, phase, revision, entry, context, attempts, "
    "max_attempts, last_event_seq, created_at, updated_at, concurrency_key, concurrency_limit, "
    "priority) "
    "SELECT u.id, u.wf, u.ver, u.dig, 'queued', u.inputs, u.idig, '', u.phase, 1, 'fresh', "
    "u.ctx, 0, u.max, u.nev, t.now, t.now, u.ckey, u.clim, u.prio FROM t, unnest($1::text[], "
    "$2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], "
    "$9::integer[], $10::bigint[], $16::text[], $17::integer[], $18::integer[]) "
    "AS u(id, wf, ver, dig, inputs, idig, phase, ctx, max, nev, ckey, clim, prio) "
    "RETURNING id, concurrency_key, priority), "
    "e AS (INSERT INTO run_events (run_id, seq, type, schema_version, at, data) "
    "SELECT x.r, x.s, x.t, x.v, t.now, x.d FROM t, unnest($11::text[], $12::bigint[], "
    "$13::text[], $14::integer[], $15::text[]) AS x(r, s, t, v, d)), "
    "q AS (INSERT INTO queue (run_id, enqueued_at, visible_at, deliveries, claimed_by, "
    "fair_key, priority) SELECT r.id, t.now, t.now, 0, '', r.concurrency_key, r.priority "
    "FROM t, r) "
    "SELECT now FROM t";

}  // namespace

void PgAdmitGroup::Run(PgAdmission* a) {
  Writer w(a);
  mu_.Lock();
  auto can_lead = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return leaders_ < kMaxLeaders; };
  if (!QueueAndAwaitTurn(mu_, writers_, w, can_lead)) {
    mu_.Unlock();
    return;
  }
  ++leaders_;
  const size_t n = std::min(writers_.size(), kMaxGroup);
  std::vector<Writer*> group(writers_.begin(), writers_.begin() + static_cast<std::ptrdiff_t>(n));
  writers_.erase(writers_.begin(), writers_.begin() + static_cast<std::ptrdiff_t>(n));
  if (!writers_.empty() && leaders_ < kMaxLeaders) writers_.front()->cv.Signal();
  mu_.Unlock();

  RunGroup(group);

  mu_.Lock();
  for (Writer* g : group) {
    g->done = true;
    g->cv.Signal();  // the leader's own writer is not waiting: a no-op
  }
  --leaders_;
  if (!writers_.empty()) writers_.front()->cv.Signal();
  mu_.Unlock();
}

void PgAdmitGroup::RunGroup(const std::vector<Writer*>& group) {
  std::vector<PgAdmission*> all;
  all.reserve(group.size());
  for (Writer* g : group) all.push_back(g->admission);
  absl::Status s = Admit(all);
  if (group.size() > 1 && !s.ok() && s.code() != absl::StatusCode::kUnavailable) {
    // Nothing committed, and the connection is fine: one admission failed
    // the statement. Each alone finds its own outcome.
    for (PgAdmission* a : all) a->status = Admit({a});
    return;
  }
  for (PgAdmission* a : all) a->status = s;
}

absl::Status PgAdmitGroup::Admit(const std::vector<PgAdmission*>& group) {
  std::vector<std::string> id, wf, ver, dig, inputs, idig, phase, ctx, max, nev;
  std::vector<std::string> ev_run, ev_seq, ev_type, ev_version, ev_data;
  std::vector<std::string> ckey, clim, prio;
  for (const PgAdmission* a : group) {
    id.push_back(a->id);
    wf.push_back(a->workflow_name);
    ver.push_back(absl::StrCat(a->workflow_version));
    dig.push_back(a->workflow_digest);
    inputs.push_back(a->inputs);
    idig.push_back(a->inputs_digest);
    phase.push_back(a->phase);
    ctx.push_back(a->context);
    max.push_back(absl::StrCat(a->max_attempts));
    nev.push_back(absl::StrCat(a->events->size()));
    ckey.push_back(a->concurrency_key);
    clim.push_back(absl::StrCat(a->concurrency_limit));
    prio.push_back(absl::StrCat(a->priority));
    int64_t seq = 0;
    for (const EncodedEvent& e : *a->events) {
      ev_run.push_back(a->id);
      ev_seq.push_back(absl::StrCat(++seq));
      ev_type.push_back(e.type);
      ev_version.push_back(absl::StrCat(e.schema_version));
      ev_data.push_back(e.data);
    }
  }
  PgParams p;
  for (const std::vector<std::string>* column :
       {&id, &wf, &ver, &dig, &inputs, &idig, &phase, &ctx, &max, &nev, &ev_run, &ev_seq, &ev_type,
        &ev_version, &ev_data, &ckey, &clim, &prio}) {
    p.TextArray(*column);
  }
  absl::Time now;
  RUNLOOM_RETURN_IF_ERROR(h_->Txn([&](PgConn& c) -> absl::Status {
    // With BEGIN in one round trip; COMMIT and the wake-ups in the next.
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kAdmit, p));
    now = r.row(0).ColumnTime(0);
    return absl::OkStatus();
  }));
  for (PgAdmission* a : group) a->created_at = now;
  return absl::OkStatus();
}

}  // namespace runloom::store_internal
