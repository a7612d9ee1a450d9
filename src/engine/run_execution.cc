#include "engine/run_execution.h"

#include "core/check.h"
#include "core/digest.h"
#include "core/status_macros.h"
#include "engine/event_helpers.h"
#include "steps/builtin_steps.h"
#include "workflow/template.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <thread>

namespace runloom::engine_internal {
namespace {

// The stderr kept in a step record.
constexpr size_t kStderrTail = 4096;

std::string ClassOf(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kDeadlineExceeded:
      return "timeout";
    case absl::StatusCode::kUnavailable:
      return "unavailable";
    case absl::StatusCode::kResourceExhausted:
      return "rate_limited";
    case absl::StatusCode::kInvalidArgument:
      return "invalid";
    case absl::StatusCode::kCancelled:
      return "cancelled";
    default:
      return "error";
  }
}

bool Retries(const RetryPolicy& p, const std::string& cls) {
  if (cls == "invalid" || cls == "cancelled") return false;
  for (ErrorClass c : p.retry_on) {
    if (std::string(ToString(c)) == cls) return true;
  }
  return false;
}

absl::Duration Backoff(const RetryPolicy& p, int failed_attempt) {
  absl::Duration d = p.initial_delay;
  for (int i = 1; i < failed_attempt; ++i) {
    d = d * p.multiplier;
    if (d >= p.max_delay) return p.max_delay;
  }
  return std::min(d, p.max_delay);
}

// The context a step kind sees while it executes.
class LeafContext final : public StepContext {
 public:
  LeafContext(const std::string& run_id, const std::string& path, int attempt,
              const std::string& working_dir, Clock* clock, absl::Time deadline, StopSource& stop)
      : run_id_(run_id),
        path_(path),
        attempt_(attempt),
        working_dir_(working_dir),
        clock_(clock),
        deadline_(deadline),
        stop_(stop) {}
  ~LeafContext() override { OnStop(nullptr); }

  const std::string& run_id() const override { return run_id_; }
  const std::string& step_path() const override { return path_; }
  int attempt() const override { return attempt_; }
  const std::string& working_dir() const override { return working_dir_; }
  Clock* clock() override { return clock_; }
  absl::Time deadline() const override { return deadline_; }
  bool Stopping() override { return stop_.stopped() || clock_->Now() >= deadline_; }
  bool SleepUntil(absl::Time until) override {
    absl::Time end = std::min(until, deadline_);
    bool stopped = stop_.WaitUntil(clock_, end);
    return !stopped && end == until;
  }
  void OnStop(std::function<void()> fn) override {
    if (callback_id_ >= 0) stop_.RemoveCallback(callback_id_);
    callback_id_ = -1;
    if (fn) callback_id_ = stop_.AddCallback(std::move(fn));
  }

 private:
  const std::string run_id_;
  const std::string path_;
  const int attempt_;
  const std::string working_dir_;
  Clock* const clock_;
  const absl::Time deadline_;
  StopSource& stop_;
  int callback_id_ = -1;
};

}  // namespace

std::string TopLevelId(const std::string& path) { return path.substr(0, path.find_first_of("[/")); }

int FirstStepOfPhase(const Workflow& wf, const std::string& phase) {
  for (size_t i = 0; i < wf.steps.size(); ++i) {
    if (wf.steps[i].phase == phase) return static_cast<int>(i);
  }
  return -1;
}

std::string ChildPath(const std::string& prefix, const std::string& id) {
  return prefix.empty() ? id : absl::StrCat(prefix, "/", id);
}

const StepResult* Scope::Find(const std::string& id) const {
  for (const Scope* s = this; s != nullptr; s = s->parent) {
    auto it = s->results.find(id);
    if (it != s->results.end()) return &it->second;
  }
  return nullptr;
}

int Scope::LoopIteration() const {
  for (const Scope* s = this; s != nullptr; s = s->parent) {
    if (s->loop_iteration > 0) return s->loop_iteration;
  }
  return 0;
}

