// The engine: admission, the executor pool, the lease keeper and the sweeper.
#include "runloom/engine.h"

#include "core/digest.h"
#include "core/ids.h"
#include "core/status_macros.h"
#include "engine/decisions.h"
#include "engine/event_helpers.h"
#include "engine/run_execution.h"
#include "workflow/inputs.h"

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <filesystem>
#include <map>
#include <pthread.h>
#include <sched.h>
#include <set>
#include <thread>
#include <unistd.h>

namespace runloom {

using engine_internal::Disposition;
using engine_internal::ExecutionConfig;
using engine_internal::RunExecution;
using engine_internal::StopReason;
namespace events = engine_internal::events;

namespace {

std::string DefaultOwner() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return absl::StrCat(host[0] ? host : "localhost", ":", getpid());
}

// "file:line: " for messages about a step.
std::string Where(const Workflow& wf, const StepDef& step) {
  std::string file = wf.source_path.empty() ? wf.name : wf.source_path;
  return step.line > 0 ? absl::StrCat(file, ":", step.line, ": ") : absl::StrCat(file, ": ");
}

absl::Status ValidateApproval(const Workflow& wf, const StepDef& step, bool in_parallel) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(wf, step), "step '", step.id, "': ", what));
  };
  if (in_parallel) {
    return bad("an approval gate cannot sit inside a parallel branch; put it after the join");
  }
  for (const auto& [key, value] : step.config.items()) {
    if (key != "proposal" && key != "allow" && key != "revision_phase" && key != "title") {
      return bad(
          absl::StrCat("unknown key '", key,
                       "' for an approval step; allowed: proposal, allow, revision_phase, title"));
    }
  }
  if (!step.config.contains("proposal")) {
    return bad("an approval step needs `proposal:` (what the reviewer decides on)");
  }
  if (step.config.contains("allow")) {
    const nlohmann::json& allow = step.config["allow"];
    if (!allow.is_array() || allow.empty()) return bad("`allow:` must be a non-empty list");
    for (const nlohmann::json& a : allow) {
      bool known = false;
      for (const char* d : engine_internal::kDecisions) known = known || (a.is_string() && a == d);
      if (!known) {
        return bad(absl::StrCat("`allow:` has ", a.dump(),
                                "; use approve, edit, reject, request_revision"));
      }
    }
  }
  if (step.config.contains("revision_phase")) {
    const nlohmann::json& p = step.config["revision_phase"];
    if (!p.is_string() || engine_internal::FirstStepOfPhase(wf, p.get<std::string>()) < 0) {
      return bad(
          absl::StrCat("`revision_phase: ", p.dump(), "` is not the phase of any top-level step"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateStepList(const Workflow& wf, const std::vector<StepDef>& steps,
                              const StepRegistry& registry, bool in_parallel = false) {
  for (const StepDef& step : steps) {
    if (step.kind == "loop") {
      RUNLOOM_RETURN_IF_ERROR(ValidateStepList(wf, step.body, registry, in_parallel));
      continue;
    }
    if (step.kind == "parallel") {
      for (const Branch& b : step.branches) {
        RUNLOOM_RETURN_IF_ERROR(ValidateStepList(wf, b.steps, registry, true));
      }
      continue;
    }
    if (step.kind == "approval") {
      RUNLOOM_RETURN_IF_ERROR(ValidateApproval(wf, step, in_parallel));
      continue;
    }
    std::shared_ptr<StepKind> kind = registry.Find(step.kind);
    if (kind == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(Where(wf, step), "step '", step.id,
                                                     "' has unknown kind '", step.kind,
                                                     "'; use one of exec, noop, sleep, fail, llm, "
                                                     "loop, parallel or a kind registered in C++"));
    }
    absl::Status s = kind->Validate(step);
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(wf, step), "step '", step.id, "': ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateStepKinds(const Workflow& wf, const StepRegistry& registry) {
  return ValidateStepList(wf, wf.steps, registry);
}

class Engine::Impl {
 public:
  Impl(EngineOptions options, Backend backend)
      : options_(std::move(options)), backend_(std::move(backend)) {
    if (options_.clock == nullptr) options_.clock = backend_.store->clock();
    if (options_.owner.empty()) options_.owner = DefaultOwner();
    if (options_.registry == nullptr) options_.registry = StepRegistry::WithBuiltins();
    if (options_.heartbeat <= absl::ZeroDuration()) options_.heartbeat = options_.lease_ttl / 3;
    if (options_.executors < 1) options_.executors = 1;
  }
  ~Impl() { Stop(); }

  Store* store() { return backend_.store.get(); }
  Transport* transport() { return backend_.transport.get(); }
  Clock* clock() { return options_.clock; }

  absl::Status ValidateSteps(const Workflow& wf) const {
    return ValidateStepKinds(wf, *options_.registry);
  }

  absl::StatusOr<WorkflowVersion> RegisterWorkflow(const Workflow& wf) {
    RUNLOOM_RETURN_IF_ERROR(ValidateWorkflow(wf));
    RUNLOOM_RETURN_IF_ERROR(ValidateSteps(wf));
    return store()->RegisterWorkflow(wf.name, WorkflowDigest(wf), CanonicalWorkflow(wf));
  }

  absl::StatusOr<CreateRunResult> StartRun(const StartRunRequest& req) {
    WorkflowVersion version;
    std::shared_ptr<const Workflow> wf;
    if (req.workflow) {
      RUNLOOM_ASSIGN_OR_RETURN(version, RegisterWorkflow(*req.workflow));
      wf = std::make_shared<const Workflow>(*req.workflow);
    } else {
      // A catalog version never changes (a changed definition gets the next
      // number), so an explicit version read once is reused for admission;
      // executors still verify the pinned definition (LoadPinned).
      const std::string key = absl::StrCat(req.workflow_name, "@", req.workflow_version);
      if (req.workflow_version > 0) {
        absl::MutexLock l(&mu_);
        auto it = admission_.find(key);
        if (it != admission_.end()) {
          version = it->second.first;
          wf = it->second.second;
        }
      }
      if (wf == nullptr) {
        RUNLOOM_ASSIGN_OR_RETURN(version,
                                 store()->GetWorkflow(req.workflow_name, req.workflow_version));
        RUNLOOM_ASSIGN_OR_RETURN(Workflow loaded, WorkflowFromCanonical(version.canonical));
        wf = std::make_shared<const Workflow>(std::move(loaded));
        if (req.workflow_version > 0) {
          WorkflowVersion meta = version;
          meta.canonical = nullptr;  // not needed for admission
          absl::MutexLock l(&mu_);
          admission_[key] = {std::move(meta), wf};
        }
      }
    }
    RUNLOOM_ASSIGN_OR_RETURN(nlohmann::json frozen, FreezeInputs(*wf, req.inputs));
    NewRun run;
    {
      absl::MutexLock l(&mu_);
      run.id = NewRunId(clock()->Now(), bitgen_);
    }
    run.workflow_name = version.name;
    run.workflow_version = version.version;
    run.workflow_digest = version.digest;
    run.inputs_digest = JsonDigest(frozen);
    run.inputs = std::move(frozen);
    run.idempotency_key = req.idempotency_key;
    run.max_attempts = options_.max_attempts;
    std::string working_dir = req.working_dir;
    if (working_dir.empty() && req.workflow && !req.workflow->source_path.empty()) {
      std::string p = req.workflow->source_path;
      size_t slash = p.rfind('/');
      working_dir = slash == std::string::npos ? "." : p.substr(0, slash == 0 ? 1 : slash);
    }
    if (!working_dir.empty()) {
      // Absolute, so a worker started from another directory finds the scripts.
      std::error_code ec;
      std::filesystem::path abs = std::filesystem::absolute(working_dir, ec);
      run.context["working_dir"] = ec ? working_dir : abs.lexically_normal().string();
    }
    std::vector<Event> ev = {RunCreatedEvent(run.id, {.workflow = version.name,
                                                      .workflow_version = version.version,
                                                      .workflow_digest = version.digest,
                                                      .inputs_digest = run.inputs_digest,
                                                      .idempotency_key = req.idempotency_key})};
    RUNLOOM_ASSIGN_OR_RETURN(CreateRunResult created, store()->CreateRun(run, std::move(ev)));
    // Secret inputs live only in this process's memory, for its own executions.
    nlohmann::json secrets = nlohmann::json::object();
    for (const InputDef& in : wf->inputs) {
      if (in.secret && req.inputs.contains(in.name)) secrets[in.name] = req.inputs[in.name];
    }
    if (created.created && !secrets.empty()) {
      absl::MutexLock l(&mu_);
      secrets_[created.run.id] = std::move(secrets);
    }
    return created;
  }

  // Loads the pinned workflow version; fails closed on any mismatch.
  // `first_execution`: the run has never been leased before.
  absl::StatusOr<std::shared_ptr<const Workflow>> LoadPinned(const RunRecord& run,
                                                             bool first_execution = false) {
    const std::string pinned =
        absl::StrCat(run.workflow_name, "@", run.workflow_version, "@", run.workflow_digest);
    {
      // A definition this process verified against the catalog (its digest
      // is the pinned one: it is part of the key) is trusted for a run's
      // first execution and for runs created after it was verified, so a
      // run of a hot workflow costs no catalog read. A run resumed after a
      // pause or a crash is always checked against the catalog as it is now.
      absl::MutexLock l(&mu_);
      auto it = workflows_.find(pinned);
      if (it != workflows_.end() && (first_execution || run.created_at >= it->second.verified_at)) {
        return it->second.workflow;
      }
    }
    const absl::Time verified_at = clock()->Now();
    auto v = store()->GetWorkflow(run.workflow_name, run.workflow_version);
    if (!v.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("workflow ", run.workflow_name, " version ", run.workflow_version,
                       " pinned by this run is not in the catalog (", v.status().message(),
                       "); the run fails closed"));
    }
    if (v->digest != run.workflow_digest) {
      return absl::FailedPreconditionError(absl::StrCat(
          "workflow ", run.workflow_name, " version ", run.workflow_version, " has digest ",
          v->digest, " but the run pinned ", run.workflow_digest, "; the run fails closed"));
    }
    const std::string& key = pinned;
    {
      absl::MutexLock l(&mu_);
      auto it = workflows_.find(key);
      if (it != workflows_.end() && it->second.canonical == v->canonical) {
        it->second.verified_at = std::max(it->second.verified_at, verified_at);
        return it->second.workflow;
      }
    }
    auto wf = WorkflowFromCanonical(v->canonical);
    if (!wf.ok() || WorkflowDigest(*wf) != run.workflow_digest) {
      return absl::FailedPreconditionError(absl::StrCat(
          "workflow ", run.workflow_name, " version ", run.workflow_version,
          " changed under its pinned digest ", run.workflow_digest, "; the run fails closed"));
    }
    auto shared = std::make_shared<const Workflow>(*std::move(wf));
    absl::MutexLock l(&mu_);
    workflows_[key] = CachedWorkflow{v->canonical, shared, verified_at};
    return shared;
  }

  // Takes the lease and runs the run in this thread. `on_leased` runs once
  // the lease is held (the executor acks its queue message there).
  absl::StatusOr<RunRecord> ExecuteRun(const std::string& run_id,
                                       const std::function<void(const Lease&)>& on_leased,
                                       bool want_record = true) {
    RUNLOOM_ASSIGN_OR_RETURN(RunRecord run, store()->GetRun(run_id));
    // No lease before this one and no event but run.created.
    const bool never_ran = run.attempts == 0 && run.last_event_seq <= 1 && run.revision == 1;
    if (IsTerminal(run.status) || run.status == RunStatus::kPaused) {
      return absl::FailedPreconditionError(absl::StrCat(
          "run ", run_id, " is ", std::string(ToString(run.status)), "; nothing to execute"));
    }
    const RunEntry entry =
        run.attempts > 0 ? RunEntry::kResume : ParseRunEntry(run.entry).value_or(RunEntry::kFresh);
    std::vector<Event> started = {RunStartedEvent(
        run_id, {.lease_owner = options_.owner, .revision = run.revision, .entry = entry})};
    ExecutionConfig config;
    config.store = store();
    config.clock = clock();
    config.registry = options_.registry.get();
    config.working_dir = run.context.value("working_dir", "");
    config.entry = std::string(ToString(entry));
    {
      absl::MutexLock l(&mu_);
      auto it = secrets_.find(run_id);
      if (it != secrets_.end()) config.secrets = it->second;
    }
    // `run` was read before the lease. What may have changed since: a cancel
    // request (the next step start is refused, so it is seen), nothing else
    // that the executor reads (decisions and reruns need a paused or
    // terminal run).
    auto wf = LoadPinned(run, /*first_execution=*/never_ran);
    std::optional<Lease> lease;
    if (never_ran && wf.ok()) {
      // A first execution: no step can have been recorded, and the lease
      // rides on the run's first write (RunExecution takes it).
      ExecutionConfig first = config;
      first.lease_request =
          ExecutionConfig::LeaseRequest{options_.owner, options_.lease_ttl, started, on_leased};
      RunRecord pending = run;
      pending.status = RunStatus::kRunning;
      pending.attempts = 1;
      pending.lease_owner = options_.owner;
      auto exec = std::make_shared<RunExecution>(std::move(first), pending, Lease{}, *wf,
                                                 std::vector<StepRecord>{});
      Track(exec, [&] {
        if (run.cancel_requested) exec->root().RequestStop(StopReason::kCancel);
        return exec->Run();
      });
      absl::Status not_leased = exec->lease_error();
      if (!not_leased.ok()) return not_leased;
      if (!exec->lease_needs_records()) return Finished(*exec, run, want_record);
      lease = exec->lease();  // leased, but not first: go on as for a resumed run
    }
    if (!lease.has_value()) {
      RUNLOOM_ASSIGN_OR_RETURN(
          lease, store()->AcquireLease(run_id, options_.owner, options_.lease_ttl, started));
      if (on_leased) on_leased(*lease);
    }
    run.status = RunStatus::kRunning;
    run.attempts = lease->attempt;
    run.lease_owner = lease->owner;
    run.lease_token = lease->token;
    std::vector<StepRecord> records;
    if (wf.ok()) {
      RUNLOOM_ASSIGN_OR_RETURN(records, store()->ListSteps(run_id, run.revision));
    }
    auto exec = std::make_shared<RunExecution>(std::move(config), run, *lease,
                                               wf.ok() ? *wf : nullptr, std::move(records));
    Track(exec, [&] {
      if (!wf.ok()) return exec->FailBeforeStart(std::string(wf.status().message()));
      if (lease->attempt > run.max_attempts) {
        return exec->FailBeforeStart(absl::StrCat("attempt cap reached: lease ", lease->attempt,
                                                  " of at most ", run.max_attempts));
      }
      if (run.cancel_requested) exec->root().RequestStop(StopReason::kCancel);
      return exec->Run();
    });
    return Finished(*exec, run, want_record);
  }

  // Runs `body` with `exec` registered as active (the lease keeper renews
  // it; Stop() drains it) and counts its disposition.
  void Track(const std::shared_ptr<RunExecution>& exec, const std::function<Disposition()>& body) {
    {
      absl::MutexLock l(&mu_);
      active_[exec->run_id()] = exec;
      if (draining_) exec->Drain();
    }
    Count(body());
    absl::MutexLock l(&mu_);
    active_.erase(exec->run_id());
  }

  absl::StatusOr<RunRecord> Finished(const RunExecution& exec, RunRecord& run, bool want_record) {
    if (exec.final_status() != RunStatus::kPaused) {
      absl::MutexLock l(&mu_);
      secrets_.erase(run.id);
    }
    if (!want_record) {
      run.status = exec.final_status();
      return std::move(run);  // the executor loop ignores it: skip the read
    }
    return store()->GetRun(run.id);
  }

  void Count(Disposition d) {
    switch (d) {
      case Disposition::kFinished:
        ++stats_.runs_finished;
        break;
      case Disposition::kPaused:
        ++stats_.runs_paused;
        break;
      case Disposition::kReleased:
        ++stats_.runs_released;
        break;
      case Disposition::kLeaseLost:
        ++stats_.leases_lost;
        break;
      case Disposition::kStoreError:
        break;
    }
  }

  EngineStats stats() const {
    return EngineStats{stats_.runs_finished.load(), stats_.runs_paused.load(),
                       stats_.runs_released.load(), stats_.leases_lost.load()};
  }

  // One dispatcher claims messages for the idle executors in one transport
  // call (one write for many runs), never more than there are idle
  // executors, so nothing waits claimed behind a busy executor.
  void DispatcherLoop() {
    while (true) {
      int want;
      {
        absl::MutexLock l(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stop_dispatch_ || idle_executors_ > static_cast<int>(work_.size());
        };
        mu_.Await(absl::Condition(&ready));
        if (stop_dispatch_) break;
        want = idle_executors_ - static_cast<int>(work_.size());
      }
      auto msgs = transport()->Claim(options_.owner, want, options_.visibility_timeout);
      if (!msgs.ok() || msgs->empty()) {
        transport()->WaitForMessages(clock()->Now() + options_.idle_poll);
        continue;
      }
      absl::MutexLock l(&mu_);
      for (QueueMessage& m : *msgs) work_.push_back(std::move(m));
    }
    // Give back what no executor started, so another worker gets it now.
    std::deque<QueueMessage> left;
    {
      absl::MutexLock l(&mu_);
      left.swap(work_);
    }
    for (const QueueMessage& m : left) (void)transport()->Release(m);
  }

  void ExecutorLoop() {
    if (options_.batch_scheduling) {
      // Best effort: a system that refuses it only loses some throughput.
      sched_param param{};
      (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &param);
    }
    while (true) {
      QueueMessage m;
      {
        absl::MutexLock l(&mu_);
        ++idle_executors_;
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stop_dispatch_ || !work_.empty();
        };
        mu_.Await(absl::Condition(&ready));
        --idle_executors_;
        if (stop_dispatch_) break;
        m = std::move(work_.front());
        work_.pop_front();
      }
      bool acked = false;
      auto on_leased = [&](const Lease&) {
        acked = true;
        (void)transport()->Ack(m);  // the lease stands for the message now
      };
      auto r = ExecuteRun(m.run_id, on_leased, /*want_record=*/false);
      if (!acked && r.status().code() != absl::StatusCode::kUnavailable) {
        // Not runnable (terminal, paused, gone) or leased elsewhere: the
        // lease and the sweeper own recovery from here.
        acked = true;
        (void)transport()->Ack(m);
      }
    }
  }

  void LeaseKeeperLoop() {
    absl::MutexLock l(&mu_);
    while (!keeper_stop_) {
      auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return keeper_stop_; };
      clock()->AwaitWithDeadline(&mu_, absl::Condition(&stop), clock()->Now() + options_.heartbeat);
      if (keeper_stop_) break;
      std::vector<std::shared_ptr<RunExecution>> snapshot;
      for (auto& [id, e] : active_) snapshot.push_back(e);
      mu_.Unlock();
      for (auto& e : snapshot) Renew(*e);
      mu_.Lock();
    }
  }

  void Renew(RunExecution& e) {
    const Lease lease = e.lease();
    if (lease.token.empty()) return;  // a first execution that has not leased yet
    auto r = store()->RenewLease(e.run_id(), lease.token, options_.lease_ttl);
    if (r.ok()) {
      if (r->cancel_requested) e.root().RequestStop(StopReason::kCancel);
      return;
    }
    if (r.status().code() == absl::StatusCode::kUnavailable && clock()->Now() < lease.expires_at) {
      return;  // try again next beat
    }
    // A failed renewal stops the executor at once.
    e.root().RequestStop(StopReason::kLeaseLost);
  }

  engine_internal::DecisionContext Decisions() {
    return engine_internal::DecisionContext{
        store(), clock(), [this](const RunRecord& run) { return LoadPinned(run); }};
  }

  absl::StatusOr<int> SweepOnce() {
    RUNLOOM_ASSIGN_OR_RETURN(std::vector<RecoveryCandidate> cands,
                             store()->FindRecoverable(options_.queued_grace, 1000));
    // Queued runs are re-enqueued only when the transport has neither a
    // pending message nor a dead letter for them (a dead-lettered run waits
    // for a redrive).
    std::set<std::string> quiet;
    {
      std::vector<std::string> queued;
      for (const RecoveryCandidate& c : cands) {
        if (c.status == RunStatus::kQueued) queued.push_back(c.run_id);
      }
      if (!queued.empty()) {
        auto presence = transport()->FindMessages(queued);
        if (presence.ok()) {
          quiet.insert(queued.begin(), queued.end());
          for (const std::string& id : presence->pending) quiet.erase(id);
          for (const std::string& id : presence->dead_lettered) quiet.erase(id);
        }
      }
    }
    int acted = 0;
    for (const RecoveryCandidate& c : cands) {
      absl::Status s;
      std::string owner = "unknown";
      if (c.status == RunStatus::kRunning) {
        auto run = store()->GetRun(c.run_id);
        if (run.ok() && !run->lease_owner.empty()) owner = run->lease_owner;
      }
      if (c.status == RunStatus::kRunning && c.attempts >= c.max_attempts) {
        RunWrite w;
        w.run_id = c.run_id;
        w.party = Party::kSweeper;
        w.expected = {RunStatus::kRunning};
        w.lease_token = c.lease_token;
        w.new_status = RunStatus::kFailed;
        w.outcome = "failed";
        w.error = absl::StrCat("attempt cap reached: ", c.attempts, " leases expired");
        w.events = {RunLeaseExpiredEvent(c.run_id, {.attempt = c.attempts, .lease_owner = owner}),
                    events::RunFinished(c.run_id, RunStatus::kFailed, "failed", *w.error)};
        s = store()->Commit(w);
      } else if (c.status == RunStatus::kRunning) {
        s = store()->Enqueue(
            c.run_id,
            {RunLeaseExpiredEvent(c.run_id, {.attempt = c.attempts, .lease_owner = owner})});
      } else {
        if (quiet.count(c.run_id) == 0) continue;  // the transport still has it
        s = store()->Enqueue(c.run_id, {});
      }
      if (s.ok()) ++acted;
    }
    return acted;
  }

  void SweeperLoop() {
    absl::MutexLock l(&mu_);
    while (!keeper_stop_) {
      auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return keeper_stop_; };
      clock()->AwaitWithDeadline(&mu_, absl::Condition(&stop),
                                 clock()->Now() + options_.sweep_interval);
      if (keeper_stop_) break;
      mu_.Unlock();
      (void)SweepOnce();
      mu_.Lock();
    }
  }

  void StartBackground() {
    absl::MutexLock l(&mu_);
    if (keeper_started_) return;
    keeper_started_ = true;
    keeper_stop_ = false;
    background_.emplace_back([this] { LeaseKeeperLoop(); });
    if (options_.enable_sweeper) background_.emplace_back([this] { SweeperLoop(); });
  }

  void Start() {
    StartBackground();
    absl::MutexLock l(&mu_);
    if (!executors_.empty()) return;
    stop_dispatch_ = false;
    for (int i = 0; i < options_.executors; ++i) {
      executors_.emplace_back([this] { ExecutorLoop(); });
    }
    executors_.emplace_back([this] { DispatcherLoop(); });
  }

  void Stop() {
    transport()->Interrupt();
    {
      absl::MutexLock l(&mu_);
      stop_dispatch_ = true;  // no new claims, no new runs started
      draining_ = true;
      for (auto& [id, e] : active_) e->Drain();
      auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return active_.empty(); };
      clock()->AwaitWithDeadline(&mu_, absl::Condition(&idle),
                                 clock()->Now() + options_.drain_timeout);
      for (auto& [id, e] : active_) e->root().RequestStop(StopReason::kShutdown);
    }
    std::vector<std::thread> threads;
    {
      absl::MutexLock l(&mu_);
      threads.swap(executors_);
    }
    for (std::thread& t : threads) t.join();
    threads.clear();
    {
      absl::MutexLock l(&mu_);
      keeper_stop_ = true;
      threads.swap(background_);
      keeper_started_ = false;
    }
    for (std::thread& t : threads) t.join();
  }

  absl::StatusOr<RunRecord> AwaitRun(const std::string& run_id, absl::Time deadline) {
    constexpr absl::Duration kPoll = absl::Milliseconds(20);
    while (true) {
      RUNLOOM_ASSIGN_OR_RETURN(RunRecord run, store()->GetRun(run_id));
      if (IsTerminal(run.status) || run.status == RunStatus::kPaused) return run;
      absl::Time now = clock()->Now();
      if (now >= deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("run ", run_id, " is still ", std::string(ToString(run.status))));
      }
      transport()->WaitForMessages(std::min(deadline, now + kPoll));
    }
  }

  int ActiveRuns() {
    absl::MutexLock l(&mu_);
    return static_cast<int>(active_.size());
  }

 private:
  EngineOptions options_;  // constant after construction
  Backend backend_;
  struct {
    std::atomic<int64_t> runs_finished{0}, runs_paused{0}, runs_released{0}, leases_lost{0};
  } stats_;

  absl::Mutex mu_;
  absl::BitGen bitgen_ ABSL_GUARDED_BY(mu_);
  struct CachedWorkflow {
    nlohmann::json canonical;
    std::shared_ptr<const Workflow> workflow;
    absl::Time verified_at;  // runs created after this may trust `workflow`
  };
  std::map<std::string, CachedWorkflow> workflows_ ABSL_GUARDED_BY(mu_);
  // name@version -> the version's metadata and definition, for admission.
  std::map<std::string, std::pair<WorkflowVersion, std::shared_ptr<const Workflow>>> admission_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<RunExecution>> active_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, nlohmann::json> secrets_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  // Claimed messages waiting for an executor, and how many executors wait.
  std::deque<QueueMessage> work_ ABSL_GUARDED_BY(mu_);
  int idle_executors_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_dispatch_ ABSL_GUARDED_BY(mu_) = false;
  bool keeper_stop_ ABSL_GUARDED_BY(mu_) = false;
  bool keeper_started_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> executors_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> background_ ABSL_GUARDED_BY(mu_);
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

