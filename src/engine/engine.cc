// Engine (runloom/engine.h): wires the engine's parts together and forwards
// its public methods to them. Each part is in the file of its name:
//   admission.h       StartRun, RegisterWorkflow, secret inputs
//   pinned_catalog.h  a run's pinned workflow, verified and cached
//   executor_pool.h   the dispatcher and the executor threads
//   run_launcher.h    taking one run's lease and running it to an end
//   active_runs.h     the executions held now (renewed, drained on Stop)
//   lease_keeper.h    lease renewal
//   cancel_watch.h    a cancel from any process stops the execution quickly
//   engine_metrics.h  the runloom_* metrics on env.metrics
//   llm_caps.h        the llm step's concurrency controllers (executing processes)
//   random_source.h   env.random (or an OS-seeded generator) under a lock
//   sweeper.h         expired leases; reconciler.h: queued runs with no message
//   decisions.h       decide, rerun, cancel, admin reset
//   watches.h         AwaitRun, WatchEvents, WatchRuns, AwaitIdle (bus wake-ups)
//   live_text.h       streamed model text to this process's subscribers;
//                     live_text_relay.h: to and from other processes
#include "runloom/engine.h"

#include "runloom/mutex.h"
#include "runloom/scheduler.h"

#include "core/log.h"
#include "core/status_macros.h"
#include "engine/admission.h"
#include "engine/decisions.h"
#include "engine/engine_driver.h"
#include "engine/observe/engine_metrics.h"
#include "engine/observe/live_text.h"
#include "engine/observe/live_text_relay.h"
#include "engine/observe/run_spans.h"
#include "engine/service/state_gauges.h"
#include "engine/observe/stage_events.h"
#include "engine/rules/run_context.h"
#include "engine/run/child_run.h"
#include "engine/schedules.h"
#include "engine/service/active_runs.h"
#include "engine/service/cancel_watch.h"
#include "engine/service/executor_pool.h"
#include "engine/service/lease_holder.h"
#include "engine/service/lease_keeper.h"
#include "engine/service/llm_caps.h"
#include "engine/service/pinned_catalog.h"
#include "engine/service/random_source.h"
#include "engine/service/retention_sweep.h"
#include "engine/service/run_launcher.h"
#include "engine/service/sweeper.h"
#include "engine/service/watches.h"
#include "steps/builtin_steps.h"

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <algorithm>
#include <optional>
#include <unistd.h>

namespace runloom {

using engine_internal::Admission;
using engine_internal::EngineMetrics;
using engine_internal::ExecutorPool;
using engine_internal::ExecutorPoolOptions;
using engine_internal::LauncherConfig;
using engine_internal::LeaseKeeper;
using engine_internal::PinnedCatalog;
using engine_internal::RandomSource;
using engine_internal::RunLauncher;
using engine_internal::RunSecrets;
using engine_internal::StageEventPublisher;
using engine_internal::Sweeper;

namespace {

std::string DefaultOwner() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return absl::StrCat(host[0] ? host : "localhost", ":", getpid());
}

EngineOptions WithDefaults(EngineOptions options, Store* store) {
  if (options.env.clock == nullptr) options.env.clock = store->clock();
  if (options.env.logger == nullptr) options.env.logger = DefaultLogger();
  if (options.env.scheduler == nullptr) options.env.scheduler = ThreadScheduler();
  const std::optional<engine_internal::LeaseHolder> self = engine_internal::SelfHolder();
  if (options.owner.empty()) {
    options.owner = self.has_value() ? engine_internal::OwnerName(*self) : DefaultOwner();
  }
  if (!options.holder_is_dead && self.has_value()) {
    options.holder_is_dead = [self = *self](const std::string& owner) {
      const std::optional<engine_internal::LeaseHolder> holder =
          engine_internal::ParseOwnerName(owner);
      return holder.has_value() && engine_internal::CheckHolder(*holder, self,
                                                                engine_internal::LiveProcFs()) ==
                                       engine_internal::HolderState::kDead;
    };
  }
  if (options.registry == nullptr) options.registry = StepRegistry::WithLocalBuiltins();
  if (options.heartbeat <= absl::ZeroDuration()) options.heartbeat = options.lease_ttl / 3;
  if (options.cancel_check <= absl::ZeroDuration()) options.cancel_check = absl::Milliseconds(250);
  if (options.executors < 1) options.executors = 1;
  return options;
}

}  // namespace