RunExecution::RunExecution(ExecutionConfig config, RunRecord run, Lease lease,
                           std::shared_ptr<const Workflow> workflow,
                           std::vector<StepRecord> records)
    : config_(std::move(config)),
      run_(std::move(run)),
      lease_(std::move(lease)),
      workflow_(std::move(workflow)) {
  for (StepRecord& r : records) {
    std::string path = r.path;
    records_.emplace(std::move(path), std::move(r));
  }
  phase_ = run_.phase;
  lease_pending_ = config_.lease_request.has_value();
}

Lease RunExecution::lease() const {
  absl::MutexLock l(&lease_mu_);
  return lease_;
}

absl::Status RunExecution::lease_error() const {
  absl::MutexLock l(&lease_mu_);
  return lease_error_;
}

bool RunExecution::lease_needs_records() const {
  absl::MutexLock l(&lease_mu_);
  return lease_needs_records_;
}

absl::Status RunExecution::Write(RunWrite write, bool defer) {
  absl::MutexLock l(&write_mu_);
  if (lease_lost_) return absl::AbortedError("lease lost");
  if (defer) {
    // A finished step's record rides on the next write (the next step's
    // start, a retry, a pause or the terminal status), which always comes
    // before anything that depends on the step runs. One transaction per
    // step instead of two; a crash in between loses the record, and the step
    // runs again, as a crash just before its own commit would.
    for (StepRecord& r : write.steps) pending_.steps.push_back(std::move(r));
    for (Event& e : write.events) pending_.events.push_back(std::move(e));
    return absl::OkStatus();
  }
  RunWrite pending = std::move(pending_);
  pending_ = RunWrite{};
  const bool merged = !pending.steps.empty() || !pending.events.empty();
  if (merged) {
    for (StepRecord& r : write.steps) pending.steps.push_back(std::move(r));
    for (Event& e : write.events) pending.events.push_back(std::move(e));
    write.steps = std::move(pending.steps);
    write.events = std::move(pending.events);
  }
  write.run_id = run_.id;
  write.party = Party::kExecutor;
  bool take_lease;
  {
    absl::MutexLock l(&lease_mu_);
    take_lease = lease_pending_;
    write.lease_token = lease_.token;
  }
  absl::Status s;
  if (take_lease) {
    // A first execution: this write takes the lease too.
    const ExecutionConfig::LeaseRequest& req = *config_.lease_request;
    auto first = config_.store->AcquireLease(run_.id, req.owner, req.ttl, req.events, &write);
    if (!first.ok()) {
      absl::MutexLock l(&lease_mu_);
      lease_pending_ = false;
      lease_error_ = first.status();
      lease_lost_ = true;
      root_.RequestStop(StopReason::kLeaseLost);
      return absl::AbortedError(
          absl::StrCat("run ", run_.id, " could not be leased: ", first.status().message()));
    }
    const bool needs_records =
        first->first_write.code() == absl::StatusCode::kFailedPrecondition && first->attempt != 1;
    {
      absl::MutexLock l(&lease_mu_);
      lease_pending_ = false;
      lease_ = *first;
      lease_needs_records_ = needs_records;
    }
    if (req.on_leased) req.on_leased(*first);
    if (needs_records) {
      // Leased, but someone ran the run in between: stop writing; the
      // caller goes on with this lease and the recorded steps.
      lease_lost_ = true;
      root_.RequestStop(StopReason::kLeaseLost);
      return absl::AbortedError("the run was leased before: read its records first");
    }
    s = first->first_write;
  } else {
    s = config_.store->Commit(write);
  }
  if (s.code() == absl::StatusCode::kCancelled) {
    // A cancel was requested before this step could start. Keep the records
    // that rode on this write for the cancelled status that follows.
    if (merged) {
      pending_.steps = std::move(write.steps);
      for (Event& e : write.events) {
        if (e.type != "step.started") pending_.events.push_back(std::move(e));
      }
    }
    root_.RequestStop(StopReason::kCancel);
    return absl::CancelledError("cancel requested");
  }
  if (s.code() == absl::StatusCode::kAborted || s.code() == absl::StatusCode::kFailedPrecondition) {
    // Someone else holds the run now (or it moved on without us): stop, and
    // make sure nothing else this execution does gets written.
    lease_lost_ = true;
    root_.RequestStop(StopReason::kLeaseLost);
    return absl::AbortedError(absl::StrCat("lease lost on run ", run_.id, ": ", s.message()));
  }
  return s;
}

