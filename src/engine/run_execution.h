// RunExecution: one lease on one run, carrying its graph forward.
//
// Created by the executor after it took the lease. Run() walks the graph:
// steps with a recorded result in this revision are not executed again; each
// other step is started with a fenced write (step.started), executed, and its
// result recorded with a fenced write before any step that depends on it
// starts. When the graph ends, the terminal status is written with the
// lease token. Any refused write (stale token) stops the execution at once
// without writing anything else.
//
// Thread-safety: Run() is called by one thread; Stop()/root() from any
// (the lease keeper). Parallel branches run on threads Run() owns and joins.
#pragma once

#include "runloom/run.h"
#include "runloom/step.h"
#include "runloom/store.h"
#include "runloom/workflow.h"

#include "engine/stop.h"

#include "absl/status/statusor.h"

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace runloom::engine_internal {

// The state of one step id as seen by templates and trigger rules.
struct StepResult {
  StepState state = StepState::kSucceeded;
  nlohmann::json output;
  std::string error;
  std::string error_class;
};

// Template scope: the results visible at one point of the graph.
struct Scope {
  const Scope* parent = nullptr;
  std::map<std::string, StepResult> results;
  int loop_iteration = 0;  // 1-based inside a loop body, 0 outside
  const StepResult* Find(const std::string& id) const;
  int LoopIteration() const;
};

struct ExecutionConfig {
  Store* store = nullptr;
  Clock* clock = nullptr;
  StepRegistry* registry = nullptr;
  std::string working_dir;
  // Secret inputs given to StartRun in this process (never stored).
  nlohmann::json secrets = nlohmann::json::object();
  // How this pass over the graph began (fresh, resume, rerun, revision):
  // stamped on step.started so the events say which path ran a step.
  std::string entry = "fresh";
  // Set for a run's first execution, created before its lease: the run's
  // first write takes the lease in the same transaction
  // (Store::AcquireLease's first write), so a fresh run's lease and first step start
  // cost one commit. No step runs before that write succeeds.
  struct LeaseRequest {
    std::string owner;
    absl::Duration ttl;
    std::vector<Event> events;                    // run.started
    std::function<void(const Lease&)> on_leased;  // may be empty
  };
  std::optional<LeaseRequest> lease_request;
};

// How the execution ended.
enum class Disposition {
  kFinished,    // a terminal status was written
  kPaused,      // paused at an approval gate (later issue)
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
  Lease lease() const ABSL_LOCKS_EXCLUDED(lease_mu_);
  // For a first execution (config.lease_request): why the lease could not be
  // taken (the run's first write was refused as a whole), else OK.
  absl::Status lease_error() const ABSL_LOCKS_EXCLUDED(lease_mu_);
  // For a first execution: true when the lease was taken but it was not the
  // run's first (another executor leased it in between), so nothing was
  // written with it and the caller must go on with lease() as for a resumed
  // run (read the recorded steps, new RunExecution).
  bool lease_needs_records() const ABSL_LOCKS_EXCLUDED(lease_mu_);
  const std::string& run_id() const { return run_.id; }
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
  absl::StatusOr<StepResult> RunSequence(const std::vector<StepDef>& steps,
                                         const std::string& prefix, Scope& scope, StopSource& stop);
  absl::StatusOr<StepResult> RunStep(const StepDef& step, const std::string& path, Scope& scope,
                                     StopSource& stop);
  absl::StatusOr<StepResult> RunLeaf(const StepDef& step, const std::string& path, Scope& scope,
                                     StopSource& stop);
  absl::StatusOr<StepResult> RunLoop(const StepDef& step, const std::string& path, Scope& scope,
                                     StopSource& stop);
  absl::StatusOr<StepResult> RunApproval(const StepDef& step, const std::string& path,
                                         Scope& scope);
  absl::StatusOr<StepResult> RunParallel(const StepDef& step, const std::string& path, Scope& scope,
                                         StopSource& stop);

  absl::StatusOr<nlohmann::json> Resolve(const std::string& ref, const Scope& scope) const;
  absl::Status Record(const StepDef& step, const std::string& path, const StepResult& result,
                      int attempt, absl::Time started, std::string stderr_tail,
                      std::vector<Event> extra_events);
  // A fenced executor write. With `defer`, the write's step records and
  // events are held and committed with the next non-deferred write.
  absl::Status Write(RunWrite write, bool defer = false);
  // Records a loop's or a parallel step's own result and its event.
  absl::Status RecordContainer(const StepDef& step, const std::string& path,
                               const StepResult& result, absl::Time started);
  Disposition Finish(RunStatus status, const std::string& outcome, const std::string& error);
  Disposition StopDisposition();
  Disposition Pause();

  // Constant after construction.
  const ExecutionConfig config_;
  const RunRecord run_;
  mutable absl::Mutex lease_mu_;
  Lease lease_ ABSL_GUARDED_BY(lease_mu_);
  bool lease_pending_ ABSL_GUARDED_BY(lease_mu_) = false;
  absl::Status lease_error_ ABSL_GUARDED_BY(lease_mu_);
  bool lease_needs_records_ ABSL_GUARDED_BY(lease_mu_) = false;
  const std::shared_ptr<const Workflow> workflow_;
  // Recorded results of this revision, by path (read-only after construction).
  std::map<std::string, StepRecord> records_;

  StopSource root_;
  absl::Mutex write_mu_;  // orders this run's writes (parallel branches)
  std::string phase_ ABSL_GUARDED_BY(write_mu_);
  bool lease_lost_ ABSL_GUARDED_BY(write_mu_) = false;
  RunWrite pending_ ABSL_GUARDED_BY(write_mu_);  // deferred records and events

  std::atomic<bool> draining_{false};

  // Set by the Run() thread when the graph must stop walking: a gate with
  // no decision yet (pause) or a rejecting decision.
  enum class Halt { kNone, kPause, kReject };
  Halt halt_ = Halt::kNone;
  nlohmann::json pending_gate_;  // what Pause() records for the reviewer
  std::string reject_error_;

  // Owned by the Run() thread.
  RunStatus final_status_ = RunStatus::kRunning;  // until Run() writes another
  std::string final_error_;
};

// "refine[2]/write" style paths.
std::string ChildPath(const std::string& prefix, const std::string& id);

// The top-level step id a path belongs to: "refine[2]/write" -> "refine".
std::string TopLevelId(const std::string& path);

// Index of the first top-level step of `phase`, or -1.
int FirstStepOfPhase(const Workflow& wf, const std::string& phase);

// The decisions an approval step allows by default.
inline constexpr const char* kDecisions[] = {"approve", "edit", "reject", "request_revision"};

}  // namespace runloom::engine_internal
