// Engine: starts runs and carries them to an honest end.
//
// An Engine owns an executor pool that claims queue messages, takes a run's
// lease, runs its graph step by step (recording each finished step before
// anything that depends on it starts), renews the lease on a heartbeat, and
// writes the terminal status; and a sweeper that re-enqueues runs whose lease
// expired or whose queue message was lost. Every durable effect goes through
// the Store as a fenced compare-and-set, so any number of engines in any
// number of processes may share one store.
//
// Thread-safety: all public methods are thread-safe.
//
// Example:
//   RUNLOOM_ASSIGN_OR_RETURN(Backend backend, OpenBackend("sqlite:///var/lib/runloom.db", {}));
//   RUNLOOM_ASSIGN_OR_RETURN(auto engine, Engine::Open({}, std::move(backend)));
//   RUNLOOM_ASSIGN_OR_RETURN(Workflow wf, LoadWorkflowFile("examples/ingest.yaml"));
//   RUNLOOM_ASSIGN_OR_RETURN(auto started, engine->StartRun({.workflow = wf}));
//   engine->Start();
//   RUNLOOM_ASSIGN_OR_RETURN(RunRecord done, engine->AwaitRun(started.run.id,
//   absl::InfiniteFuture()));
#pragma once

#include "runloom/backend.h"
#include "runloom/budget_ledger.h"
#include "runloom/clock.h"
#include "runloom/env.h"
#include "runloom/event_bus.h"
#include "runloom/gate.h"
#include "runloom/live_text.h"
#include "runloom/retention.h"
#include "runloom/run.h"
#include "runloom/stage_events.h"
#include "runloom/step.h"
#include "runloom/store.h"
#include "runloom/workflow.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace runloom {

namespace engine_internal {
class EngineDriver;  // src/engine/engine_driver.h: the simulator's hands
}  // namespace engine_internal