absl::StatusOr<nlohmann::json> RunExecution::Resolve(const std::string& ref,
                                                     const Scope& scope) const {
  RUNLOOM_ASSIGN_OR_RETURN(Ref r, ParseRef(ref));
  if (r.root == "inputs") {
    if (!r.path.empty() && config_.secrets.contains(r.path[0])) {
      auto v = JsonAtPath(config_.secrets, r.path);
      if (v) return *v;
    }
    auto v = JsonAtPath(run_.inputs, r.path);
    if (!v) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", absl::StrJoin(r.path, "."), "' has no value in this run",
          " (secret inputs are not stored: they exist only in the process that started the run)"));
    }
    return *v;
  }
  if (r.root == "run") {
    nlohmann::json run = {{"id", run_.id},
                          {"revision", run_.revision},
                          {"entry", run_.entry},
                          {"feedback", run_.context.value("feedback", "")},
                          {"rerun_from", run_.context.value("rerun_from", "")}};
    auto v = JsonAtPath(run, r.path);
    if (!v) return absl::InvalidArgumentError(absl::StrCat("unknown reference '", ref, "'"));
    return *v;
  }
  if (r.root == "loop") {
    return nlohmann::json(scope.LoopIteration());
  }
  if (r.root == "steps") {
    const StepResult* res = scope.Find(r.step_id);
    if (res == nullptr) {
      // Not run yet at this point (a loop's first round reading the editor's
      // notes, a step on another path): null, and status "pending".
      if (r.attr == "status") return nlohmann::json("pending");
      return nlohmann::json(nullptr);
    }
    if (r.attr == "status") {
      return nlohmann::json(std::string(ToString(res->state)));
    }
    if (r.attr == "error") return nlohmann::json(res->error);
    auto v = JsonAtPath(res->output, r.path);
    if (!v) return nlohmann::json(nullptr);  // a missing field reads as null
    return *v;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown reference '", ref, "'"));
}

absl::Status RunExecution::Record(const StepDef& step, const std::string& path,
                                  const StepResult& result, int attempt, absl::Time started,
                                  std::string stderr_tail, std::vector<Event> extra_events) {
  StepRecord rec;
  rec.run_id = run_.id;
  rec.revision = run_.revision;
  rec.path = path;
  rec.step_id = step.id;
  rec.kind = step.kind;
  rec.phase = step.phase;
  rec.attempt = attempt;
  rec.state = result.state;
  rec.output = result.state == StepState::kSucceeded ? result.output : nlohmann::json(nullptr);
  rec.error = result.error;
  rec.error_class = result.error_class;
  if (stderr_tail.size() > kStderrTail)
    stderr_tail = stderr_tail.substr(stderr_tail.size() - kStderrTail);
  rec.stderr_tail = std::move(stderr_tail);
  rec.started_at = started;
  rec.finished_at = config_.clock->Now();
  RunWrite w;
  w.steps.push_back(std::move(rec));
  w.events = std::move(extra_events);
  return Write(std::move(w), /*defer=*/true);
}

absl::Status RunExecution::RecordContainer(const StepDef& step, const std::string& path,
                                           const StepResult& result, absl::Time started) {
  Event e = result.state == StepState::kSucceeded
                ? events::StepSucceeded(run_.id, path, step.id, 1,
                                        absl::ToInt64Milliseconds(config_.clock->Now() - started))
                : events::StepFailed(run_.id, path, step.id, 1, result.error, result.error_class,
                                     false, std::nullopt);
  return Record(step, path, result, 1, started, "", {std::move(e)});
}