class Engine::Impl {
 public:
  // REQUIRES: `options` has its defaults applied (WithDefaults).
  Impl(EngineOptions options, Backend backend, std::unique_ptr<EngineMetrics> metrics,
       std::unique_ptr<StageEventPublisher> stage_events,
       std::unique_ptr<engine_internal::LlmCaps> llm_caps)
      : llm_caps_(std::move(llm_caps)),
        backend_(std::move(backend)),
        options_(std::move(options)),
        random_(options_.env.random),
        metrics_(std::move(metrics)),
        stage_events_(std::move(stage_events)),
        relay_(&live_, store(), logger(),
               absl::StrFormat("%s/%016x", options_.owner, random_.Draw([](absl::BitGenRef g) {
                 return absl::Uniform<uint64_t>(g);
               }))),
        catalog_(store(), clock()),
        declared_(store()),
        admission_(store(), clock(), options_.registry.get(), &catalog_, &declared_, &secrets_,
                   &random_, metrics_.get()),
        launcher_(
            LauncherConfig{store(), clock(), options_.env.scheduler, options_.registry.get(),
                           logger(), metrics_.get(), options_.owner, options_.lease_ttl,
                           stage_events_.get(), options_.park_sleeps_over, options_.step_timeouts,
                           [this](const engine_internal::ChildStart& child) {
                             StartRunRequest req;
                             req.workflow_name = child.workflow;
                             req.workflow_version = child.version;
                             req.inputs = child.inputs;
                             req.idempotency_key = child.idempotency_key;
                             req.working_dir = child.working_dir;
                             req.traceparent = child.traceparent;
                             return admission_.StartRun(req, &child.link);
                           },
                           [this](const engine_internal::ChildEnd& child) { TellParent(child); },
                           &live_, options_.env.spans},
            &catalog_, &secrets_, &active_),
        pool_(ExecutorPoolOptions{options_.owner, options_.executors, options_.runs_in_flight,
                                  options_.batch_scheduling,
                                  options_.visibility_timeout, options_.idle_poll},
              transport(), clock(), &launcher_, logger()),
        keeper_(store(), clock(), &active_, options_.heartbeat, options_.lease_ttl, logger()),
        cancel_watch_(store(), clock(), &active_, options_.cancel_check, logger()),
        sweeper_(
            store(), transport(), clock(), options_.env.scheduler, options_.sweep_interval,
            options_.queued_grace, logger(), metrics_.get(),
            [this](const RunRecord& run) { PublishFinished(run); },
            [this](const std::string& run_id) {
              return CancelHeld(run_id, "runloom (its parent run is finished)").status();
            }),
        retention_(store(), clock(), options_.retention, logger()),
        watches_(store(), backend_.events.get(), clock(), [this] { return active_.size(); }),
        schedules_(store(), clock(), logger(), options_.schedule_poll,
                   engine_internal::ScheduleFirer::Hooks{
                       .start_run =
                           [this](const StartRunRequest& req) { return admission_.StartRun(req); },
                       .cancel_run =
                           [this](const std::string& run_id, const std::string& by) {
                             return CancelHeld(run_id, by).status();
                           }}) {}
  ~Impl() { Stop(); }

  Store* store() { return backend_.store.get(); }
  Transport* transport() { return backend_.transport.get(); }
  Clock* clock() { return options_.env.clock; }
  Logger* logger() { return options_.env.logger; }

  absl::Status ValidateSteps(const Workflow& wf) const {
    return ValidateStepKinds(wf, *options_.registry);
  }
  Admission& admission() { return admission_; }
  RunLauncher& launcher() { return launcher_; }
  Sweeper& sweeper() { return sweeper_; }
  EngineStats stats() const { return launcher_.stats(); }
  std::vector<LlmCapInfo> LlmCapsNow() const { return llm_caps_->Snapshot(); }
  int ActiveRuns() { return active_.size(); }