// Stage events (docs/operations.md, "Stage events"): a JSON message on Redis
// pub/sub each time a step that names a `stage:` starts, and when a run ends,
// for workflows with a `stage_events:` block (runloom/workflow.h). Published
// after the write it reports has committed; at most once (pub/sub keeps
// nothing for a subscriber that is not listening). A publish that fails is
// a logged warning and never fails or retries a step.
struct EngineOptions {
  // The engine's side effects (runloom/env.h): env.clock is the time source
  // for leases, retries and sweeps (nullptr = the store's clock); env.logger
  // gets a line for every error the engine does not return (nullptr =
  // DefaultLogger()); env.random draws run ids (empty = a generator seeded
  // from the OS, used under the engine's lock); env.metrics gets the
  // runloom_* counters and histograms (nullptr = none recorded).
  Env env;
  // Lease owner name written on runs; "" = "<hostname>:<pid>~<boot id>~<pid
  // namespace>~<start time>" (engine/service/lease_holder.h), or
  // "<hostname>:<pid>" where /proc does not tell those.
  std::string owner;
  // Restart recovery (issue 27; docs/operations.md "Restart recovery"):
  // whether the process that holds a lease, by its owner name, is provably
  // dead, so that the sweeper ends its leases at once instead of at their
  // expiry. Empty = the engine's own check, which knows the default owner
  // names only: the same host, boot and pid namespace as this process, and
  // the holder's pid gone or reused. An owner name it cannot read is never
  // taken early.
  std::function<bool(const std::string& owner)> holder_is_dead;
  // Executor threads. More threads overlap more step I/O (and let the
  // store's group commit batch more writes); each thread runs one run at a
  // time while the run computes or blocks (an exec step blocks its thread).
  int executors = 4;
  // Runs this engine holds at once. Each run executes on a fiber of its own;
  // one that waits (a model call in flight or its slot under the provider's
  // concurrency cap, a sleep, a retry backoff) gives its executor thread back
  // to another run, so a worker keeps thousands of model calls in flight on
  // a few threads (docs/operations.md "Runs in flight"). More runs are
  // claimed only while an executor is idle. Below `executors` (the default,
  // 0) = `executors`: one run per thread, as before.
  int runs_in_flight = 0;
  // Run the executor threads under the Linux SCHED_BATCH policy (same
  // priority, no wake-up preemption): an executor woken when its write
  // commits does not preempt the thread committing the next group, so the
  // store's single writer keeps its core (about +12% runs/s in `runloom
  // bench` on 2 cores). Step subprocesses still start under SCHED_OTHER.
  // Set false to leave the threads' policy alone.
  bool batch_scheduling = true;
  // How long a lease lives without renewal. Shorter: a crashed executor's run
  // is picked up sooner; longer: fewer renewals, more tolerance for pauses.
  absl::Duration lease_ttl = absl::Seconds(30);
  // Renewal period; zero = lease_ttl / 3.
  absl::Duration heartbeat = absl::ZeroDuration();
  // How often the engine asks the store whether a run it is executing was
  // cancelled by another process (a cancel through this engine stops the
  // run at once). One primary-key read per held run; zero = 250 ms.
  absl::Duration cancel_check = absl::Milliseconds(250);
  // A queued run with no queue message for this long is re-enqueued.
  absl::Duration queued_grace = absl::Seconds(30);
  // How often the sweeper looks for runs to recover.
  absl::Duration sweep_interval = absl::Seconds(1);
  // With env.metrics: how often the state gauges (runs in flight by status,
  // dead letters, tenant budgets; docs/operations.md "Metrics") read the
  // store. They are read once when the engine opens.
  absl::Duration state_gauges_interval = absl::Seconds(10);
  // How often an engine with a sweeper looks for due schedules (issue 23):
  // a tick starts its run within about this long.
  absl::Duration schedule_poll = absl::Milliseconds(250);
  // A claimed queue message not acked within this time is delivered again.
  absl::Duration visibility_timeout = absl::Seconds(60);
  // How long an executor waits on an empty queue before polling again.
  absl::Duration idle_poll = absl::Milliseconds(200);
  // A `sleep` step at least this long parks its run (issue 23): the run
  // releases its lease and executor and rests `waiting` until the store's
  // clock passes the sleep's end; the sweeper (every sweep_interval) queues
  // it again. Shorter sleeps, and sleeps inside a parallel branch, hold their
  // executor as before. InfiniteDuration() = never park.
  absl::Duration park_sleeps_over = absl::Minutes(5);
  // The timeout of a step that sets none, per kind, in place of its kind's
  // StepKind::DefaultTimeout() (exec 1 h, llm 10 min, http 30 s; the config
  // file's `step_timeouts:`). InfiniteDuration() = unbounded. A workflow's
  // `timeout:` and `defaults.timeout` come first.
  std::map<std::string, absl::Duration> step_timeouts;
  // On Stop(), how long in-flight steps may run before they are stopped and
  // their runs released to the queue.
  absl::Duration drain_timeout = absl::Seconds(10);
  // Step kinds; nullptr = StepRegistry::WithLocalBuiltins() (no http kind:
  // pass StepRegistry::WithBuiltins(), from runloom::steps_http, for it).
  std::shared_ptr<StepRegistry> registry;
  // Run the sweeper in this engine (a `runloom run` process does not).
  bool enable_sweeper = true;
  // Redis pub/sub stage events; off by default (see StageEventOptions).
  StageEventOptions stage_events;
  // Tenant budgets (micro-units) Open sets in the store's budget ledger
  // (BudgetStore::SetTenantBudget), so every process that executes runs
  // from one config file holds the same limits (docs/operations.md
  // "Budgets"). Empty = the ledger as it is.
  std::map<std::string, int64_t> tenant_budgets;
  // Retention (runloom/retention.h): an engine with a sweeper deletes the
  // terminal runs older than the policy says, every retention.interval, in
  // bounded batches. Default: keep everything.
  RetentionPolicy retention;
};