absl::StatusOr<StepResult> RunExecution::RunSequence(const std::vector<StepDef>& steps,
                                                     const std::string& prefix, Scope& scope,
                                                     StopSource& stop) {
  // Dependencies: explicit `needs:`, else the previous sibling.
  const size_t n = steps.size();
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < n; ++i) index[steps[i].id] = i;
  std::vector<std::vector<size_t>> deps(n);
  for (size_t i = 0; i < n; ++i) {
    if (steps[i].explicit_needs || !steps[i].needs.empty()) {
      for (const std::string& d : steps[i].needs) deps[i].push_back(index.at(d));
    } else if (i > 0) {
      deps[i].push_back(i - 1);
    }
  }
  std::vector<bool> done(n, false);
  StepResult last;
  bool any_failed = false;
  std::string first_error;
  // Execute in declaration order among the steps whose dependencies are done
  // (validation guarantees the graph is acyclic, so this always progresses).
  for (size_t finished = 0; finished < n;) {
    size_t pick = n;
    for (size_t i = 0; i < n && pick == n; ++i) {
      if (done[i]) continue;
      bool ready = true;
      for (size_t d : deps[i]) ready = ready && done[d];
      if (ready) pick = i;
    }
    RUNLOOM_CHECK(pick < n) << "dependency cycle survived validation";
    const StepDef& step = steps[pick];
    const std::string path = ChildPath(prefix, step.id);

    // Trigger rule over the dependencies' final states.
    int succeeded = 0, failed = 0, skipped = 0;
    std::string blocker;
    for (size_t d : deps[pick]) {
      const StepResult* r = scope.Find(steps[d].id);
      if (r->state == StepState::kSucceeded) ++succeeded;
      if (r->state == StepState::kFailed) ++failed;
      if (r->state == StepState::kSkipped) ++skipped;
      if (r->state != StepState::kSucceeded && blocker.empty()) {
        blocker = absl::StrCat(steps[d].id, " ", std::string(ToString(r->state)));
      }
    }
    const size_t nd = deps[pick].size();
    bool run_it = true;
    std::string skip_reason;
    switch (step.trigger) {
      case TriggerRule::kAllSuccess:
        run_it = succeeded == static_cast<int>(nd);
        skip_reason = absl::StrCat("trigger all_success: upstream ", blocker);
        break;
      case TriggerRule::kAllDone:
        break;
      case TriggerRule::kNoneFailedMinOneSuccess:
        run_it = failed == 0 && (nd == 0 || succeeded > 0);
        skip_reason = failed > 0
                          ? absl::StrCat("trigger none_failed_min_one_success: upstream ", blocker)
                          : "trigger none_failed_min_one_success: no upstream succeeded";
        break;
      case TriggerRule::kOneSuccess:
        run_it = nd == 0 || succeeded > 0;
        skip_reason = "trigger one_success: no upstream succeeded";
        break;
    }
    StepResult result;
    auto rec = records_.find(path);
    if (rec != records_.end()) {
      // Recorded in this revision: not executed again.
      result.state = rec->second.state;
      result.output = rec->second.output;
      result.error = rec->second.error;
      result.error_class = rec->second.error_class;
    } else {
      if (run_it && step.when) {
        auto ok = EvaluateCondition(*step.when,
                                    [&](const std::string& ref) { return Resolve(ref, scope); });
        if (!ok.ok()) {
          run_it = false;
          skip_reason = absl::StrCat("when: ", ok.status().message());
        } else if (!*ok) {
          run_it = false;
          skip_reason = absl::StrCat("when: '", step.when->text, "' is false");
        }
      }
      if (draining_) return absl::CancelledError("draining");
      if (stop.stopped()) {
        if (stop.reason() != StopReason::kDeadline) return absl::CancelledError("stop requested");
        run_it = false;
        skip_reason = "the parallel branch passed its deadline";
      }
      if (!run_it) {
        result.state = StepState::kSkipped;
        result.error_class = "skipped";
        result.output = nullptr;
        RUNLOOM_RETURN_IF_ERROR(
            Record(step, path, result, 0, config_.clock->Now(), "",
                   {StepSkippedEvent(run_.id,
                                     {.path = path, .step_id = step.id, .reason = skip_reason})}));
      } else {
        RUNLOOM_ASSIGN_OR_RETURN(result, RunStep(step, path, scope, stop));
      }
    }
    if (result.state == StepState::kFailed && !step.allow_failure) {
      any_failed = true;
      if (first_error.empty()) first_error = absl::StrCat("step ", path, " failed: ", result.error);
    }
    scope.results[step.id] = result;
    last = result;
    done[pick] = true;
    ++finished;
    if (step.kind == "approval" && result.state == StepState::kSucceeded &&
        result.output.value("decision", "") == "reject") {
      halt_ = Halt::kReject;
      reject_error_ =
          absl::StrCat("rejected at ", path, " by ", result.output.value("reviewer", ""));
    }
    if (halt_ != Halt::kNone) break;
  }
  StepResult seq;
  seq.state = any_failed ? StepState::kFailed : StepState::kSucceeded;
  seq.error = first_error;
  seq.output = last.output;
  return seq;
}

