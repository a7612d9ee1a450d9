// Timers on the executor's side (issue 23): a `sleep` step long enough
// parks its run instead of holding an executor (RunExecution::RunSleep and
// Park). The run rests `waiting` with its wake time in the store
// (RunWrite::wake_at) and the timer in its context (RunContext::timer); the
// sweeper queues it once the store's clock passes the time (Party::kTimer),
// and the next execution finds the timer in the context and runs the sleep
// as a leaf for what is left of it (nothing, once due), so the step is
// recorded as any sleep is.
#include "runloom/events.h"

#include "core/duration.h"
#include "core/status_macros.h"
#include "engine/rules/run_context.h"
#include "engine/run/run_execution.h"
#include "engine/run/signal_wait.h"
#include "workflow/template.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

#include <string>

namespace runloom::engine_internal {
namespace {

// When the sleep, as written with templates resolved, ends if it starts at
// `now`: `duration:` from now, or `until:` (issue 23); nullopt when it cannot
// be read here (the sleep kind then reports why, as a leaf).
std::optional<absl::Time> SleepEnd(const nlohmann::json& config, absl::Time now) {
  if (auto u = config.find("until"); u != config.end()) {
    if (!u->is_string() || config.contains("duration")) return std::nullopt;
    absl::StatusOr<absl::Time> t = ParseTimestamp(u->get<std::string>());
    return t.ok() ? std::optional<absl::Time>(*t) : std::nullopt;
  }
  auto d = config.find("duration");
  if (d == config.end() || !d->is_string()) return std::nullopt;
  absl::StatusOr<absl::Duration> parsed = ParseDuration(d->get<std::string>());
  if (!parsed.ok() || *parsed < absl::ZeroDuration()) return std::nullopt;
  return now + *parsed;
}

}  // namespace

std::string WakeTimeText(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", t, absl::UTCTimeZone());
}

absl::StatusOr<StepResult> RunExecution::RunSleep(const StepDef& step, const std::string& path,
                                                  Scope& scope, StopSource& stop) {
  const absl::Duration threshold = config_.park_sleeps_over;
  // A branch of a parallel step cannot park the run its siblings go on in.
  if (threshold == absl::InfiniteDuration() || parallel_depth_.load() > 0) {
    return RunLeaf(step, path, scope, stop);
  }
  // The store's clock decides when a timer is due: the wake time is on it.
  RUNLOOM_ASSIGN_OR_RETURN(const absl::Time now, config_.store->Now());
  const RunContext context = ContextOf(run_);
  absl::Time until;
  if (context.timer.has_value() && context.timer->step_path == path &&
      context.timer->revision == run_.revision) {
    until = context.timer->until;  // woken: the timer this sleep set
  } else {
    absl::StatusOr<nlohmann::json> config =
        ResolveTemplates(step.config, [&](const std::string& ref) { return Resolve(ref, scope); });
    std::optional<absl::Time> end = config.ok() ? SleepEnd(*config, now) : std::nullopt;
    if (!end.has_value() || *end - now < threshold) return RunLeaf(step, path, scope, stop);
    until = *end;
  }
  const absl::Duration left = std::max(absl::ZeroDuration(), until - now);
  if (left >= threshold) {
    pending_timer_ = StoredTimer{.step_path = path, .revision = run_.revision, .until = until};
    halt_ = Halt::kWait;
    StepResult pending;
    pending.state = StepState::kSkipped;  // not recorded; the walk stops here
    return pending;
  }
  // What is left of it (nothing, once due) runs in place, and the step is
  // recorded as any sleep is.
  StepDef rest = step;
  rest.config.erase("until");
  rest.config["duration"] = runloom::FormatDuration(left);
  return RunLeaf(rest, path, scope, stop);
}

Disposition RunExecution::Park() {
  if (parked_) {  // a wait step parked the run with its own write
    ReleaseLeftoverReservations();
    final_status_ = RunStatus::kWaiting;
    return Disposition::kWaiting;
  }
  RunWrite w;
  w.new_status = RunStatus::kWaiting;
  w.wake_at = pending_timer_.until;
  RunContext context = ContextOf(run_);
  context.timer = pending_timer_;
  w.context = EncodeRunContext(context);
  w.events.push_back(RunWaitingEvent(
      run_.id, {.step_path = pending_timer_.step_path, .until = WakeTimeText(pending_timer_.until)}));
  absl::Status s = Write(std::move(w));
  if (!s.ok()) return WriteFailed("parking at its timer", s);
  ReleaseLeftoverReservations();
  final_status_ = RunStatus::kWaiting;
  return Disposition::kWaiting;
}

}  // namespace runloom::engine_internal