struct StartRunRequest {
  // The workflow to run; registered in the catalog first (a no-op when the
  // same definition is already there).
  std::optional<Workflow> workflow;
  // Or a catalog entry: name and version (0 = latest).
  std::string workflow_name;
  int64_t workflow_version = 0;
  // Inputs as given (strings from a CLI are converted to declared types).
  nlohmann::json inputs = nlohmann::json::object();
  // Same key (per workflow name) returns the first run instead of a new one.
  std::string idempotency_key;
  // Directory exec steps run in (default: the workflow file's directory).
  std::string working_dir;
  // The run's own budget in micro-units (nullopt = none): its model calls
  // together may cost at most this, and the run is refused at creation when
  // its tenant has less left (docs/operations.md "Budgets").
  std::optional<int64_t> budget_micros;
  // The run's priority, 0 to kMaxPriority (higher first among the queued
  // runs of its concurrency key); nullopt = the workflow's `priority:`.
  // kInvalidArgument outside the range.
  std::optional<int> priority;
  // A W3C traceparent (POST /runs' header): the run's span joins that trace
  // as a child of that span (runloom/trace.h). A malformed one is ignored,
  // as the W3C specification asks: the run starts its own trace.
  std::string traceparent;
};

// Counters since Open(), for benchmarks and /metrics.
struct EngineStats {
  int64_t runs_finished = 0;  // terminal status written by this engine
  int64_t runs_paused = 0;
  int64_t runs_released = 0;  // given back to the queue on shutdown
  int64_t leases_lost = 0;    // executions stopped by a refused write or renewal
};

// Checks that every leaf step's kind is in `registry` and that its config is
// valid; errors read "<file>:<line>: step '<id>': ...". Needs no store.
absl::Status ValidateStepKinds(const Workflow& wf, const StepRegistry& registry);
// Every kind a workflow may use with `registry`, sorted: the registry's and
// the engine's own (agent, approval, loop, parallel, run, wait).
std::vector<std::string> KnownStepKinds(const StepRegistry& registry);

// A signal for a run's `wait` steps (issue 23).
struct SignalRequest {
  std::string name;
  nlohmann::json payload;        // null = none; at most 64 KiB of JSON
  std::string idempotency_key;   // "" = none; the same key again keeps nothing new
};

// A schedule to create (issue 23; docs/operations.md "Schedules"): runs of
// a catalog workflow at the times a cron expression names in a time zone.
struct ScheduleRequest {
  std::string id;                 // 1 to 128 of A-Z a-z 0-9 _ . : -
  std::string workflow;           // a catalog name; each tick runs its latest version
  std::string cron;               // 5 fields, or 6 with seconds first (src/schedule/cron.h)
  std::string timezone = "UTC";   // an IANA name
  nlohmann::json inputs = nlohmann::json::object();  // checked against the workflow's inputs
  std::string overlap = "skip";     // skip | allow | cancel
  std::string catch_up = "latest";  // none | latest | all
};

// A human decision on a paused run's approval gate.
struct DecisionRequest {
  // Digest of the proposal the reviewer saw ("sha256:..."); must be the
  // current one, or the decision is refused.
  std::string proposal_digest;
  // Required (kInvalidArgument when unset).
  std::optional<Decision> decision;
  // decision == edit: the reviewer's version, which becomes the gate's output.
  nlohmann::json edited_proposal;
  // decision == request_revision: what to change, and the phase to rerun
  // from ("" = the gate's `revision_phase`).
  std::string feedback;
  std::string from_phase;
};

// ---- read model: queries for the CLI and the HTTP API (src/engine/read_model.cc) ----

// The longest page ListRuns and ListEvents return; a larger limit is clamped.
inline constexpr int kMaxReadLimit = 1000;