absl::StatusOr<std::unique_ptr<Engine>> Engine::Open(EngineOptions options, Backend backend) {
  if (backend.store == nullptr || backend.transport == nullptr) {
    return absl::InvalidArgumentError("Engine::Open needs a store and a transport");
  }
  if (options.lease_ttl <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("lease_ttl must be positive");
  }
  return std::unique_ptr<Engine>(
      new Engine(std::make_unique<Impl>(std::move(options), std::move(backend))));
}

absl::StatusOr<WorkflowVersion> Engine::RegisterWorkflow(const Workflow& wf) {
  return impl_->RegisterWorkflow(wf);
}
absl::Status Engine::ValidateSteps(const Workflow& wf) const { return impl_->ValidateSteps(wf); }
absl::StatusOr<CreateRunResult> Engine::StartRun(const StartRunRequest& request) {
  return impl_->StartRun(request);
}
void Engine::Start() { impl_->Start(); }
void Engine::Stop() { impl_->Stop(); }
absl::StatusOr<RunRecord> Engine::ExecuteRun(const std::string& run_id) {
  impl_->StartBackground();
  return impl_->ExecuteRun(run_id, nullptr);
}
absl::StatusOr<RunRecord> Engine::AwaitRun(const std::string& run_id, absl::Time deadline) {
  return impl_->AwaitRun(run_id, deadline);
}
absl::StatusOr<int> Engine::SweepOnce() { return impl_->SweepOnce(); }
absl::StatusOr<RunRecord> Engine::Decide(const std::string& run_id, const DecisionRequest& request,
                                         const std::string& reviewer) {
  return engine_internal::DecideRun(impl_->Decisions(), run_id, request, reviewer);
}
absl::StatusOr<RunRecord> Engine::Rerun(const std::string& run_id, const std::string& phase,
                                        const std::string& feedback, const std::string& by) {
  return engine_internal::RerunRun(impl_->Decisions(), run_id, phase, feedback, by);
}
absl::StatusOr<RunRecord> Engine::Cancel(const std::string& run_id, const std::string& by) {
  return engine_internal::CancelRun(impl_->Decisions(), run_id, by);
}
absl::StatusOr<int> Engine::ResetAll(const std::string& by) {
  return engine_internal::ResetAllRuns(impl_->Decisions(), by);
}
int Engine::ActiveRuns() const { return impl_->ActiveRuns(); }
EngineStats Engine::stats() const { return impl_->stats(); }
Store* Engine::store() { return impl_->store(); }
Transport* Engine::transport() { return impl_->transport(); }
Clock* Engine::clock() { return impl_->clock(); }

}  // namespace runloom