  engine_internal::DecisionContext Decisions() {
    return engine_internal::DecisionContext{
        store(), clock(), [this](const RunRecord& run) { return catalog_.LoadPinned(run); },
        [this](const RunRecord& run) { PublishFinished(run); }};
  }

  // The terminal stage event of a run that ended without an execution
  // holding it (the sweeper's attempt cap, a cancel or reset of a run
  // nobody held); executions publish their own (RunExecution::Finish).
  void PublishFinished(const RunRecord& run) {
    if (!run.parent_run_id.empty()) TellParent(engine_internal::EndOf(run));
    engine_internal::ExportRunSpan(options_.env.spans, run, run.workflow_name, clock()->Now());
    if (stage_events_ == nullptr) return;
    absl::StatusOr<std::shared_ptr<const Workflow>> wf = catalog_.LoadPinned(run);
    if (!wf.ok()) {
      Log(logger(), LogLevel::kWarning, {.run_id = run.id}, "stage events: run ", run.id,
          ": terminal event not published: its workflow: ", wf.status().ToString());
      return;
    }
    stage_events_->Publish(run, **wf, engine_internal::TerminalStageUpdate(run.status, run.error));
  }

  // A finished child run (by an execution of this engine, or a cancel,
  // reset or the sweeper's attempt cap): its parent is told
  // (engine_internal::NotifyParentOfEnd).
  void TellParent(const engine_internal::ChildEnd& child) {
    absl::Status s = engine_internal::NotifyParentOfEnd(*store(), child);
    if (!s.ok()) {
      Log(logger(), LogLevel::kWarning, {.run_id = child.run_id}, "run ", child.run_id,
          ": its parent ", child.parent_run_id,
          " was not told it ended (its poll will find out): ", s.ToString());
    }
  }

  // Cancels `run_id`, and stops it now when this engine holds it; then its
  // children not finished, and theirs (a sweeper cancels those this misses,
  // Store::ListOrphanedChildren).
  absl::StatusOr<RunRecord> CancelHeld(const std::string& run_id, const std::string& by) {
    absl::StatusOr<RunRecord> run = engine_internal::CancelRun(Decisions(), run_id, by);
    if (run.ok() && run->status == RunStatus::kRunning) cancel_watch_.StopIfHeld(run_id);
    if (run.ok()) CancelChildren(run_id, by);
    return run;
  }
  // With `before_revision`: only the children of the parent's revisions
  // before it (a rerun's: the new revision starts children of its own).
  void CancelChildren(const std::string& parent_id, const std::string& by,
                      std::optional<int64_t> before_revision = std::nullopt) {
    RunFilter f;
    f.parent_run_id = parent_id;
    f.limit = 0;
    absl::StatusOr<std::vector<RunRecord>> children = store()->ListRuns(f);
    if (!children.ok()) return;  // the sweeper's orphan pass does it (a finished parent's)
    for (const RunRecord& c : *children) {
      if (IsTerminal(c.status)) continue;
      const engine_internal::RunContext context = engine_internal::ContextOf(c);
      if (before_revision.has_value() &&
          (!context.parent.has_value() || context.parent->revision >= *before_revision)) {
        continue;
      }
      CancelHeld(c.id, absl::StrCat(by, " via parent ", parent_id)).IgnoreError();
    }
  }

  // The lease keeper, and the sweeper and the schedules if enabled. Idempotent.
  void StartBackground() {
    if (gauges_ != nullptr) gauges_->Start();
    llm_caps_->Start();
    relay_.Start();
    keeper_.Start();
    cancel_watch_.Start();
    if (options_.enable_sweeper) {
      sweeper_.Start();
      retention_.Start();
      schedules_.Start();
    }
  }

  void Start() {
    StartBackground();
    pool_.Start();
  }

  void Stop() {
    transport()->Interrupt();
    pool_.StopDispatch();  // no new claims, no new runs started
    active_.DrainAll(clock(), options_.drain_timeout);
    pool_.Join();
    relay_.Stop();  // after the executions: the rows of the calls they ended go
    keeper_.Stop();
    cancel_watch_.Stop();
    sweeper_.Stop();
    retention_.Stop();
    schedules_.Stop();
    llm_caps_->Stop();
    if (gauges_ != nullptr) gauges_->Stop();
  }