// Which runs ListRuns returns: newest first (created_at descending, ties by
// run id descending), filtered, one page at a time.
struct RunQuery {
  std::optional<RunStatus> status;  // empty = any status
  std::string workflow;             // workflow name; "" = any
  std::string parent_run_id;        // only this run's children (issue 23); "" = any
  // Runs per page: 1..kMaxReadLimit (more is clamped to kMaxReadLimit;
  // less than 1 is kInvalidArgument).
  int limit = 50;
  // "" = the first page; else the next_cursor of a previous page.
  std::string cursor;
  // Issue 25's search, done by the store's statement with the fields
  // above (RunFilter's tenant, input_value, created_since and paging
  // position): a page holds `limit` runs unless it is the last.
  // Only runs of this budget tenant ("" = any).
  std::string tenant;
  // Only runs whose idempotency key is this, or one of whose top-level
  // inputs is this string (or this number, written in decimal); "" = any.
  std::string input_id;
  // Only runs created at or after `created_after` and before
  // `created_before` (the store's time); nullopt = unbounded. kInvalidArgument
  // when created_after is not before created_before.
  std::optional<absl::Time> created_after;
  std::optional<absl::Time> created_before;
};

// One decision of an adaptive LLM concurrency cap, as its controller logged
// it: when, the cap, and the limiters it was the minimum of ("aimd 2,
// telemetry -, pool -, cpu 1").
struct LlmCapDecision {
  absl::Time at;
  int cap = 0;
  std::string reason;
};

// A provider's concurrency cap as this process sees it (Engine::ListLlmCaps).
struct LlmCapInfo {
  std::string provider;  // the cap's name (llm config `concurrency`)
  int cap = 0;           // in force now (published, or the static cap)
  int in_flight = 0;     // this process's calls in flight
  // The cap's changes this process saw, oldest first; at most
  // kMaxLlmCapHistory, kept in memory only (a restart forgets them).
  std::vector<LlmCapDecision> history;
};
inline constexpr int kMaxLlmCapHistory = 64;

struct RunPage {
  std::vector<RunRecord> runs;
  // Pass as RunQuery::cursor for the next page; "" = there is none.
  std::string next_cursor;
};

// The gate a paused run waits on: nullopt when `run` is not paused or has
// no gate recorded; kDataLoss when the recorded gate is malformed. The rule
// Engine::GetPendingGate applies, for a caller that already read the run.
absl::StatusOr<std::optional<PendingGate>> PendingGateOfPaused(const RunRecord& run);

// ---- end of read model ----

class Engine {
 public:
  // Takes ownership of the backend (its store, transport and event bus are
  // required: the engine's waits are wake-ups). Does not start any thread.
  // kInvalidArgument: no store, transport or event bus, or a bad option.
  static absl::StatusOr<std::unique_ptr<Engine>> Open(EngineOptions options, Backend backend);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates `wf` (structure and known step kinds) and registers it. Then
  // makes the stored schedules `workflow:<name>:<entry>` those its name's
  // latest catalog version declares (Workflow::schedules: created, replaced
  // keeping a pause, or deleted; src/engine/schedules.h, DeclaredSchedules),
  // as StartRun does for a request that carries its workflow. An error of
  // that step is returned with the version registered all the same:
  // registering again is idempotent and finishes it.
  absl::StatusOr<WorkflowVersion> RegisterWorkflow(const Workflow& wf);
  // Checks every step kind is registered and its config is valid.
  absl::Status ValidateSteps(const Workflow& wf) const;

  // The creation seam: resolve the version, freeze the inputs, apply the
  // duplicate guard, insert the run and enqueue it in one transaction.
  // kInvalidArgument for bad inputs, kNotFound for an unknown workflow.
  absl::StatusOr<CreateRunResult> StartRun(const StartRunRequest& request);

  // Starts the executor pool (and the sweeper, if enabled). Idempotent.
  void Start();
  // Stops claiming, lets in-flight steps finish for up to drain_timeout,
  // releases every run still held back to the queue, and joins all threads.
  void Stop();

  // Executes one run in the calling thread: takes its lease and runs it
  // until it is terminal, paused, or the lease is lost. Used by `runloom run`.
  absl::StatusOr<RunRecord> ExecuteRun(const std::string& run_id);