absl::StatusOr<StepResult> RunExecution::RunStep(const StepDef& step, const std::string& path,
                                                 Scope& scope, StopSource& stop) {
  if (step.kind == "loop") return RunLoop(step, path, scope, stop);
  if (step.kind == "parallel") return RunParallel(step, path, scope, stop);
  if (step.kind == "approval") return RunApproval(step, path, scope);
  return RunLeaf(step, path, scope, stop);
}

absl::StatusOr<StepResult> RunExecution::RunLeaf(const StepDef& step, const std::string& path,
                                                 Scope& scope, StopSource& stop) {
  std::shared_ptr<StepKind> kind = config_.registry->Find(step.kind);
  const absl::Time first_start = config_.clock->Now();
  StepResult result;
  if (kind == nullptr) {
    result.state = StepState::kFailed;
    result.error = absl::StrCat("unknown step kind '", step.kind, "'");
    result.error_class = "invalid";
    RUNLOOM_RETURN_IF_ERROR(Record(step, path, result, 1, first_start, "",
                                   {events::StepFailed(run_.id, path, step.id, 1, result.error,
                                                       result.error_class, false, std::nullopt)}));
    return result;
  }
  for (int attempt = 1;; ++attempt) {
    {
      RunWrite w;
      w.events.push_back(StepStartedEvent(run_.id, {.path = path,
                                                    .step_id = step.id,
                                                    .kind = step.kind,
                                                    .attempt = attempt,
                                                    .phase = step.phase,
                                                    .revision = run_.revision,
                                                    .entry = ParseRunEntry(config_.entry)}));
      bool new_phase;
      {
        absl::MutexLock l(&write_mu_);
        new_phase = !step.phase.empty() && step.phase != phase_;
        if (new_phase) phase_ = step.phase;
      }
      if (new_phase) w.phase = step.phase;
      w.refuse_if_cancel_requested = true;
      RUNLOOM_RETURN_IF_ERROR(Write(std::move(w)));
    }
    const absl::Time started = config_.clock->Now();
    const absl::Time deadline = step.timeout ? started + *step.timeout : absl::InfiniteFuture();
    absl::StatusOr<StepOutput> out;
    auto config =
        ResolveTemplates(step.config, [&](const std::string& ref) { return Resolve(ref, scope); });
    if (!config.ok()) {
      out = absl::InvalidArgumentError(absl::StrCat("templates: ", config.status().message()));
    } else {
      LeafContext ctx(run_.id, path, attempt, config_.working_dir, config_.clock, deadline, stop);
      out = kind->Execute(ctx, *config);
    }
    if (stop.stopped()) {
      StopReason why = stop.reason();
      if (why != StopReason::kDeadline) {
        // The run is stopping (cancel, lease lost, shutdown): the step's
        // result is not recorded, so a later execution runs it again.
        return absl::CancelledError("stop requested");
      }
      if (out.ok()) {
        out = absl::DeadlineExceededError("the parallel branch passed its deadline");
      } else if (out.status().code() == absl::StatusCode::kCancelled) {
        out = absl::DeadlineExceededError("the parallel branch passed its deadline");
      }
    }
    const absl::Time now = config_.clock->Now();
    if (out.ok()) {
      result.state = StepState::kSucceeded;
      result.output = std::move(out->output);
      const int64_t ms = absl::ToInt64Milliseconds(now - started);
      RUNLOOM_RETURN_IF_ERROR(Record(step, path, result, attempt, started,
                                     std::move(out->stderr_tail),
                                     {events::StepSucceeded(run_.id, path, step.id, attempt, ms)}));
      return result;
    }
    absl::Status err = out.status();
    if (err.code() == absl::StatusCode::kCancelled && now >= deadline) {
      err = absl::DeadlineExceededError(
          absl::StrCat("timed out after ", absl::FormatDuration(*step.timeout)));
    }
    std::string cls = ClassOf(err);
    if (cls == "cancelled") cls = "error";  // a kind gave up on its own
    const bool retry = attempt < step.retry.max_attempts && Retries(step.retry, cls) &&
                       stop.reason() != StopReason::kDeadline;
    if (retry) {
      absl::Duration delay = Backoff(step.retry, attempt);
      RunWrite w;
      w.events = {events::StepFailed(run_.id, path, step.id, attempt, std::string(err.message()),
                                     cls, true, absl::ToInt64Milliseconds(delay))};
      RUNLOOM_RETURN_IF_ERROR(Write(std::move(w)));
      if (stop.WaitUntil(config_.clock, config_.clock->Now() + delay)) {
        if (stop.reason() != StopReason::kDeadline) return absl::CancelledError("stop requested");
      }
      if (stop.stopped()) {
        // Branch deadline passed during the backoff.
        err = absl::DeadlineExceededError("the parallel branch passed its deadline");
        cls = "timeout";
      } else {
        continue;
      }
    }
    result.state = StepState::kFailed;
    result.error = std::string(err.message());
    result.error_class = cls;
    result.output = nullptr;
    std::string stderr_tail;
    if (auto tail = err.GetPayload(kStderrTailPayload)) stderr_tail = std::string(*tail);
    RUNLOOM_RETURN_IF_ERROR(Record(step, path, result, attempt, first_start, std::move(stderr_tail),
                                   {events::StepFailed(run_.id, path, step.id, attempt,
                                                       result.error, cls, false, std::nullopt)}));
    return result;
  }
}

