// RunExecution: one lease on one run, carrying its graph forward.
//
// Created by the run launcher (run_launcher.h) once it has the lease, or
// with a FirstLeaseRequest for a run never leased before. Run() walks the
// graph: steps with a recorded result in this revision are not executed
// again; each other step is started with a fenced write (step.started),
// executed, and its result recorded before any step that depends on it
// starts. When the graph ends, the outcome rule picks the terminal status,
// written with the lease token. Any refused write (stale token) stops the
// execution at once without writing anything else.
//
// The class is defined across the files of its concepts:
//   run_execution.cc  construction, Run(), the terminal write, stop and drain
//   graph_walk.cc     dependencies, trigger rules and `when:`, loops, parallel branches
//   leaf_step.cc      one leaf step's attempts under its retry policy and timeout
//   approval_gate.cc  reaching an approval gate, and pausing there
//   timer.cc, signal_wait.cc, child_run.cc  parking at a sleep, a wait, a run step
// Writes go through RunWriter (run_writer.h); references through the template
// scope (template_scope.h).
//
// Thread-safety: Run() is called by one thread; Stop()/root()/lease() from any
// (the lease keeper). Parallel branches run on threads Run() owns and joins.
#pragma once

#include "runloom/env.h"
#include "runloom/events.h"
#include "runloom/gate.h"
#include "runloom/mutex.h"
#include "runloom/run.h"
#include "runloom/scheduler.h"
#include "runloom/step.h"
#include "runloom/store.h"
#include "runloom/workflow.h"