  // ---- read model (src/engine/read_model.cc) ----
  // Reads of the store for those who show runs (the CLI, the HTTP API):
  // they validate their input as untrusted, answer with the documented
  // codes and never start anything, so they work on an engine that was
  // opened and never Start()ed. They answer from committed state only;
  // kUnavailable when the backend is unreachable. Run ids and workflow
  // names are at most 256 bytes (kInvalidArgument otherwise).

  // kNotFound: no run `run_id`; kInvalidArgument: empty id.
  absl::StatusOr<RunRecord> GetRun(const std::string& run_id);

  // One page of runs, newest first (see RunQuery). Paging is keyset
  // paging on (created_at, run id): a cursor is the position of the last
  // run of its page, so runs created after the first page never shift
  // later pages (no run is skipped or repeated; new runs appear on a new
  // first page). A cursor is a position, not a query: pass the same
  // status and workflow with it to continue the same list. It is opaque
  // (base64url, at most 512 bytes) and stays valid for as long as the
  // store does; kInvalidArgument when it does not decode as a cursor (the
  // message says to pass a previous page's next_cursor, or none), and when
  // limit < 1. A well-formed cursor no page issued is just a position.
  //
  // Example:
  //   RunQuery q{.status = RunStatus::kFailed, .limit = 100};
  //   do {
  //     RUNLOOM_ASSIGN_OR_RETURN(RunPage page, engine->ListRuns(q));
  //     for (const RunRecord& r : page.runs) Show(r);
  //     q.cursor = page.next_cursor;
  //   } while (!q.cursor.empty());
  absl::StatusOr<RunPage> ListRuns(const RunQuery& query);

  // The run's step records, by revision then start; `revision` empty =
  // every revision. kNotFound: no such run; kInvalidArgument: revision < 1.
  absl::StatusOr<std::vector<StepRecord>> ListSteps(const std::string& run_id,
                                                    std::optional<int64_t> revision);

  // The run's external writes (runloom/write_ledger.h), in the order their
  // intents were recorded: the evidence of what the run did outside, each
  // keyed by the decision it carried out. kNotFound: no such run.
  absl::StatusOr<std::vector<WriteOperation>> ListWrites(const std::string& run_id);

  // The run's events with seq > `after_seq`, oldest first, at most `limit`
  // (clamped to kMaxReadLimit). Does not wait (WatchEvents does).
  // kNotFound: no such run; kInvalidArgument: after_seq < 0 or limit < 1.
  absl::StatusOr<std::vector<Event>> ListEvents(const std::string& run_id, int64_t after_seq,
                                                int limit);

  // The run's signals, oldest first (at most SignalStore::kMaxMailbox):
  // those still in its mailbox and those its waits consumed.
  // kNotFound: no such run.
  absl::StatusOr<std::vector<SignalRecord>> ListSignals(const std::string& run_id);

  // Every run changed (updated_at) at or after `since`, newest first: what
  // a stream resuming from `since` must show again. kResourceExhausted when
  // more than kMaxReadLimit runs changed (the caller starts over instead).
  absl::StatusOr<std::vector<RunRecord>> ListRunsChangedSince(absl::Time since);

  // The store's time: the one clock every lease, timer, schedule and run
  // time (created_at, updated_at, wake_at) is on, whichever process reads
  // it. kUnavailable when the backend is unreachable.
  absl::StatusOr<absl::Time> Now();

  // The approval gate the run waits on: nullopt when it is not paused at
  // one (PendingGateOfPaused). kNotFound: no such run; kDataLoss: the
  // recorded gate is malformed.
  absl::StatusOr<std::optional<PendingGate>> GetPendingGate(const std::string& run_id);

  // Every version of every workflow in the catalog, by name then version.
  absl::StatusOr<std::vector<WorkflowVersion>> ListWorkflows();
  // One version of `name`; version 0 = the latest. kNotFound: no such
  // workflow or version; kInvalidArgument: empty name or version < 0.
  absl::StatusOr<WorkflowVersion> GetWorkflow(const std::string& name, int64_t version);