absl::StatusOr<StepResult> RunExecution::RunLoop(const StepDef& step, const std::string& path,
                                                 Scope& scope, StopSource& stop) {
  const absl::Time started = config_.clock->Now();
  // prev holds the previous iteration's results, so a body step may read what
  // the last round produced (the editor's feedback for the next draft).
  Scope prev;
  prev.parent = &scope;
  StepResult result;
  int iterations = 0;
  bool converged = false;
  for (int i = 1; i <= step.max_iterations; ++i) {
    Scope cur;
    cur.parent = &prev;
    cur.loop_iteration = i;
    RUNLOOM_ASSIGN_OR_RETURN(StepResult body,
                             RunSequence(step.body, absl::StrCat(path, "[", i, "]"), cur, stop));
    iterations = i;
    prev.results = cur.results;
    if (halt_ != Halt::kNone) return body;  // paused or rejected inside the body
    if (body.state == StepState::kFailed) {
      result.state = StepState::kFailed;
      result.error = body.error;
      result.error_class = "error";
      break;
    }
    if (step.until) {
      auto ok =
          EvaluateCondition(*step.until, [&](const std::string& ref) { return Resolve(ref, cur); });
      if (!ok.ok()) {
        result.state = StepState::kFailed;
        result.error = absl::StrCat("until: ", ok.status().message());
        result.error_class = "invalid";
        break;
      }
      if (*ok) {
        converged = true;
        break;
      }
    }
  }
  nlohmann::json last = nlohmann::json::object();
  for (const auto& [id, r] : prev.results) {
    last[id] = r.output;
    scope.results[id] = r;  // the last iteration's results are visible after the loop
  }
  if (result.state == StepState::kSucceeded) {
    result.output = {{"iterations", iterations}, {"converged", converged}, {"last", last}};
  }
  RUNLOOM_RETURN_IF_ERROR(RecordContainer(step, path, result, started));
  return result;
}

