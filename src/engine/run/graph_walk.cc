// The graph walk: RunExecution's sequences of sibling steps (dependencies,
// trigger rules, `when:`, reuse of recorded results), loops, and parallel
// branches with a deadline. Leaf steps are in leaf_step.cc, approval gates
// in approval_gate.cc.
#include "engine/run/graph_walk.h"

#include "core/check.h"
#include "core/status_macros.h"
#include "engine/rules/step_paths.h"
#include "engine/rules/trigger_rules.h"
#include "engine/run/approval_gate.h"
#include "engine/run/event_helpers.h"
#include "engine/run/run_execution.h"
#include "workflow/template.h"

#include "absl/strings/str_cat.h"

#include <functional>
#include <map>

namespace runloom::engine_internal {

std::vector<std::vector<size_t>> StepDependencies(const std::vector<StepDef>& steps) {
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
  return deps;
}

size_t NextReadyStep(const std::vector<std::vector<size_t>>& deps, const std::vector<bool>& done) {
  const size_t n = deps.size();
  for (size_t i = 0; i < n; ++i) {
    if (done[i]) continue;
    bool ready = true;
    for (size_t d : deps[i]) ready = ready && done[d];
    if (ready) return i;
  }
  return n;
}

absl::StatusOr<bool> RunExecution::ShouldRun(const StepDef& step, bool triggered,
                                             std::string& skip_reason, const Scope& scope,
                                             StopSource& stop) {
  bool run_it = triggered;
  if (run_it && step.when) {
    auto ok =
        EvaluateCondition(*step.when, [&](const std::string& ref) { return Resolve(ref, scope); });
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
  return run_it;
}

absl::StatusOr<StepResult> RunExecution::RunSequence(const std::vector<StepDef>& steps,
                                                     const std::string& prefix, Scope& scope,
                                                     StopSource& stop) {
  const size_t n = steps.size();
  const std::vector<std::vector<size_t>> deps = StepDependencies(steps);
  std::vector<bool> done(n, false);
  StepResult last;
  bool any_failed = false;
  std::string first_error;
  // Execute in declaration order among the steps whose dependencies are done
  // (validation guarantees the graph is acyclic, so this always progresses).
  for (size_t finished = 0; finished < n;) {
    const size_t pick = NextReadyStep(deps, done);
    RUNLOOM_CHECK(pick < n) << "dependency cycle survived validation";
    const StepDef& step = steps[pick];
    const std::string path = ChildPath(prefix, step.id);
    std::vector<Upstream> upstream;
    for (size_t d : deps[pick]) upstream.push_back({steps[d].id, scope.Find(steps[d].id)->state});
    TriggerDecision trigger = EvaluateTrigger(step.trigger, upstream);
    StepResult result;
    auto rec = records_.find(path);
    if (rec != records_.end()) {
      // Recorded in this revision: not executed again.
      result.state = rec->second.state;
      result.output = rec->second.output;
      result.error = rec->second.error;
      result.error_class = rec->second.error_class;
    } else {
      RUNLOOM_ASSIGN_OR_RETURN(bool run_it,
                               ShouldRun(step, trigger.run, trigger.skip_reason, scope, stop));
      if (!run_it) {
        result.state = StepState::kSkipped;
        result.error_class = ErrorClass::kSkipped;
        result.output = nullptr;
        RUNLOOM_RETURN_IF_ERROR(Record(
            step, path, result, 0, config_.clock->Now(), "",
            {StepSkippedEvent(run_.id,
                              {.path = path, .step_id = step.id, .reason = trigger.skip_reason})}));
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
    if (IsRejection(step, result)) {
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
  if (step.kind == "sleep") return RunSleep(step, path, scope, stop);
  if (step.kind == "wait") return RunWait(step, path);
  if (step.kind == "run") return RunChild(step, path, scope);
  if (step.kind == "agent") return RunAgent(step, path, scope, stop);
  return RunLeaf(step, path, scope, stop);
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
      result.error_class = ErrorClass::kError;
      break;
    }
    if (step.until) {
      auto ok =
          EvaluateCondition(*step.until, [&](const std::string& ref) { return Resolve(ref, cur); });
      if (!ok.ok()) {
        result.state = StepState::kFailed;
        result.error = absl::StrCat("until: ", ok.status().message());
        result.error_class = ErrorClass::kInvalid;
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

// Runs every branch side by side (config_.scheduler: a thread each in
// production), waits for all of them, stopping the late ones at the step's
// deadline, then joins the results. Over 50 lines: the branch bookkeeping
// and the join share the local state.
absl::StatusOr<StepResult> RunExecution::RunParallel(const StepDef& step, const std::string& path,
                                                     Scope& scope, StopSource& stop) {
  ++parallel_depth_;
  struct Leave {
    std::atomic<int>& depth;
    ~Leave() { --depth; }
  } leave{parallel_depth_};
  const absl::Time started = config_.clock->Now();
  const size_t n = step.branches.size();
  struct BranchRun {
    std::unique_ptr<StopSource> stop;
    Scope scope;
    absl::StatusOr<StepResult> result = absl::UnknownError("not run");
  };
  std::vector<BranchRun> runs(n);
  std::vector<std::function<void()>> tasks;
  tasks.reserve(n);
  for (size_t b = 0; b < n; ++b) {
    runs[b].stop = std::make_unique<StopSource>(&stop);
    runs[b].scope.parent = &scope;
    tasks.emplace_back([&, b] {
      const Branch& br = step.branches[b];
      // Each task writes only its own BranchRun; RunAll's return orders
      // these writes before the reads below.
      runs[b].result = RunSequence(br.steps, absl::StrCat(path, "[", br.name, "]"), runs[b].scope,
                                   *runs[b].stop);
    });
  }
  const absl::Time deadline = step.deadline ? started + *step.deadline : absl::InfiniteFuture();
  config_.scheduler->RunAll(tasks, config_.clock, deadline, [&runs](size_t b) {
    runs[b].stop->RequestStop(StopReason::kDeadline);
  });

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
    result.error_class = ErrorClass::kError;
  }
  RUNLOOM_RETURN_IF_ERROR(RecordContainer(step, path, result, started));
  return result;
}

}  // namespace runloom::engine_internal