  // The state gauges on env.metrics (none without a registry), and the
  // sweeper's spans.
  absl::Status InitGauges() {
    sweeper_.set_spans(options_.env.spans);
    sweeper_.set_holder_check(options_.holder_is_dead);
    RUNLOOM_ASSIGN_OR_RETURN(gauges_, engine_internal::StateGauges::Create(
                                          options_.env.metrics, store(), transport(), clock(),
                                          logger(), options_.state_gauges_interval));
    return absl::OkStatus();
  }

  engine_internal::Watches& watches() { return watches_; }
  engine_internal::LiveText& live() { return live_; }
  engine_internal::LiveTextRelay& relay() { return relay_; }
  engine_internal::ScheduleFirer& schedules() { return schedules_; }
  engine_internal::PinnedCatalog& catalog() { return catalog_; }
  engine_internal::CancelWatch& cancel_watch() { return cancel_watch_; }
  LeaseKeeper& keeper() { return keeper_; }
  const EngineOptions& options() const { return options_; }

 private:
  // Constant after construction.
  const std::unique_ptr<engine_internal::LlmCaps> llm_caps_;  // outlives the executors
  Backend backend_;
  const EngineOptions options_;

  // The parts, each thread-safe on its own; declared in dependency order so
  // that each is destroyed before what it uses.
  RandomSource random_;
  const std::unique_ptr<EngineMetrics> metrics_;
  const std::unique_ptr<StageEventPublisher> stage_events_;  // null when off
  RunSecrets secrets_;
  engine_internal::LiveText live_;  // before the launcher, whose executions stream into it
  engine_internal::LiveTextRelay relay_;  // live_ to and from other processes
  engine_internal::ActiveRuns active_;
  PinnedCatalog catalog_;
  engine_internal::DeclaredSchedules declared_;
  Admission admission_;
  RunLauncher launcher_;
  ExecutorPool pool_;
  LeaseKeeper keeper_;
  engine_internal::CancelWatch cancel_watch_;
  Sweeper sweeper_;
  engine_internal::RetentionSweep retention_;  // started with the sweeper
  engine_internal::Watches watches_;
  engine_internal::ScheduleFirer schedules_;  // after admission_: fires through it
  std::unique_ptr<engine_internal::StateGauges> gauges_;  // set by Open, before any Start
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

absl::StatusOr<std::unique_ptr<Engine>> Engine::Open(EngineOptions options, Backend backend) {
  if (backend.store == nullptr || backend.transport == nullptr) {
    return absl::InvalidArgumentError("Engine::Open needs a store and a transport");
  }
  if (backend.events == nullptr) {
    return absl::InvalidArgumentError(
        "Engine::Open needs a backend with an event bus (Backend::events is null)");
  }
  if (options.lease_ttl <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("lease_ttl must be positive");
  }
  options = WithDefaults(std::move(options), backend.store.get());
  RUNLOOM_ASSIGN_OR_RETURN(std::unique_ptr<EngineMetrics> metrics,
                           EngineMetrics::Create(options.env.metrics, options.registry->Names()));
  // Off: no publisher at all, so nothing can reach for Redis.
  std::unique_ptr<StageEventPublisher> stage_events;
  if (options.stage_events.publisher != nullptr) {
    RUNLOOM_ASSIGN_OR_RETURN(
        stage_events,
        StageEventPublisher::Create(options.stage_events, options.env.clock, options.env.logger));
  }
  RUNLOOM_ASSIGN_OR_RETURN(
      std::unique_ptr<engine_internal::LlmCaps> llm_caps,
      engine_internal::LlmCaps::Create(LlmConcurrencyOf(*options.registry), backend.llm_caps,
                                       backend.pool_use, options.env));
  for (const auto& [tenant, limit] : options.tenant_budgets) {
    absl::StatusOr<TenantBudget> set = backend.store->SetTenantBudget(tenant, limit);
    if (!set.ok()) return Annotate(set.status(), absl::StrCat("tenant '", tenant, "' budget"));
  }
  auto impl = std::make_unique<Impl>(std::move(options), std::move(backend), std::move(metrics),
                                     std::move(stage_events), std::move(llm_caps));
  RUNLOOM_RETURN_IF_ERROR(impl->InitGauges());
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

absl::StatusOr<WorkflowVersion> Engine::RegisterWorkflow(const Workflow& wf) {
  return impl_->admission().RegisterWorkflow(wf);
}
absl::Status Engine::ValidateSteps(const Workflow& wf) const { return impl_->ValidateSteps(wf); }
absl::StatusOr<CreateRunResult> Engine::StartRun(const StartRunRequest& request) {
  return impl_->admission().StartRun(request);
}
void Engine::Start() { impl_->Start(); }
void Engine::Stop() { impl_->Stop(); }
absl::StatusOr<RunRecord> Engine::ExecuteRun(const std::string& run_id) {
  impl_->StartBackground();
  return impl_->launcher().ExecuteRun(run_id, nullptr);
}
absl::StatusOr<RunRecord> Engine::AwaitRun(const std::string& run_id, absl::Time deadline) {
  return impl_->watches().AwaitRun(run_id, deadline);
}
absl::StatusOr<std::vector<Event>> Engine::WatchEvents(const std::string& run_id, int64_t after_seq,
                                                       absl::Time deadline, int limit) {
  return impl_->watches().WatchEvents(run_id, after_seq, deadline, limit);
}
std::unique_ptr<Subscription> Engine::WatchRuns(std::function<void(const RunChange&)> on_change) {
  return impl_->watches().WatchRuns(std::move(on_change));
}
std::vector<LiveCall> Engine::LiveCalls(const std::string& run_id) {
  std::vector<LiveCall> calls = impl_->live().Calls(run_id);
  // Those another process streams (a path this engine streams is its own).
  for (LiveCall& remote : impl_->relay().RemoteCalls(run_id)) {
    const bool here = std::any_of(calls.begin(), calls.end(),
                                  [&](const LiveCall& c) { return c.path == remote.path; });
    if (!here) calls.push_back(std::move(remote));
  }
  return calls;
}
std::unique_ptr<Subscription> Engine::WatchLive(const std::string& run_id,
                                                std::function<void(const LiveFrame&)> on_frame) {
  impl_->relay().Start();  // polls what other processes stream for the watched runs
  return impl_->live().Watch(run_id, std::move(on_frame));
}
absl::Status Engine::AwaitIdle(absl::Time deadline) { return impl_->watches().AwaitIdle(deadline); }
absl::StatusOr<int> Engine::SweepOnce() { return impl_->sweeper().SweepOnce(); }
absl::StatusOr<RunRecord> Engine::Decide(const std::string& run_id, const DecisionRequest& request,
                                         const std::string& reviewer) {
  return engine_internal::DecideRun(impl_->Decisions(), run_id, request, reviewer);
}
absl::StatusOr<RunRecord> Engine::Rerun(const std::string& run_id, const std::string& phase,
                                        const std::string& feedback, const std::string& by) {
  absl::StatusOr<RunRecord> rerun =
      engine_internal::RerunRun(impl_->Decisions(), run_id, phase, feedback, by);
  // A run rerun while it waited for a child no longer needs that child.
  if (rerun.ok()) impl_->CancelChildren(run_id, by, rerun->revision);
  return rerun;
}
absl::StatusOr<RunRecord> Engine::Cancel(const std::string& run_id, const std::string& by) {
  return impl_->CancelHeld(run_id, by);  // held here: stopped now, not at the next check
}

absl::StatusOr<ScheduleRecord> Engine::CreateSchedule(const ScheduleRequest& request) {
  if (absl::StartsWith(request.id, kDeclaredSchedulePrefix)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "id: '", request.id, "' starts with '", kDeclaredSchedulePrefix,
        "', which is kept for the schedules a workflow file declares (schedules:); pick "
        "another id"));
  }
  auto resolved = impl_->catalog().Resolve(request.workflow, 0);
  if (!resolved.ok() && !absl::IsNotFound(resolved.status())) return resolved.status();
  RUNLOOM_ASSIGN_OR_RETURN(const absl::Time now, store()->Now());
  RUNLOOM_ASSIGN_OR_RETURN(
      ScheduleRecord s,
      engine_internal::CheckedSchedule(request, resolved.ok() ? resolved->second.get() : nullptr,
                                       now));
  return store()->PutSchedule(s, false);
}