absl::StatusOr<StepResult> RunExecution::RunApproval(const StepDef& step, const std::string& path,
                                                     Scope& scope) {
  // No record for this gate in this revision: resolve the proposal, record it
  // on the run and pause. The decision, when it comes, is written as this
  // gate's step record, which the next execution reads from the store.
  auto proposal = ResolveTemplates(step.config.value("proposal", nlohmann::json(nullptr)),
                                   [&](const std::string& ref) { return Resolve(ref, scope); });
  if (!proposal.ok()) {
    StepResult failed;
    failed.state = StepState::kFailed;
    failed.error = absl::StrCat("proposal: ", proposal.status().message());
    failed.error_class = "invalid";
    RUNLOOM_RETURN_IF_ERROR(Record(step, path, failed, 1, config_.clock->Now(), "",
                                   {events::StepFailed(run_.id, path, step.id, 1, failed.error,
                                                       "invalid", false, std::nullopt)}));
    return failed;
  }
  nlohmann::json allow = step.config.value("allow", nlohmann::json::array());
  if (allow.empty()) {
    for (const char* d : kDecisions) allow.push_back(d);
  }
  pending_gate_ = {{"path", path},
                   {"step_id", step.id},
                   {"phase", step.phase},
                   {"proposal", *proposal},
                   {"proposal_digest", JsonDigest(*proposal)},
                   {"allow", allow},
                   {"revision_phase", step.config.value("revision_phase", "")},
                   {"title", step.config.value("title", step.id)}};
  halt_ = Halt::kPause;
  StepResult pending;
  pending.state = StepState::kSkipped;  // not recorded; the walk stops here
  return pending;
}

Disposition RunExecution::Pause() {
  RunWrite w;
  w.new_status = RunStatus::kPaused;
  nlohmann::json context = run_.context;
  context["pending_gate"] = pending_gate_;
  w.context = std::move(context);
  w.events.push_back(RunPausedEvent(
      run_.id, {.step_path = pending_gate_["path"].get<std::string>(),
                .proposal_digest = pending_gate_["proposal_digest"].get<std::string>()}));
  absl::Status s = Write(std::move(w));
  if (s.code() == absl::StatusCode::kAborted) return Disposition::kLeaseLost;
  if (!s.ok()) return Disposition::kStoreError;
  final_status_ = RunStatus::kPaused;
  return Disposition::kPaused;
}

absl::StatusOr<StepResult> RunExecution::RunParallel(const StepDef& step, const std::string& path,
                                                     Scope& scope, StopSource& stop) {
  const absl::Time started = config_.clock->Now();
  const size_t n = step.branches.size();
  struct BranchRun {
    std::unique_ptr<StopSource> stop;
    Scope scope;
    absl::StatusOr<StepResult> result = absl::UnknownError("not run");
    bool done = false;
  };
  std::vector<BranchRun> runs(n);
  absl::Mutex mu;  // guards BranchRun::done
  int remaining = static_cast<int>(n);
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (size_t b = 0; b < n; ++b) {
    runs[b].stop = std::make_unique<StopSource>(&stop);
    runs[b].scope.parent = &scope;
  }
  for (size_t b = 0; b < n; ++b) {
    threads.emplace_back([&, b] {
      const Branch& br = step.branches[b];
      auto r = RunSequence(br.steps, absl::StrCat(path, "[", br.name, "]"), runs[b].scope,
                           *runs[b].stop);
      absl::MutexLock l(&mu);
      runs[b].result = std::move(r);
      runs[b].done = true;
      --remaining;
    });
  }
  {
    const absl::Time deadline = step.deadline ? started + *step.deadline : absl::InfiniteFuture();
    absl::MutexLock l(&mu);
    auto all_done = [&remaining]() { return remaining == 0; };
    config_.clock->AwaitWithDeadline(&mu, absl::Condition(&all_done), deadline);
    for (size_t b = 0; b < n; ++b) {
      if (!runs[b].done) runs[b].stop->RequestStop(StopReason::kDeadline);
    }
  }
  for (std::thread& t : threads) t.join();

  StepResult result;
  nlohmann::json branches = nlohmann::json::object();
  int ok = 0;
  absl::Status stop_status;
  for (size_t b = 0; b < n; ++b) {
    const std::string& name = step.branches[b].name;
    for (const auto& [id, r] : runs[b].scope.results) scope.results[id] = r;
    if (!runs[b].result.ok()) {
      // The run is stopping or the store failed: propagate after joining all.
      if (stop_status.ok()) stop_status = runs[b].result.status();
      continue;
    }
    const StepResult& br = *runs[b].result;
    if (br.state == StepState::kSucceeded) ++ok;
    branches[name] = {{"status", std::string(ToString(br.state))}, {"output", br.output}};
    if (br.state == StepState::kFailed) branches[name]["error"] = br.error;
  }
  if (!stop_status.ok()) return stop_status;
  if (ok > 0) {
    result.state = StepState::kSucceeded;
    result.output = {
        {"branches", branches}, {"succeeded", ok}, {"failed", static_cast<int>(n) - ok}};
  } else {
    result.state = StepState::kFailed;
    result.error = "every branch failed";
    result.error_class = "error";
  }
  RUNLOOM_RETURN_IF_ERROR(RecordContainer(step, path, result, started));
  return result;
}

