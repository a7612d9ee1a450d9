#include "engine/schedules.h"

#include "core/injected_bug.h"
#include "core/log.h"
#include "core/status_macros.h"
#include "schedule/cron.h"
#include "schedule/fire_time.h"
#include "schedule/policy.h"
#include "workflow/inputs.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include <algorithm>
#include <vector>

namespace runloom::engine_internal {
namespace {

// Due schedules read a pass; the rest wait for the next pass.
constexpr int kSchedulesPerPass = 64;

absl::Status Field(const std::string& field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

std::string TickKey(const std::string& id, absl::Time tick) {
  return absl::StrCat("schedule:", id, ":", absl::ToUnixSeconds(tick));
}

bool Unfinished(const RunRecord& run) { return !IsTerminal(run.status); }

bool Transient(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsAborted(s) || absl::IsDeadlineExceeded(s) ||
         absl::IsInternal(s) || absl::IsDataLoss(s) || absl::IsUnknown(s) || absl::IsCancelled(s);
}

}  // namespace

absl::StatusOr<absl::Time> NextTick(const ScheduleRecord& s, absl::Time after) {
  RUNLOOM_ASSIGN_OR_RETURN(CronSpec spec, CronSpec::Parse(s.cron));
  RUNLOOM_ASSIGN_OR_RETURN(absl::TimeZone zone, LoadScheduleTimeZone(s.timezone));
  return NextFireTime(spec, zone, after);
}

absl::StatusOr<ScheduleRecord> CheckedSchedule(const ScheduleRequest& request,
                                               const Workflow* workflow, absl::Time now) {
  ScheduleRecord s;
  s.id = request.id;
  s.workflow = request.workflow;
  s.cron = request.cron;
  s.timezone = request.timezone.empty() ? "UTC" : request.timezone;
  s.overlap = request.overlap;
  s.catch_up = request.catch_up;
  if (absl::Status id = CheckScheduleId(s.id); !id.ok()) {
    return Field("id", absl::StrCat(id.message(), ", e.g. nightly-report"));
  }
  absl::StatusOr<CronSpec> spec = CronSpec::Parse(s.cron);
  if (!spec.ok()) return Field("cron", spec.status().message());
  absl::StatusOr<absl::TimeZone> zone = LoadScheduleTimeZone(s.timezone);
  if (!zone.ok()) return Field("timezone", zone.status().message());
  if (absl::Status p = CheckOverlapPolicy(s.overlap); !p.ok()) return Field("overlap", p.message());
  if (absl::Status p = CheckCatchUpPolicy(s.catch_up); !p.ok()) {
    return Field("catch_up", p.message());
  }
  if (workflow == nullptr) {
    return absl::NotFoundError(absl::StrCat("workflow: '", s.workflow,
                                            "' is not in the catalog; register it first "
                                            "(runloom run --detach FILE, or POST /api/v1/workflows)"));
  }
  // A schedule's inputs are stored and used by whichever process fires it.
  RUNLOOM_RETURN_IF_ERROR(CheckScheduleInputs(*workflow, request.inputs));
  s.inputs = request.inputs;
  s.next_fire_at = NextFireTime(*spec, *zone, now);
  return s;
}

namespace {

// Schedules read a page while looking for a workflow's declared ones.
constexpr int kDeclaredListPage = 500;

bool SameDefinition(const ScheduleRecord& a, const ScheduleRecord& b) {
  return a.workflow == b.workflow && a.cron == b.cron && a.timezone == b.timezone &&
         a.inputs == b.inputs && a.overlap == b.overlap && a.catch_up == b.catch_up;
}

}  // namespace

absl::Status DeclaredSchedules::Sync(const std::string& name) {
  std::string applied;  // the digest applied by this call
  for (int round = 0; round < kMaxDeclaredSyncRounds; ++round) {
    RUNLOOM_ASSIGN_OR_RETURN(const WorkflowVersion latest, store_->GetWorkflow(name, 0));
    const std::string& digest = latest.digest;
    {
      runloom::MutexLock l(&mu_);
      auto memo = applied_.find(name);
      if (digest == applied || (memo != applied_.end() && memo->second == digest)) {
        applied_[name] = digest;
        return absl::OkStatus();
      }
    }
    RUNLOOM_ASSIGN_OR_RETURN(const Workflow wf, WorkflowFromCanonical(latest.canonical));
    RUNLOOM_RETURN_IF_ERROR(Apply(wf));
    applied = digest;
  }
  return absl::AbortedError(absl::StrCat("workflow ", name,
                                         ": its latest catalog version kept changing while its "
                                         "schedules were stored; register it again"));
}

absl::Status DeclaredSchedules::Apply(const Workflow& wf) {
  RUNLOOM_ASSIGN_OR_RETURN(const absl::Time now, store_->Now());
  std::map<std::string, ScheduleRecord> wanted;
  for (size_t i = 0; i < wf.schedules.size(); ++i) {
    const ScheduleDef& def = wf.schedules[i];
    const ScheduleRequest req{.id = DeclaredScheduleId(wf.name, DeclaredScheduleName(def, i)),
                              .workflow = wf.name,
                              .cron = def.cron,
                              .timezone = def.timezone,
                              .inputs = def.inputs,
                              .overlap = def.overlap,
                              .catch_up = def.catch_up};
    absl::StatusOr<ScheduleRecord> s = CheckedSchedule(req, &wf, now);
    if (!s.ok()) {
      return Annotate(s.status(), absl::StrCat("workflow ", wf.name, ": schedule ", req.id));
    }
    wanted.emplace(req.id, *std::move(s));
  }
  // The stored declared schedules of `wf`: every id with its prefix (a
  // workflow name holds no ':', so no other workflow's ids have it). A scan,
  // not a range read: ids sort by the database's collation, which need not
  // keep a prefix together; the memo makes it rare.
  const std::string prefix = DeclaredScheduleId(wf.name, "");
  std::map<std::string, ScheduleRecord> stored;
  for (std::string after;;) {
    RUNLOOM_ASSIGN_OR_RETURN(std::vector<ScheduleRecord> page,
                             store_->ListSchedules(after, kDeclaredListPage));
    for (ScheduleRecord& s : page) {
      if (absl::StartsWith(s.id, prefix)) stored.emplace(s.id, std::move(s));
    }
    if (page.size() < static_cast<size_t>(kDeclaredListPage)) break;
    after = page.back().id;
  }
  for (auto& [id, want] : wanted) {
    auto it = stored.find(id);
    RUNLOOM_RETURN_IF_ERROR(Upsert(
        std::move(want), it == stored.end() ? std::nullopt : std::optional(std::move(it->second))));
    if (it != stored.end()) stored.erase(it);
  }
  for (const auto& [id, s] : stored) {
    RUNLOOM_RETURN_IF_ERROR(store_->DeleteSchedule(id).status());  // false: deleted already
  }
  return absl::OkStatus();
}

absl::Status DeclaredSchedules::Upsert(ScheduleRecord want, std::optional<ScheduleRecord> stored) {
  if (!stored.has_value()) {
    absl::StatusOr<ScheduleRecord> put = store_->PutSchedule(want, false);
    if (put.ok() || !absl::IsAlreadyExists(put.status())) return put.status();
    // Created by another process since it was listed: compare with that.
    RUNLOOM_ASSIGN_OR_RETURN(stored, store_->GetSchedule(want.id));
    if (!stored.has_value()) return store_->PutSchedule(want, false).status();
  }
  if (SameDefinition(*stored, want)) return absl::OkStatus();
  want.paused = stored->paused;
  if (stored->cron == want.cron && stored->timezone == want.timezone) {
    want.next_fire_at = stored->next_fire_at;
  }
  return store_->PutSchedule(want, true).status();
}

void ScheduleFirer::Tick() {
  absl::StatusOr<int> fired = FireOnce();
  if (!fired.ok()) {
    Log(logger_, LogLevel::kWarning, "schedules: firing failed: ", fired.status().ToString());
  }
}

absl::StatusOr<int> ScheduleFirer::FireOnce() {
  RUNLOOM_ASSIGN_OR_RETURN(std::vector<ScheduleRecord> due,
                           store_->FindDueSchedules(kSchedulesPerPass));
  if (due.empty()) return 0;
  RUNLOOM_ASSIGN_OR_RETURN(const absl::Time now, store_->Now());
  int started = 0;
  for (const ScheduleRecord& s : due) {
    absl::StatusOr<int> n = Fire(s, now);
    if (!n.ok()) {
      // One schedule's failure (its workflow gone, bad inputs for a new
      // version) does not hold up the others; it stays due and is retried.
      Log(logger_, LogLevel::kWarning, "schedule ", s.id, ": tick ",
          absl::FormatTime(s.next_fire_at), " not fired: ", n.status().ToString());
      continue;
    }
    started += *n;
  }
  return started;
}

namespace {

// The ticks due at `now` from `first` on, the last `keep` of them, oldest
// first, and the first tick not due. A long downtime is crossed by a jump,
// not a walk over every tick: to the first tick of the smallest window before
// `now` that holds one (its older ticks are past any catch-up bound).
struct DueTicks {
  std::vector<absl::Time> ticks;
  absl::Time after;
};
DueTicks TicksDue(const CronSpec& spec, absl::TimeZone zone, absl::Time first, absl::Time now,
                  size_t keep) {
  constexpr int kMaxWalk = 10'000;
  DueTicks out;
  absl::Time cursor = first;
  for (int walked = 0; cursor <= now; ++walked) {
    if (walked == kMaxWalk ||
        (walked == 0 && keep == 1 && NextFireTime(spec, zone, cursor) <= now)) {
      for (absl::Duration window : {absl::Minutes(1), absl::Hours(1), absl::Hours(24),
                                    absl::Hours(24 * 31), absl::Hours(24 * 366)}) {
        const absl::Time c = NextFireTime(spec, zone, now - window);
        if (c <= now) {
          if (c > cursor) {
            cursor = c;
            out.ticks.clear();
          }
          break;
        }
      }
    }
    out.ticks.push_back(cursor);
    if (out.ticks.size() > keep) out.ticks.erase(out.ticks.begin());
    cursor = NextFireTime(spec, zone, cursor);
  }
  out.after = cursor;
  return out;
}

}  // namespace

absl::StatusOr<int> ScheduleFirer::Fire(const ScheduleRecord& s, absl::Time now) {
  RUNLOOM_ASSIGN_OR_RETURN(CronSpec spec, CronSpec::Parse(s.cron));
  RUNLOOM_ASSIGN_OR_RETURN(absl::TimeZone zone, LoadScheduleTimeZone(s.timezone));
  const bool all = s.catch_up == "all";
  const DueTicks due = TicksDue(spec, zone, s.next_fire_at, now, all ? kMaxCatchUpTicks : 1);
  const absl::Time after = due.after;
  // `none` fires a tick only when it is the stored one and its successor is
  // not due yet: a tick missed while nothing fired is skipped.
  std::vector<absl::Time> fire = due.ticks;
  if (s.catch_up == "none" && !(fire.size() == 1 && fire[0] == s.next_fire_at)) fire.clear();
  std::string last_run = s.last_run_id;
  std::string started_run;
  int started = 0;
  for (absl::Time tick : fire) {
    if (!last_run.empty() && s.overlap != "allow") {
      absl::StatusOr<RunRecord> previous = store_->GetRun(last_run);
      if (previous.ok() && Unfinished(*previous)) {
        if (s.overlap == "skip") continue;
        absl::Status c = hooks_.cancel_run(last_run, absl::StrCat("schedule:", s.id));
        if (!c.ok() && !absl::IsFailedPrecondition(c)) return c;  // finished since: fine
      }
    }
    StartRunRequest req;
    req.workflow_name = s.workflow;
    req.inputs = s.inputs;
    // The tick, not the moment it fires: every process firing it, however
    // late, asks for the same run.
    req.idempotency_key =
        TickKey(s.id, RUNLOOM_INJECTED_BUG(InjectedBug::kScheduleKeyedByFireTime) ? now : tick);
    absl::StatusOr<CreateRunResult> created = hooks_.start_run(req);
    if (!created.ok()) {
      // A store that failed may answer next time: the tick stays due. A
      // refusal (the workflow's latest version refuses the inputs, the
      // tenant's budget is spent) would refuse again: the tick is skipped.
      if (Transient(created.status())) return created.status();
      Log(logger_, LogLevel::kWarning, "schedule ", s.id, ": tick ", absl::FormatTime(tick),
          " started no run: ", created.status().ToString());
      continue;
    }
    last_run = created->run.id;
    started_run = created->run.id;
    if (created->created) ++started;
  }
  // The compare-and-set: false when another process fired the tick first
  // (its runs are the ones above: the same keys).
  RUNLOOM_ASSIGN_OR_RETURN(bool advanced,
                           store_->AdvanceSchedule(s.id, s.next_fire_at, after, started_run));
  (void)advanced;
  return started;
}

}  // namespace runloom::engine_internal