  // Dead letters (runloom/transport.h): messages the transport stopped
  // delivering after TransportOptions::max_deliveries deliveries without an
  // ack. The runs stay queued and the sweeper leaves them alone until a
  // redrive. These delegate to the backend's transport after checking
  // their arguments.
  //
  // Dead letters not yet redriven, oldest first, at most `limit` (clamped
  // to kMaxReadLimit). kInvalidArgument: limit < 1.
  absl::StatusOr<std::vector<DeadLetter>> ListDeadLetters(int limit);
  // Delivers dead letter `id`'s run again, with a fresh delivery count
  // (Transport::Redrive). kInvalidArgument: an empty or over-long id, or
  // one this transport never issues; kNotFound: no such dead letter, or it
  // was redriven already.
  absl::Status RedriveDeadLetter(const std::string& id);
  // Redrives every dead letter not yet redriven; returns how many.
  absl::StatusOr<int> RedriveAllDeadLetters();

  // Every tenant's budget row (runloom/budget_ledger.h), by name: limit,
  // spent, reserved, and so what is left. kUnavailable: backend unreachable.
  absl::StatusOr<std::vector<TenantBudget>> ListTenantBudgets();
  // The llm step's concurrency caps, by name, with the decisions this
  // process saw (empty when this engine runs no controllers: it does not
  // execute steps, or no provider has a `concurrency` cap).
  std::vector<LlmCapInfo> ListLlmCaps() const;
  // ---- end of read model ----

  // ---- watches: woken by the backend's event bus, never a poll ----
  // Waits until the run is terminal or paused, or `deadline`.
  // kDeadlineExceeded at the deadline.
  absl::StatusOr<RunRecord> AwaitRun(const std::string& run_id, absl::Time deadline);

  // The run's events after `after_seq` (at most `limit`, oldest first). If
  // there are none yet, blocks until one commits (in any process sharing the
  // backend) or `deadline`, then returns an empty vector. kNotFound: unknown run.
  absl::StatusOr<std::vector<Event>> WatchEvents(const std::string& run_id, int64_t after_seq,
                                                 absl::Time deadline, int limit = 1000);

  // Calls `on_change` for every committed change of any run until the
  // returned Subscription is destroyed (before this engine). The callback
  // runs on the publishing thread and must not block (see event_bus.h).
  std::unique_ptr<Subscription> WatchRuns(std::function<void(const RunChange&)> on_change);

  // The model calls of `run_id` streaming now, with their text so far; and
  // a subscription to their frames as they come (until the Subscription is
  // destroyed, before this engine). Subscribe first, then read LiveCalls: a
  // frame whose offset is below what LiveCalls gave is already in it. The
  // calls this engine executes come at once; those another process executes
  // come through the store, a tick (about 100 ms) or two behind. The callback
  // runs on the executing (or the relay's) thread and must not block.
  std::vector<LiveCall> LiveCalls(const std::string& run_id);
  std::unique_ptr<Subscription> WatchLive(const std::string& run_id,
                                          std::function<void(const LiveFrame&)> on_frame);

  // OK once no run is queued, running or waiting with a wake time (a timer,
  // or a signal's timeout) and this engine holds none (for `runloom worker
  // --until-idle`); kDeadlineExceeded at `deadline`. A run paused at a gate,
  // or waiting for a signal with no timeout, waits for someone outside.
  absl::Status AwaitIdle(absl::Time deadline);

  // Records a decision on the paused run `run_id` and queues it again, in one
  // compare-and-set. `reviewer` comes from the caller's authenticated
  // identity, never from the request body. kAborted: the digest is not the
  // current proposal's, or another decision won the race (HTTP 409);
  // kFailedPrecondition: the run is not paused (409); kInvalidArgument: a
  // decision the gate does not allow, or a bad phase.
  absl::StatusOr<RunRecord> Decide(const std::string& run_id, const DecisionRequest& request,
                                   const std::string& reviewer);