Disposition RunExecution::Finish(RunStatus status, const std::string& outcome,
                                 const std::string& error) {
  RunWrite w;
  w.new_status = status;
  if (!outcome.empty()) w.outcome = outcome;
  if (!error.empty()) w.error = error;
  w.events.push_back(
      RunFinishedEvent(run_.id, {.status = status, .outcome = outcome, .error = error}));
  absl::Status s = Write(std::move(w));
  if (s.code() == absl::StatusCode::kAborted) return Disposition::kLeaseLost;
  if (!s.ok()) return Disposition::kStoreError;
  final_status_ = status;
  final_error_ = error;
  return Disposition::kFinished;
}

Disposition RunExecution::FailBeforeStart(const std::string& error) {
  return Finish(RunStatus::kFailed, "failed", error);
}

void RunExecution::Drain() { draining_ = true; }

Disposition RunExecution::StopDisposition() {
  switch (root_.reason()) {
    case StopReason::kCancel:
      return Finish(RunStatus::kCancelled, "", "cancelled by request");
    case StopReason::kLeaseLost:
      return Disposition::kLeaseLost;
    case StopReason::kShutdown:
    case StopReason::kDeadline:
    case StopReason::kNone:
      break;
  }
  if (!draining_) return Disposition::kStoreError;
  RunWrite w;
  w.new_status = RunStatus::kQueued;
  w.events.push_back(RunReleasedEvent(run_.id, {.reason = "worker shutting down"}));
  absl::Status s = Write(std::move(w));
  return s.ok() ? Disposition::kReleased : Disposition::kLeaseLost;
}

Disposition RunExecution::Run() {
  Scope top;
  absl::StatusOr<StepResult> r = RunSequence(workflow_->steps, "", top, root_);
  if (!r.ok()) return StopDisposition();
  if (halt_ == Halt::kPause) return Pause();
  if (halt_ == Halt::kReject) return Finish(RunStatus::kRejected, "rejected", reject_error_);
  if (root_.stopped() || draining_) {
    // Every step finished, but the stop came first: honour a cancel.
    if (root_.reason() == StopReason::kCancel) return StopDisposition();
    if (root_.reason() == StopReason::kLeaseLost) return Disposition::kLeaseLost;
  }
  std::string outcome = r->state == StepState::kFailed ? "failed" : "approved";
  std::string error = r->error;
  if (!workflow_->outcome.empty()) {
    auto v = ResolveTemplates(nlohmann::json(workflow_->outcome),
                              [&](const std::string& ref) { return Resolve(ref, top); });
    if (!v.ok()) {
      outcome = "failed";
      error = absl::StrCat("outcome: ", v.status().message());
    } else if (!v->is_string()) {
      outcome = "failed";
      error = absl::StrCat("outcome: expected a string, got ", v->dump());
    } else {
      outcome = v->get<std::string>();
      if (outcome == "completed") outcome = "approved";
    }
  }
  if (outcome == "approved") return Finish(RunStatus::kCompleted, outcome, "");
  if (outcome == "rejected") return Finish(RunStatus::kRejected, outcome, error);
  if (outcome == "unresolved") return Finish(RunStatus::kUnresolved, outcome, error);
  if (outcome != "failed") {
    error = absl::StrCat("outcome: '", outcome,
                         "' is not one of approved, completed, rejected, unresolved, failed");
    outcome = "failed";
  }
  if (error.empty()) error = "the outcome rule resolved to failed";
  return Finish(RunStatus::kFailed, "failed", error);
}

}  // namespace runloom::engine_internal