absl::StatusOr<std::vector<ScheduleRecord>> Engine::ListSchedules(const std::string& after_id,
                                                                  int limit) {
  if (limit < 1 || limit > 1000) {
    return absl::InvalidArgumentError(absl::StrCat("limit: ", limit, " is not within 1-1000"));
  }
  return store()->ListSchedules(after_id, limit);
}

absl::StatusOr<ScheduleRecord> Engine::GetSchedule(const std::string& id) {
  RUNLOOM_ASSIGN_OR_RETURN(std::optional<ScheduleRecord> s, store()->GetSchedule(id));
  if (!s.has_value()) return absl::NotFoundError(absl::StrCat("schedule ", id, " not found"));
  return *std::move(s);
}

absl::StatusOr<ScheduleRecord> Engine::PauseSchedule(const std::string& id) {
  // A pause keeps the schedule's next tick (the time given is not used).
  RUNLOOM_ASSIGN_OR_RETURN(bool found, store()->SetSchedulePaused(id, true, absl::UnixEpoch()));
  if (!found) return absl::NotFoundError(absl::StrCat("schedule ", id, " not found"));
  return GetSchedule(id);
}

absl::StatusOr<ScheduleRecord> Engine::ResumeSchedule(const std::string& id) {
  RUNLOOM_ASSIGN_OR_RETURN(ScheduleRecord s, GetSchedule(id));
  RUNLOOM_ASSIGN_OR_RETURN(const absl::Time now, store()->Now());
  RUNLOOM_ASSIGN_OR_RETURN(const absl::Time next, engine_internal::NextTick(s, now));
  RUNLOOM_ASSIGN_OR_RETURN(bool found, store()->SetSchedulePaused(id, false, next));
  if (!found) return absl::NotFoundError(absl::StrCat("schedule ", id, " not found"));
  return GetSchedule(id);
}