  // Starts a new revision of a finished (or paused, or waiting) run from the first step
  // of `phase`: the steps before it keep their records, the rest run again;
  // `feedback` becomes run.feedback. kFailedPrecondition while queued/running.
  absl::StatusOr<RunRecord> Rerun(const std::string& run_id, const std::string& phase,
                                  const std::string& feedback, const std::string& by);

  // Cancels a run: queued, paused and waiting runs at once; a running run is asked to
  // stop: its executor kills the running step and writes cancelled, at once
  // if this engine holds it, else within EngineOptions::cancel_check (250 ms)
  // in whichever process does. kFailedPrecondition when already terminal.
  absl::StatusOr<RunRecord> Cancel(const std::string& run_id, const std::string& by);

  // Sends a signal to run `run_id`: kept in its mailbox, consumed by its
  // next wait step for that name in the order signals came; when the run
  // rests at such a wait, the same commit resolves it and queues the run
  // (SignalStore::SendSignal). `by` is the sender's authenticated identity.
  // kNotFound: unknown run. kInvalidArgument, nothing kept, naming the field:
  // a bad name, no wait step for it in the run's workflow, a payload too
  // big or not matching the wait's schema. kFailedPrecondition: the run is
  // finished. kResourceExhausted: its mailbox is full.
  absl::StatusOr<SendSignalResult> Signal(const std::string& run_id, const SignalRequest& request,
                                          const std::string& by);

  // Admin reset: cancels every queued, running, paused and waiting run. Returns how many.
  absl::StatusOr<int> ResetAll(const std::string& by);

  // Schedules (issue 23). CreateSchedule: kInvalidArgument naming the field
  // (id, cron, timezone, overlap, catch_up, inputs), kNotFound when the
  // workflow is not in the catalog, kAlreadyExists for a taken id; nothing
  // written on any error. Its first tick is the first after the store's now.
  absl::StatusOr<ScheduleRecord> CreateSchedule(const ScheduleRequest& request);
  // By id, after `after_id` ("" = from the first), at most `limit` (1-1000).
  absl::StatusOr<std::vector<ScheduleRecord>> ListSchedules(const std::string& after_id,
                                                            int limit);
  // kNotFound: no such schedule.
  absl::StatusOr<ScheduleRecord> GetSchedule(const std::string& id);
  // Pause: no tick fires. Resume: the next tick is the first after the
  // store's now (the ticks passed while paused are not caught up).
  // kNotFound: no such schedule.
  absl::StatusOr<ScheduleRecord> PauseSchedule(const std::string& id);
  absl::StatusOr<ScheduleRecord> ResumeSchedule(const std::string& id);
  // kNotFound: no such schedule. Runs it started are left as they are.
  absl::Status DeleteSchedule(const std::string& id);
  // Fires the due schedules once now (tests and tools); every engine with a
  // sweeper (EngineOptions::enable_sweeper) does so every
  // EngineOptions::schedule_poll. Returns how many runs it started.
  absl::StatusOr<int> FireSchedulesOnce();

  // Runs one sweep now (tests and tools). Returns how many runs it acted on.
  absl::StatusOr<int> SweepOnce();

  // Number of runs this engine's executors hold right now.
  int ActiveRuns() const;
  EngineStats stats() const;

  // The API tokens of the backend's store (src/auth checks bearer tokens
  // against it): the one role of the store a server needs beside the
  // engine's own operations.
  TokenStore* tokens();

  // The backend's parts, for tests and tools (src/testing, the simulator).
  // The CLI and the HTTP API go through the operations above and never
  // reach around the engine to them (scripts/check_layering.py refuses it).
  Store* store();
  Transport* transport();
  // env.clock, or the store's clock when none was given.
  Clock* clock();

 private:
  friend class engine_internal::EngineDriver;
  class Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace runloom