#include "engine/observe/engine_metrics.h"
#include "engine/observe/stage_events.h"
#include "engine/rules/run_context.h"
#include "engine/rules/template_scope.h"
#include "engine/run/child_run.h"
#include "engine/run/run_writer.h"
#include "engine/run/secrets.h"
#include "engine/run/stop.h"
#include "llm/provider.h"

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace runloom::engine_internal {

class AgentRun;  // agent_step.cc: one agent's tools and their schemas
class LiveText;  // observe/live_text.h: streamed replies to live subscribers

struct ExecutionConfig {
  Store* store = nullptr;
  Clock* clock = nullptr;
  // Runs parallel branches side by side (runloom/scheduler.h). Never null.
  Scheduler* scheduler = ThreadScheduler();
  StepRegistry* registry = nullptr;
  // Where a failure that ends the execution without a returned status is
  // logged, and the step duration histogram. Never null.
  Logger* logger = DefaultLogger();
  EngineMetrics* metrics = EngineMetrics::Disabled();
  std::string working_dir;
  // Stage events (stage_events.h); nullptr = off.
  StageEventPublisher* stage_events = nullptr;
  // A sleep at least this long parks the run (EngineOptions).
  absl::Duration park_sleeps_over = absl::InfiniteDuration();
  // The timeout of a step that sets none, by kind, over the kind's
  // DefaultTimeout() (EngineOptions::step_timeouts); nullptr = none. Not
  // owned.
  const std::map<std::string, absl::Duration>* step_timeouts = nullptr;
  // Secret inputs given to StartRun in this process (never stored).
  nlohmann::json secrets = nlohmann::json::object();
  // How this pass over the graph began (fresh, resume, rerun, revision):
  // stamped on step.started so the events say which path ran a step.
  RunEntry entry = RunEntry::kFresh;
  // Set for a run's first execution, created before its lease: the run's
  // first write takes the lease in the same transaction (see RunWriter). No
  // step runs before that write succeeds.
  using LeaseRequest = FirstLeaseRequest;
  std::optional<LeaseRequest> lease_request;
  // Admits the child run of a `kind: run` step (Admission::StartRun with a
  // ChildLink); empty = this engine starts no children (the step fails).
  StartChildFn start_child;
  // Where a step's streamed reply goes (StepContext::StreamDelta); nullptr =
  // nowhere. Not owned.
  LiveText* live = nullptr;
  // Where the run's, its step attempts' and its steps' own spans go
  // (Env::spans, runloom/trace.h); nullptr = untraced. Not owned.
  SpanSink* spans = nullptr;
};

// How the execution ended.
enum class Disposition {
  kFinished,    // a terminal status was written
  kPaused,      // paused at an approval gate
  kWaiting,     // parked at a timer (a long sleep): no lease, no executor
  kReleased,    // given back to the queue (shutdown)
  kLeaseLost,   // a write was refused or renewal failed: nothing more written
  kStoreError,  // the store failed; lease expiry will recover the run
};

class RunExecution {
 public:
  RunExecution(ExecutionConfig config, RunRecord run, Lease lease,
               std::shared_ptr<const Workflow> workflow, std::vector<StepRecord> records);
  RunExecution(const RunExecution&) = delete;
  RunExecution& operator=(const RunExecution&) = delete;

  Disposition Run();

  // The lease (token empty while a first execution has not taken it yet).
  Lease lease() const { return writer_.lease(); }
  // For a first execution (config.lease_request): why the lease could not be
  // taken (the run's first write was refused as a whole), else OK.
  absl::Status lease_error() const { return writer_.lease_error(); }
  // For a first execution: true when the lease was taken but it was not the
  // run's first (another executor leased it in between), so nothing was
  // written with it and the caller must go on with lease() as for a resumed
  // run (read the recorded steps, new RunExecution).
  bool lease_needs_records() const { return writer_.lease_needs_records(); }
  // A write ending the lease (terminal status, pause, park, release) has
  // begun: see RunWriter::releasing().
  bool lease_releasing() const { return writer_.releasing(); }
  const std::string& run_id() const { return run_.id; }
  // The run, its lease attempt and the worker holding it, for log lines.
  LogFields log_fields() const {
    return {.run_id = run_.id, .attempt = run_.attempts, .worker = run_.lease_owner};
  }
  // The run that started this one with a `kind: run` step ("" = none).
  const std::string& parent_run_id() const { return run_.parent_run_id; }
  StopSource& root() { return root_; }
  // The status written when Run() returned kFinished.
  RunStatus final_status() const { return final_status_; }
  const std::string& final_error() const { return final_error_; }

  // Fenced terminal write used when the run cannot even start (attempt cap,
  // version mismatch). Returns the disposition.
  Disposition FailBeforeStart(const std::string& error);

  // Asks the execution to stop at the next step boundary and release the run
  // (worker shutdown). In-flight steps run on until root() is stopped.
  void Drain();

 private:
  // A non-OK status from these means "stop executing the run" (kAborted:
  // lease lost; kCancelled: stop requested; others: store failure).
  // graph_walk.cc:
  absl::StatusOr<StepResult> RunSequence(const std::vector<StepDef>& steps,
                                         const std::string& prefix, Scope& scope, StopSource& stop);
  absl::StatusOr<StepResult> RunStep(const StepDef& step, const std::string& path, Scope& scope,
                                     StopSource& stop);
  absl::StatusOr<StepResult> RunLoop(const StepDef& step, const std::string& path, Scope& scope,
                                     StopSource& stop);
  absl::StatusOr<StepResult> RunParallel(const StepDef& step, const std::string& path, Scope& scope,
                                         StopSource& stop);
  // Whether a step not recorded yet runs: its trigger decision, then `when:`
  // and the stop state. Sets `skip_reason` when it does not. kCancelled when
  // the run is stopping.
  absl::StatusOr<bool> ShouldRun(const StepDef& step, bool triggered, std::string& skip_reason,
                                 const Scope& scope, StopSource& stop);
  // leaf_step.cc. `literal` (optional) is added to the step's config after
  // its templates are resolved, as is: an agent's conversation.
  absl::StatusOr<StepResult> RunLeaf(const StepDef& step, const std::string& path, Scope& scope,
                                     StopSource& stop, const nlohmann::json* literal = nullptr);
  // One attempt's timeout: the step's `timeout:` (or its workflow's
  // defaults.timeout), else ExecutionConfig::step_timeouts' for its kind,
  // else the kind's DefaultTimeout(). InfiniteDuration() = unbounded.
  absl::Duration TimeoutOf(const StepDef& step, const StepKind& kind) const;
  absl::Status WriteStepStarted(const StepDef& step, const std::string& path, int attempt);
  // `phase` if the run's phase must change to it (then remembered as
  // written), else nullopt: an empty phase or the current one.
  std::optional<std::string> EnterPhase(const std::string& phase) ABSL_LOCKS_EXCLUDED(phase_mu_);
  // One execution of a leaf step's kind: its result and the events the kind
  // recorded through StepContext::RecordEvent (written with the result).
  struct Attempt {
    absl::StatusOr<StepOutput> out;
    std::vector<Event> events;
  };
  Attempt ExecuteAttempt(StepKind& kind, const StepDef& step, const std::string& path, int attempt,
                         absl::Time deadline, Scope& scope, StopSource& stop,
                         const nlohmann::json* literal);
  // A debug line for a failed attempt (retried or not), its error scrubbed
  // of the run's secrets like everything written.
  void LogAttemptFailed(const std::string& path, int attempt, ErrorClass cls,
                        const absl::Status& err) const;
  // agent_step.cc: the model's turns as llm leaf steps, each turn's tool
  // calls as the tools' own steps (side by side unless one parks the run).
  absl::StatusOr<StepResult> RunAgent(const StepDef& step, const std::string& path, Scope& scope,
                                      StopSource& stop);
  // The answers to one turn's calls, in order; fewer when a call parked the
  // run (halt_ set).
  absl::StatusOr<std::vector<StepResult>> RunToolCalls(const AgentRun& agent,
                                                       const std::vector<LlmToolCall>& calls,
                                                       const std::string& turn_path, Scope& scope,
                                                       StopSource& stop);
  // approval_gate.cc:
  absl::StatusOr<StepResult> RunApproval(const StepDef& step, const std::string& path,
                                         Scope& scope);
  Disposition Pause();
  // timer.cc: a sleep long enough parks the run; else (or once due) it
  // runs as a leaf for what is left of it.
  absl::StatusOr<StepResult> RunSleep(const StepDef& step, const std::string& path, Scope& scope,
                                      StopSource& stop);
  Disposition Park();
  // signal_wait.cc: a wait step resolved by a signal already consumed for
  // it, by its passed timeout, or by a signal in the mailbox; else the run
  // parks here (the park write is RunWait's own: the store refuses it when
  // a signal came in between, and RunWait then consumes that one).
  absl::StatusOr<StepResult> RunWait(const StepDef& step, const std::string& path);
  // child_run.cc: a run step admits its child (idempotently) and parks the
  // run until the child ends; the child's terminal status is its result.
  absl::StatusOr<StepResult> RunChild(const StepDef& step, const std::string& path, Scope& scope);
  // After a wait or run step's own park write: the walk stops here, with
  // nothing recorded for the step (signal_wait.cc).
  StepResult ParkedAtStep();

  absl::StatusOr<nlohmann::json> Resolve(const std::string& ref, const Scope& scope) const;
  // Deferred (RunWriter), unless it consumes a signal: that write is made
  // at once, so a refusal is known before the step counts as done.
  absl::Status Record(const StepDef& step, const std::string& path, const StepResult& result,
                      int attempt, absl::Time started, std::string stderr_tail,
                      std::vector<Event> extra_events,
                      std::optional<SignalConsumption> consume = std::nullopt);
  absl::Status Write(RunWrite write, bool defer = false) {
    return writer_.Write(std::move(write), defer);
  }
  // Records a loop's or a parallel step's own result and its event.
  absl::Status RecordContainer(const StepDef& step, const std::string& path,
                               const StepResult& result, absl::Time started);
  Disposition Finish(RunStatus status, const std::string& outcome, const std::string& error,
                     std::optional<BudgetStopData> budget = std::nullopt);
  // Ends the run budget_stopped with the figures of the refused reservation.
  Disposition BudgetStopped() ABSL_LOCKS_EXCLUDED(budget_mu_);
  // Records the first refused reservation and stops the run (any thread).
  void StopForBudget(const BudgetStopData& refused) ABSL_LOCKS_EXCLUDED(budget_mu_);
  Disposition StopDisposition();
  // Logs why the walk stopped early (a lost lease or a store error; a
  // requested stop is not logged).
  void LogStopped(const absl::Status& why);
  // The disposition of a failed run-level write `what` (kLeaseLost or
  // kStoreError), logged.
  Disposition WriteFailed(const char* what, const absl::Status& s);
  // After the run's terminal or pausing write: no step runs now, so a
  // reservation still open is an orphan (its reply was lost, or its settle
  // never reached the store) and goes back to the run and its tenant.
  void ReleaseLeftoverReservations();
  // The decision a write at `path` carries out (WriteKey::decision): the
  // nearest approval gate before its top-level step, as recorded in this
  // revision (approved or edited); "" when there is none.
  std::string WriteDecisionFor(const std::string& path) const;

  // Constant after construction.
  const ExecutionConfig config_;
  const RunRecord run_;
  const std::shared_ptr<const Workflow> workflow_;
  // Recorded results of this revision, by path (read-only after construction).
  std::map<std::string, StepRecord> records_;

  StopSource root_;
  // The secret values this execution knows (given in memory, or resolved
  // from references); every write is scrubbed of them.
  mutable SecretScrubber scrubber_;  // thread-safe; Resolve() adds to it
  RunWriter writer_;                 // after root_, which it stops, and scrubber_
  runloom::Mutex phase_mu_;
  std::string phase_ ABSL_GUARDED_BY(phase_mu_);  // the last phase written on the run

  std::atomic<bool> draining_{false};
  // Set when a step asked the budget ledger to reserve (any thread of the
  // run): the end of the execution then releases what is left reserved.
  std::atomic<bool> reserved_any_{false};

  // Set by the Run() thread when the graph must stop walking: a gate with
  // no decision yet (pause) or a rejecting decision.
  enum class Halt { kNone, kPause, kReject, kWait };
  Halt halt_ = Halt::kNone;
  StoredTimer pending_timer_;  // what Park() records
  bool parked_ = false;        // RunWait parked the run itself
  // Parallel steps being walked: a sleep inside one cannot park the run.
  std::atomic<int> parallel_depth_{0};
  PendingGate pending_gate_;  // what Pause() records for the reviewer
  std::string reject_error_;

  // The first model call refused by the budget ledger (any thread of the run).
  runloom::Mutex budget_mu_;
  std::optional<BudgetStopData> budget_stop_ ABSL_GUARDED_BY(budget_mu_);

  // Owned by the Run() thread.
  RunStatus final_status_ = RunStatus::kRunning;  // until Run() writes another
  std::string final_error_;
};

}  // namespace runloom::engine_internal