absl::Status Engine::DeleteSchedule(const std::string& id) {
  RUNLOOM_ASSIGN_OR_RETURN(bool found, store()->DeleteSchedule(id));
  if (!found) return absl::NotFoundError(absl::StrCat("schedule ", id, " not found"));
  return absl::OkStatus();
}

absl::StatusOr<int> Engine::FireSchedulesOnce() { return impl_->schedules().FireOnce(); }
absl::StatusOr<SendSignalResult> Engine::Signal(const std::string& run_id,
                                                const SignalRequest& request,
                                                const std::string& by) {
  return engine_internal::SendRunSignal(impl_->Decisions(), run_id, request, by);
}
absl::StatusOr<int> Engine::ResetAll(const std::string& by) {
  absl::StatusOr<int> n = engine_internal::ResetAllRuns(impl_->Decisions(), by);
  impl_->cancel_watch().CheckOnce();  // the runs held here stop now
  return n;
}
int Engine::ActiveRuns() const { return impl_->ActiveRuns(); }
EngineStats Engine::stats() const { return impl_->stats(); }
std::vector<LlmCapInfo> Engine::ListLlmCaps() const { return impl_->LlmCapsNow(); }
TokenStore* Engine::tokens() { return impl_->store(); }
Store* Engine::store() { return impl_->store(); }
Transport* Engine::transport() { return impl_->transport(); }
Clock* Engine::clock() { return impl_->clock(); }

namespace engine_internal {

absl::StatusOr<EngineDriver::Executed> EngineDriver::ExecuteNext(Engine& engine,
                                                                 absl::Duration visibility) {
  Engine::Impl& impl = *engine.impl_;
  RUNLOOM_ASSIGN_OR_RETURN(std::vector<QueueMessage> msgs,
                           impl.transport()->Claim(impl.options().owner, 1, visibility));
  if (msgs.empty()) return Executed{};
  const QueueMessage& m = msgs.front();
  return Executed{m.run_id, ExecuteMessage(m, impl.transport(), &impl.launcher(), impl.logger())};
}

void EngineDriver::RenewLeases(Engine& engine) { engine.impl_->keeper().RenewAll(); }

int EngineDriver::CheckCancels(Engine& engine) { return engine.impl_->cancel_watch().CheckOnce(); }

}  // namespace engine_internal
}  // namespace runloom
