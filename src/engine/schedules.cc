#include "engine/schedules.h"

#include "core/log.h"
#include "core/status_macros.h"
#include "schedule/cron.h"
#include "schedule/fire_time.h"
#include "workflow/inputs.h"

#include "absl/strings/ascii.h"
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
  if (s.id.empty() || s.id.size() > 128 ||
      !std::all_of(s.id.begin(), s.id.end(), [](char c) {
        return absl::ascii_isalnum(c) || c == '_' || c == '.' || c == ':' || c == '-';
      })) {
    return Field("id", "1 to 128 of A-Z a-z 0-9 _ . : -, e.g. nightly-report");
  }
  absl::StatusOr<CronSpec> spec = CronSpec::Parse(s.cron);
  if (!spec.ok()) return Field("cron", spec.status().message());
  absl::StatusOr<absl::TimeZone> zone = LoadScheduleTimeZone(s.timezone);
  if (!zone.ok()) return Field("timezone", zone.status().message());
  if (s.overlap != "skip" && s.overlap != "allow" && s.overlap != "cancel") {
    return Field("overlap", absl::StrCat("'", s.overlap, "'; allowed: skip, allow, cancel"));
  }
  if (s.catch_up != "none" && s.catch_up != "latest" && s.catch_up != "all") {
    return Field("catch_up", absl::StrCat("'", s.catch_up, "'; allowed: none, latest, all"));
  }
  if (workflow == nullptr) {
    return absl::NotFoundError(absl::StrCat("workflow: '", s.workflow,
                                            "' is not in the catalog; register it first "
                                            "(runloom run --detach FILE, or POST /api/v1/workflows)"));
  }
  if (!request.inputs.is_object()) return Field("inputs", "must be a JSON object");
  // A schedule's inputs are stored and used by whichever process fires it:
  // a secret input must be a reference each of them can resolve.
  for (const InputDef& in : workflow->inputs) {
    if (in.secret && request.inputs.contains(in.name) &&
        !SecretRefName(request.inputs[in.name]).has_value()) {
      return Field(absl::StrCat("inputs.", in.name),
                   "is secret: a schedule keeps its inputs, so give a reference "
                   "secret://NAME, resolved where each run executes");
    }
  }
  absl::StatusOr<nlohmann::json> frozen = FreezeInputs(*workflow, request.inputs);
  if (!frozen.ok()) return Field("inputs", frozen.status().message());
  s.inputs = request.inputs;
  s.next_fire_at = NextFireTime(*spec, *zone, now);
  return s;
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
      Log(logger_, LogLevel::kWarning, "schedule ", s.id, ": tick ", absl::FormatTime(s.next_fire_at),
          " not fired: ", n.status().ToString());
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
    if (walked == kMaxWalk || (walked == 0 && keep == 1 && NextFireTime(spec, zone, cursor) <= now)) {
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
    req.idempotency_key = TickKey(s.id, tick);
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
