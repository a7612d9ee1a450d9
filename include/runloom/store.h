// Store: the durable state of runloom behind one interface.
//
// A Store keeps the workflow catalog, one row per run, step records, run
// events, and the outbox. Every run status write is a compare-and-set on the
// expected status and, for executor writes, the current lease token, and is
// checked against the transition table (status.h); events and step records are
// written in the same transaction as the state change they describe.
//
// The outbox: every state change that needs an executor (CreateRun, a move
// to queued, Enqueue) writes an outbox row in its own transaction, so "the
// store says queued, the transport has nothing" cannot follow from a crash.
// A relay (src/transport/outbox_relay.h) publishes outbox rows to the
// Transport. On SQLite the outbox is the queue table that the SQLite
// transport reads, so nothing needs relaying.
//
// Time: the store is the time authority for everything shared between
// processes (Now()); lease deadlines are never computed by comparing the
// clocks of different machines.
//
// Backends: this header has the interfaces only. A backend has its own
// header with its options and factory (runloom/sqlite.h), and
// runloom/backend.h opens one from a URL.
//
// Thread-safety: every method may be called from any thread concurrently.
// Several processes may share one store (SQLite file in WAL mode, or one
// PostgreSQL database).
//
// Codes: kAborted = a compare-and-set lost (stale lease token, status moved);
// kFailedPrecondition = the write is not allowed from the current status;
// kNotFound = no such run/workflow; kUnavailable = backend unreachable or busy
// past its timeout; kDataLoss = the handle is poisoned after an indeterminate
// commit; kInvalidArgument = bad arguments.
#pragma once

#include "runloom/auth.h"
#include "runloom/budget_ledger.h"
#include "runloom/clock.h"
#include "runloom/run.h"
#include "runloom/transport.h"
#include "runloom/write_ledger.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace runloom {

// What admission inserts.
struct NewRun {
  std::string id;
  std::string workflow_name;
  int64_t workflow_version = 0;
  std::string workflow_digest;
  nlohmann::json inputs = nlohmann::json::object();
  std::string inputs_digest;
  std::string idempotency_key;  // "" = no duplicate guard
  int max_attempts = 5;         // the workflow's Workflow::max_attempts
  // The run whose `kind: run` step starts this one ("" = none). A child
  // run needs an idempotency key (kInvalidArgument without one).
  std::string parent_run_id;
  std::string phase;
  nlohmann::json context = nlohmann::json::object();  // stored in RunRecord::context
  // Concurrency (RunRecord): "" = no key (then the limit is ignored and
  // stored as 0); with a key, limit >= 1. priority 0..kMaxPriority.
  std::string concurrency_key;
  int concurrency_limit = 0;
  int priority = 0;
};

struct CreateRunResult {
  RunRecord run;
  bool created = true;  // false: the idempotency key matched `run`, nothing was written
};

// What a run waiting for a signal waits for (RunWrite::wait_for_signal):
// the signal's name, and the key a signal consumed by this wait is marked
// with (the engine's "<revision>:<step path>", one per wait it reaches).
struct SignalWait {
  std::string signal;
  std::string key;
};

// A signal of the run's mailbox consumed by a wait (RunWrite::consume_signal).
struct SignalConsumption {
  int64_t seq = 0;
  std::string key;
};

// A fenced write to one run: a compare-and-set plus what it records.
struct RunWrite {
  std::string run_id;
  Party party = Party::kExecutor;
  // The run's status must be one of these (empty: any). Executor writes also
  // require status running and `lease_token` equal to the current token.
  std::vector<RunStatus> expected;
  std::string lease_token;
  // When set, the run's last_event_seq must equal it (kAborted otherwise):
  // "nothing happened to the run since I read it" (human decisions use it).
  std::optional<int64_t> expected_last_event_seq;
  // When true and the run has cancel_requested set, the write is refused
  // with kCancelled (the executor's step.started write uses it, so no step
  // starts after a cancel is acknowledged).
  bool refuse_if_cancel_requested = false;
  std::optional<RunStatus> new_status;  // checked against the transition table
  std::optional<std::string> outcome;
  std::optional<std::string> error;
  std::optional<std::string> phase;
  std::optional<int64_t> revision;
  std::optional<RunEntry> entry;
  std::optional<nlohmann::json> context;
  std::optional<bool> cancel_requested;
  bool reset_attempts = false;  // a decision or rerun starts a fresh attempt budget
  // With new_status waiting, and only then: when the timer is due, by the
  // store's clock, and/or the signal the run waits for (at least one of the
  // two; a wait for a signal with no timeout has no wake time). Any other
  // status move clears both. The store refuses a move to waiting for a
  // signal with kAlreadyExists, writing nothing, when a signal of that name
  // is in the run's mailbox: the executor consumes it instead, so no run
  // rests waiting for a signal it already has.
  std::optional<absl::Time> wake_at;
  std::optional<SignalWait> wait_for_signal;
  // An executor write only: marks the run's mailbox signal `seq` consumed by
  // `key` in this commit. kAborted, writing nothing, when it is consumed.
  std::optional<SignalConsumption> consume_signal;
  // Terminal statuses and moves to queued/paused always release the lease.
  // A move to queued also enqueues a message (in the same transaction).
  std::vector<StepRecord> steps;  // inserted; an existing (run, revision, path) is replaced
  std::vector<Event> events;      // appended with the next sequence numbers
};

// What the sweeper acts on.
struct RecoveryCandidate {
  std::string run_id;
  RunStatus status;
  int attempts = 0;
  int max_attempts = 0;
  std::string lease_token;  // the expired token (for the sweeper's fenced write)
};

// A running run's live lease and its holder (Store::ListLiveLeases).
struct LiveLease {
  std::string run_id;
  std::string owner;  // the lease's owner name, as AcquireLease was given it
  std::string token;
  absl::Time expires_at;
};

// A place in ListRuns' order (newest first: created_at descending, then id
// descending), e.g. the last run of the previous page.
struct RunPosition {
  absl::Time created_at;
  std::string id;
};

struct RunFilter {
  std::optional<RunStatus> status;  // empty = any status
  std::string workflow_name;        // "" = any workflow
  int limit = 100;                  // <= 0 = no limit
  // Keyset paging: only runs strictly after this position in ListRuns'
  // order, i.e. (created_at, id) < (after.created_at, after.id). Runs
  // created later sort before the position, so they never shift a page.
  std::optional<RunPosition> after;
  // Only runs whose updated_at (the store's time of their last state write)
  // is at or after this. kInvalidArgument together with `after`. The all-runs
  // event stream's resume (docs/openapi.yaml, /api/v1/events) reads with it:
  // one statement over the runs table (no index on updated_at: it checks
  // each row, as the SQLite change check does), no event history.
  std::optional<absl::Time> updated_since;
  // Only the children of this run ("" = any run).
  std::string parent_run_id;
  // Only the run of `workflow_name` admitted under this idempotency key (at
  // most one: the key is unique per workflow; found by that index). Needs
  // `workflow_name`; does not combine with `after` or `updated_since`
  // (kInvalidArgument). "" = any.
  std::string idempotency_key;
  // The operators' search (issue 25), in the store's statement, so a page
  // is a page whatever the filters (no index serves them: the walk down
  // runs_created_id checks each row, as with updated_since).
  // Only runs whose budget context names this tenant ("" = any).
  std::string tenant;
  // Only runs whose idempotency key is this, or one of whose top-level
  // inputs is this string or this integer written in decimal ("" = any).
  std::string input_value;
  // Only runs created at or after this (the store's time). An upper bound
  // is `after` at that time with an empty id.
  std::optional<absl::Time> created_since;
};

// An API token as the store keeps it: never the token itself, and the hash
// of it stays inside the store (only FindActiveToken takes one).
struct TokenRecord {
  std::string id;    // "tok_" + hex, chosen by the caller of CreateToken
  std::string name;  // unique among active tokens; the principal's name
  Role role = Role::kViewer;
  absl::Time created_at;                 // set by the store (its Now())
  std::optional<absl::Time> revoked_at;  // empty while active
};

// The store by role, in the shape of Temporal's persistence interfaces: a
// caller that needs one concern takes that interface (the authenticator a
// TokenStore&, the budget preflight a BudgetStore&), and a backend
// implements Store, which is all of them. Every method of every role is
// thread-safe in every backend.

// What AcquireLease asks for, as one value.
struct LeaseRequest {
  std::string run_id;
  std::string owner;              // who holds the lease (an executor's id)
  absl::Duration ttl;             // the lease's life, from the store's Now()
  // Appended with the lease, as given: the store does not edit them, so
  // the lease's own event (run.started) names its attempt and owner itself.
  std::vector<Event> events;
  std::optional<RunWrite> first;  // a first write in the same commit (AcquireLease)
  // The attempt this lease must be: the run's attempts as the caller read
  // them, plus one (the attempt `events` name). A run whose attempts moved
  // on since (another lease came between) is refused with kAborted, nothing
  // written. 0 = any attempt (a lease whose events name none).
  int expected_attempt = 0;
};

// How many runs are in each status that is not terminal (RunStore::
// CountActiveRuns): the queue depth and what waits, for the gauges.
struct ActiveRunCounts {
  int64_t queued = 0;
  int64_t running = 0;
  int64_t paused = 0;
  int64_t waiting = 0;
};

// Whether `s` is AcquireLease's refusal of an expected_attempt the run's
// attempts moved past (kAborted): the caller reads the run again and
// leases it as it is now.
bool IsLeaseAttemptMoved(const absl::Status& s);

// The workflow catalog.
class CatalogStore {
 public:
  virtual ~CatalogStore() = default;

  // Registers `canonical` (digest `digest`) under `name`. If some version of
  // `name` has this digest, returns it unchanged; otherwise inserts the next
  // version. Idempotent.
  virtual absl::StatusOr<WorkflowVersion> RegisterWorkflow(const std::string& name,
                                                           const std::string& digest,
                                                           const nlohmann::json& canonical) = 0;
  // version 0 = the latest. kNotFound when absent.
  virtual absl::StatusOr<WorkflowVersion> GetWorkflow(const std::string& name, int64_t version) = 0;
  // Every version of every workflow, by name then version.
  virtual absl::StatusOr<std::vector<WorkflowVersion>> ListWorkflows() = 0;
};

// Runs: creation, leases, fenced writes, reads, recovery, and the time
// authority they are computed from.
class RunStore {
 public:
  virtual ~RunStore() = default;

  // ---- runs ----
  // Inserts the run (queued), `events` and its queue message in one
  // transaction. With an idempotency key already used for this workflow name,
  // writes nothing and returns the existing run with created = false.
  virtual absl::StatusOr<CreateRunResult> CreateRun(const NewRun& run,
                                                    std::vector<Event> events) = 0;
  virtual absl::StatusOr<RunRecord> GetRun(const std::string& run_id) = 0;
  // The runs matching `filter`, newest first: ordered by created_at
  // descending, ties (runs created in the same microsecond) by id
  // descending, so the order is total and `filter.after` pages through it
  // without skipping or repeating a run.
  virtual absl::StatusOr<std::vector<RunRecord>> ListRuns(const RunFilter& filter) = 0;
  // The ids of at most `limit` (<= 0: all) runs not finished (queued,
  // running, paused, waiting) whose parent run is finished, by id: children
  // a parent's cancel did not reach (its canceller died between the two
  // commits). The sweeper cancels them (issue 23, child runs).
  virtual absl::StatusOr<std::vector<std::string>> ListOrphanedChildren(int limit) = 0;
  // The number of runs queued, running, paused and waiting: one read of
  // the status index (terminal runs are not counted, so the cost grows with
  // the runs in flight, not with the history).
  virtual absl::StatusOr<ActiveRunCounts> CountActiveRuns() = 0;

  // ---- leases ----
  // Takes the lease on a run that is queued, or running with an expired
  // lease: status running, a new token, attempts + 1, expiry Now() + ttl, and
  // `events` appended (their data may be amended with the attempt number).
  // kAborted: another lease is live. kFailedPrecondition: paused or terminal.
  // kResourceExhausted ("over its concurrency limit"): the run is queued,
  // has a concurrency key, and runs of that key holding status running
  // number its limit or more: no lease, no attempt, no event; the store
  // only gives the run a fresh pending queue message (the claimed one
  // replaced, so the consumer's ack of it does nothing), which claims and
  // the outbox relay offer again once the key has room. The count and the
  // lease are one compare-and-set (SQLite: its single writer; PostgreSQL:
  // under a transaction-scoped advisory lock that every such lease takes).
  //
  // `expected_attempt` (when not 0) is the attempt the lease must be: the
  // run's attempts plus one, as the caller read them; otherwise kAborted,
  // nothing written (another lease came between the read and this one; the
  // caller reads the run again). `events` are written as given.
  //
  // The lease does not depend on the run's queue message: the consumer that
  // claimed it acks it after taking the lease (Transport::Ack). A backend
  // whose queue is a table of the same database may delete the run's message
  // in the lease's commit and remember it, so that the ack does no I/O
  // (SQLite and PostgreSQL do); a stream transport cannot, and acks apart.
  //
  // `first` (may be absent): a fenced
  // executor write applied with the new token on the run's first lease only
  // (never leased, nothing recorded but its creation: a rerun resets the
  // attempts, so attempt 1 alone is not enough). The store sets its run_id,
  // party and lease_token. An
  // executor starting a fresh run thus takes the lease and starts its first
  // step together; a backend that can do both in one commit does (SQLite),
  // others may use ApplyFirstWrite() below (two commits). Errors are the
  // lease's (nothing written). Otherwise the lease is held and
  // Lease::first_write / first_write_applied say what became of `first`:
  // applied; kFailedPrecondition when this was not the run's first lease;
  // or Commit's refusal (e.g. kCancelled). When not applied, nothing of
  // `first` was written.
  //
  // Example:
  //   RunWrite start;  // the first step.started event
  //   RUNLOOM_ASSIGN_OR_RETURN(Lease l, store->AcquireLease(id, owner, ttl, {started}, &start));
  //   if (!l.first_write_applied) { /* read the recorded steps, or stop */ }
  virtual absl::StatusOr<Lease> AcquireLease(LeaseRequest request) = 0;
  // The same with the request's parts; `first` (may be null) is copied.
  absl::StatusOr<Lease> AcquireLease(const std::string& run_id, const std::string& owner,
                                     absl::Duration ttl, std::vector<Event> events,
                                     const RunWrite* first = nullptr) {
    LeaseRequest r{.run_id = run_id, .owner = owner, .ttl = ttl, .events = std::move(events)};
    if (first != nullptr) r.first = *first;
    return AcquireLease(std::move(r));
  }
  // Extends a live lease. Returns the run as it is now (the caller reads
  // cancel_requested). kAborted: the token is no longer current or expired.
  virtual absl::StatusOr<RunRecord> RenewLease(const std::string& run_id, const std::string& token,
                                               absl::Duration ttl) = 0;

  // ---- fenced writes ----
  // Applies `write` atomically or not at all. kAborted when the status or the
  // lease token does not match (a stale executor); kFailedPrecondition when
  // the transition is not in the table.
  virtual absl::Status Commit(const RunWrite& write) = 0;

  // ---- reads ----
  // Step records of a run; `revision` empty = every revision.
  virtual absl::StatusOr<std::vector<StepRecord>> ListSteps(const std::string& run_id,
                                                            std::optional<int64_t> revision) = 0;
  virtual absl::StatusOr<std::vector<Event>> ListEvents(const std::string& run_id,
                                                        int64_t after_seq, int limit) = 0;

  // ---- recovery ----
  // Runs `running` whose lease expired, and runs `queued` whose last change
  // is older than `queued_grace` and that hold no live lease. Whether a
  // queued run still has a message is the transport's to say
  // (Transport::FindMessages): the store does not look at the queue, because
  // with a separate transport (Redis) it cannot. The sweeper re-enqueues a
  // queued candidate only when the transport has neither a pending message
  // nor a dead letter for it.
  virtual absl::StatusOr<std::vector<RecoveryCandidate>> FindRecoverable(
      absl::Duration queued_grace, int limit) = 0;
  // Restart recovery (issue 27; engine/service/lease_holder.h): the running
  // runs whose lease has not expired, with their holders, at most `limit`
  // (<= 0: all), soonest expiry first.
  virtual absl::StatusOr<std::vector<LiveLease>> ListLiveLeases(int limit) = 0;
  // Ends lease `token` of run `run_id` now (its expiry becomes the store's
  // now), so that FindRecoverable lists the run at once: for a holder that
  // is provably dead. kAborted, writing nothing: the run is not running, or
  // `token` is not its lease any more (renewed by a live holder it is not,
  // or taken by another). Fencing is the usual one: the next lease gets a
  // new token, and the old holder's writes are refused.
  virtual absl::Status ExpireLease(const std::string& run_id, const std::string& token) = 0;
  // Of `run_ids`, those whose execution must stop: `running` with a cancel
  // requested, or already terminal (an admin reset cancelled it while it
  // ran, or the sweeper failed it at the attempt cap). An executor asks this
  // often (every EngineOptions::cancel_check) about the runs it holds, so a
  // cancel or reset from any process stops the step in well under a second
  // without a shorter lease. Unknown ids are left out.
  virtual absl::StatusOr<std::vector<std::string>> FindCancelRequested(
      const std::vector<std::string>& run_ids) = 0;
  // Writes an outbox row for the run unless one is pending, and appends
  // `events` (e.g. the sweeper's "run.lease_expired"), atomically.
  // kNotFound: no such run. kAborted, writing nothing: the run is paused,
  // waiting or finished (it moved on since the caller read it).
  virtual absl::Status Enqueue(const std::string& run_id, std::vector<Event> events) = 0;

  // ---- time ----
  // The backend's time authority: lease deadlines, visibility timeouts and
  // the queued grace are computed from it, never from another machine's
  // clock. SQLite: its Clock (SqliteOptions::clock); a server backend: the
  // server's clock (e.g. PostgreSQL now()). kUnavailable when the authority
  // cannot be asked (a server backend whose server is unreachable): never a
  // silent fallback to another clock.
  virtual absl::StatusOr<absl::Time> Now() = 0;
  // The local clock this process waits on (heartbeats, sweep intervals,
  // WaitForMessages deadlines). It is not the time authority; on SQLite it is
  // the same clock as Now().
  virtual Clock* clock() = 0;

 protected:
  // For a backend without a one-commit path for AcquireLease's `first`:
  // after a lease taken without it, applies `first` as AcquireLease
  // documents (Commit with the new token, on attempt 1 only) and sets
  // lease.first_write and lease.first_write_applied.
  void ApplyFirstWrite(const RunWrite& first, Lease& lease);
};

// Timers (issue 23): runs waiting without a worker until the store's clock
// passes their wake time (RunWrite::wake_at).
class TimerStore {
 public:
  virtual ~TimerStore() = default;
  // Runs `waiting` whose wake time is at or before the store's now, the
  // earliest first, at most `limit`. The timer sweep queues each with a
  // Commit of Party::kTimer (waiting -> queued); what it read may be stale,
  // so the commit expects status waiting.
  virtual absl::StatusOr<std::vector<std::string>> FindDueTimers(int limit) = 0;
  // The earliest wake time of any `waiting` run; nullopt when none has one
  // (none waits, or each waits for a signal with no timeout).
  virtual absl::StatusOr<std::optional<absl::Time>> NextWakeTime() = 0;
  // Whether any run is queued, running, or waiting with a wake time: work
  // that comes to an executor by itself. One statement, so one snapshot: a
  // run moving between those statuses is never missed (`worker
  // --until-idle`; a check per status could miss a run that moved between
  // two checks).
  virtual absl::StatusOr<bool> HasWorkToCome() = 0;
};

// A signal sent to a run (issue 23), as its mailbox keeps it.
struct SignalRecord {
  std::string run_id;
  int64_t seq = 0;  // 1, 2, ... per run: the order signals are consumed in
  std::string name;
  nlohmann::json payload;
  std::string idempotency_key;  // "" = none
  absl::Time received_at;       // by the store's clock
  std::string consumed_by;      // the key of the wait that consumed it; "" = in the mailbox
  std::optional<absl::Time> consumed_at;
};

struct NewSignal {
  std::string run_id;
  std::string name;
  nlohmann::json payload;
  std::string idempotency_key;  // "" = no duplicate guard
  // Appended with the signal; the store sets "seq" and "resolved" (whether
  // it resolved the run's wait) in the data of each.
  std::vector<Event> events;
  // Appended after `events` when the signal resolves the run's wait.
  std::vector<Event> wake_events;
};

struct SendSignalResult {
  SignalRecord signal;
  bool created = true;    // false: the idempotency key matched `signal`, nothing was written
  bool resolved = false;  // this signal resolved the run's wait (the run is queued)
};

// Signals (issue 23): each run's mailbox. Every method is one transaction.
class SignalStore {
 public:
  virtual ~SignalStore() = default;
  // Keeps the signal in the run's mailbox, with the next seq, and appends
  // `events`. When the run rests waiting for a signal of this name, the same
  // commit marks the signal consumed by that wait and queues the run
  // (Party::kSignal, waiting -> queued, a fresh attempt budget, entry
  // resume, `wake_events`): the one compare-and-set that resolves the wait,
  // against the timer's and the cancel's. kNotFound: no such run.
  // kFailedPrecondition, nothing kept: the run is finished. With an
  // idempotency key already used for this run, writes nothing and returns
  // that signal with created = false. kResourceExhausted, nothing kept: the
  // mailbox holds kMaxMailbox signals not yet consumed.
  static constexpr int kMaxMailbox = 1000;
  virtual absl::StatusOr<SendSignalResult> SendSignal(const NewSignal& signal) = 0;
  // The earliest signal named `name` in the run's mailbox (not consumed).
  virtual absl::StatusOr<std::optional<SignalRecord>> NextSignal(const std::string& run_id,
                                                                 const std::string& name) = 0;
  // The signal the wait `key` consumed, if any.
  virtual absl::StatusOr<std::optional<SignalRecord>> SignalConsumedBy(
      const std::string& run_id, const std::string& key) = 0;
  // The run's signals after `after_seq`, in seq order, at most `limit`.
  virtual absl::StatusOr<std::vector<SignalRecord>> ListSignals(const std::string& run_id,
                                                                int64_t after_seq, int limit) = 0;
};

// A schedule (issue 23): runs of a catalog workflow started at the times a
// cron expression names in a time zone. The store keeps the definition and
// the tick to fire next; the engine computes fire times (src/schedule).
struct ScheduleRecord {
  std::string id;        // 1 to 128 of A-Z a-z 0-9 _ . : -
  std::string workflow;  // a catalog name; each tick starts its latest version
  std::string cron;      // a cron expression (src/schedule/cron.h)
  std::string timezone = "UTC";  // an IANA time-zone name
  nlohmann::json inputs = nlohmann::json::object();
  std::string overlap = "skip";     // the previous run unfinished: skip | allow | cancel
  std::string catch_up = "latest";  // ticks missed while nothing ran: none | latest | all
  bool paused = false;
  absl::Time next_fire_at;          // the tick to fire next (kept while paused)
  std::string last_run_id;          // the run the latest tick started; "" = none yet
  std::optional<absl::Time> last_fired_at;  // the latest tick fired (started a run or not)
  absl::Time created_at;            // set by the store (its Now())
  absl::Time updated_at;            // set by the store at each write
};

// Schedules (issue 23). Every method is one transaction.
class ScheduleStore {
 public:
  virtual ~ScheduleStore() = default;
  // Keeps `s`: its id, definition, paused and next_fire_at (the other
  // fields are the store's). A schedule with its id exists: kAlreadyExists
  // and nothing written, unless `replace`, which replaces those fields and
  // keeps its last run and creation time. kInvalidArgument, nothing written:
  // a field the store cannot keep (an empty id, workflow or cron, an overlap
  // or catch_up outside the lists above, inputs that are not an object).
  virtual absl::StatusOr<ScheduleRecord> PutSchedule(const ScheduleRecord& s, bool replace) = 0;
  virtual absl::StatusOr<std::optional<ScheduleRecord>> GetSchedule(const std::string& id) = 0;
  // By id, those after `after_id` ("" = from the first), at most `limit`.
  virtual absl::StatusOr<std::vector<ScheduleRecord>> ListSchedules(const std::string& after_id,
                                                                    int limit) = 0;
  // false: no such schedule.
  virtual absl::StatusOr<bool> DeleteSchedule(const std::string& id) = 0;
  // Pauses it, or resumes it with `next_fire_at` as its next tick (the
  // caller computes it from now: ticks passed while paused are not caught
  // up). false: no such schedule.
  virtual absl::StatusOr<bool> SetSchedulePaused(const std::string& id, bool paused,
                                                 absl::Time next_fire_at) = 0;
  // Schedules not paused whose next tick is at or before the store's now,
  // the earliest first, at most `limit`.
  virtual absl::StatusOr<std::vector<ScheduleRecord>> FindDueSchedules(int limit) = 0;
  // The compare-and-set that fires a tick once however many processes see
  // it due: moves next_fire_at from `tick` to `next`, sets last_fired_at to
  // `tick` and, when `run_id` is not "" (the tick started that run; "" = it
  // started none, e.g. skipped for an overlap), last_run_id to `run_id` —
  // only if the schedule is not paused and its next tick is still `tick`.
  // false, nothing written: another process fired it first, or it was
  // paused, replaced or deleted since it was read.
  virtual absl::StatusOr<bool> AdvanceSchedule(const std::string& id, absl::Time tick,
                                               absl::Time next, const std::string& run_id) = 0;
};

// API tokens.
class TokenStore {
 public:
  virtual ~TokenStore() = default;

  // Only a hash of each token is stored (src/engine/tokens.h makes tokens
  // and hashes); these methods never see a token.
  //
  // Inserts `token` (id, name, role; created_at and revoked_at are ignored)
  // with `token_hash`, active, created at Now(); returns the stored record.
  // kAlreadyExists, writing nothing, when an active token has this name or
  // a token has this id or hash; kInvalidArgument when id, name or hash is
  // empty.
  virtual absl::StatusOr<TokenRecord> CreateToken(const TokenRecord& token,
                                                  const std::string& token_hash) = 0;
  // Every token, active and revoked, oldest first (created_at, then id).
  virtual absl::StatusOr<std::vector<TokenRecord>> ListTokens() = 0;
  // Revokes the active token whose id is `id_or_name`, else the active token
  // of that name, at Now(); returns it as revoked. kNotFound, writing
  // nothing, when no active token has that id or name (revoking twice is
  // kNotFound the second time).
  virtual absl::StatusOr<TokenRecord> RevokeToken(const std::string& id_or_name) = 0;
  // The active token whose hash is `token_hash`: one indexed equality
  // lookup. kNotFound when none is (unknown or revoked).
  virtual absl::StatusOr<TokenRecord> FindActiveToken(const std::string& token_hash) = 0;
};

// The write-operations ledger (write_ledger.h).
class WriteLedgerStore {
 public:
  virtual ~WriteLedgerStore() = default;

  // Records the intent of the external write `intent.key` unless the key
  // has a row; returns the row and whether this call created it. An existing
  // row is returned as it is (its `begins` counted up), with or without a
  // result: the caller reuses the result or reconciles the intent.
  // kAborted, writing nothing: the run is not running under
  // `intent.lease_token`. kFailedPrecondition: the key exists with another
  // request_digest. kNotFound: no such run. kInvalidArgument: an empty key
  // part, idempotency key or digest.
  virtual absl::StatusOr<BeginWriteResult> BeginWrite(const WriteIntent& intent) = 0;
  // Records the result of the write `key` and returns the row. Not fenced:
  // the result is a fact about the outside world, whoever learned it. The
  // first result wins: on a row that has one, nothing is written and the
  // row is returned with its own. kNotFound: no intent for `key`.
  virtual absl::StatusOr<WriteOperation> FinishWrite(const WriteKey& key,
                                                     const WriteResult& result) = 0;
  // The write operations of a run, oldest first (created_at, then path and
  // action). Empty for an unknown run.
  virtual absl::StatusOr<std::vector<WriteOperation>> ListWrites(const std::string& run_id) = 0;
};

// The budget ledger (budget_ledger.h).
class BudgetStore {
 public:
  virtual ~BudgetStore() = default;

  // Sets the limit of `tenant` (nullopt = none), creating its row with
  // nothing spent or reserved if needed; spent and reserved are kept.
  // Returns the row. kInvalidArgument: empty tenant, negative limit.
  virtual absl::StatusOr<TenantBudget> SetTenantBudget(const std::string& tenant,
                                                       std::optional<int64_t> limit_micros) = 0;
  // Every tenant row, by name.
  virtual absl::StatusOr<std::vector<TenantBudget>> ListTenantBudgets() = 0;
  // The row of `tenant`; nullopt when it has none (nothing spent or reserved,
  // no limit stored). kInvalidArgument: empty tenant.
  virtual absl::StatusOr<std::optional<TenantBudget>> GetTenantBudget(
      const std::string& tenant) = 0;
  // The run's budget row. kNotFound: the run never reserved.
  virtual absl::StatusOr<RunBudget> GetRunBudget(const std::string& run_id) = 0;
  // The reservations of a run, oldest first (created_at, path, attempt).
  virtual absl::StatusOr<std::vector<Reservation>> ListReservations(const std::string& run_id) = 0;
  // Reserves `request.amount_micros` from the run and its tenant in one
  // compare-and-set: granted only when both have at least that much left;
  // otherwise nothing is reserved and the result says who refused, with the
  // figures. A key that is already reserved is returned granted, unchanged.
  // kAborted, writing nothing: the run is not running under
  // `request.lease_token` (or the lease expired). kNotFound: no such run.
  // kFailedPrecondition: the key was already settled or released.
  // kInvalidArgument: an empty key part, a negative amount or limit.
  virtual absl::StatusOr<ReserveResult> Reserve(const BudgetRequest& request) = 0;
  // Books the real cost of the call `key`: its reservation leaves the
  // reserved figures and `cost_micros` is added to spent (run and tenant).
  // A released reservation (recovery ran) books the cost less what the
  // release charged. Not fenced:
  // a cost is a fact. The first settle wins; a later one returns the row.
  // kNotFound: no reservation for `key`. kInvalidArgument: negative cost.
  virtual absl::StatusOr<Reservation> SettleReservation(const BudgetKey& key,
                                                        int64_t cost_micros) = 0;
  // Releases every `reserved` reservation of the run (recovery: its
  // executor died or lost the lease): their amounts move from the reserved
  // to the spent figures, and each row records its amount as charged
  // (cost_micros): its call may have been answered and paid. Returns how
  // many were released (0 for an unknown run).
  virtual absl::StatusOr<int64_t> ReleaseReservations(const std::string& run_id) = 0;
};

// Streaming (issue 24, live_text.h): the text so far of each model call
// streaming now, mirrored by the process executing it (at most about every
// 100 ms, and at least every few seconds while the call lasts) so that a
// process that does not execute the run (`serve --no-executors`, `runloom
// events --follow`) can show it. Ephemeral: one row per call, replaced as it
// grows, put once more with its whole text when it ends (before the step's
// record commits) and deleted soon after; a step's record keeps the text.
struct LiveTextRow {
  std::string run_id;
  std::string path;     // the step's path
  int attempt = 1;
  std::string writer;   // the engine instance that executes the call
  std::string text;     // the text so far (at most 1 MiB); the whole text once ended
  bool ended = false;   // the call ended (the row is kept a little, for the pollers)
  absl::Time updated_at = absl::InfinitePast();  // the store's Now() at the last put
};

class LiveTextStore {
 public:
  virtual ~LiveTextStore() = default;

  // Inserts or replaces the row of (run_id, path), stamped at Now().
  // kInvalidArgument for an empty run id or path, or a text past 1 MiB.
  virtual absl::Status PutLiveText(const LiveTextRow& row) = 0;
  // Deletes the row of (run_id, path) if it is of `attempt`; OK when there
  // is none.
  virtual absl::Status DeleteLiveText(const std::string& run_id, const std::string& path,
                                      int attempt) = 0;
  // The rows of `run_id` put within `max_age` of Now() (older ones are left
  // by a writer that stopped: ignored), by path.
  virtual absl::StatusOr<std::vector<LiveTextRow>> ListLiveText(const std::string& run_id,
                                                                absl::Duration max_age) = 0;
};

// Retention (issue 25): deleting finished runs with every row that belongs
// to them, in bounded batches, so that a store that runs for months does not
// grow without end. The policy (how long to keep what) is the caller's
// (engine/service/retention.h); the store only knows which runs may go.
struct PruneRequest {
  // Runs whose finished_at (the store's time of their terminal write) is
  // strictly before this go; later ones stay.
  absl::Time finished_before = absl::InfinitePast();
  // The audit horizon of the write ledger: a run that has a write_operations
  // row created at or after this is kept whole (its write rows are the audit
  // trail of an external effect, and the ledger's key references the run),
  // until the horizon passes it. InfiniteFuture() = no write row holds a run.
  absl::Time audit_before = absl::InfiniteFuture();
  std::string workflow_name;                  // "" = runs of any workflow
  std::vector<std::string> except_workflows;  // never these (they have their own policy)
  // Runs per call, the oldest finished first; <= 0 = no bound (a dry run's
  // count; a deleting call should stay bounded: one transaction holds them).
  int limit = 100;
  bool dry_run = false;  // count what would go, delete nothing
};

struct PruneResult {
  int64_t runs = 0;  // runs deleted (or, dry run, that would be)
  int64_t rows = 0;  // rows deleted in every table, the runs' own rows included
};

class RetentionStore {
 public:
  virtual ~RetentionStore() = default;
  // Deletes, in one transaction, at most `request.limit` runs that are
  // terminal (completed, rejected, unresolved, budget_stopped, failed,
  // cancelled) and finished before `request.finished_before`, and every row
  // of theirs: step records, events, queue/outbox messages, dead letters,
  // signals, live text, budget run rows and reservations, write operations.
  // Never deleted: a run that is not terminal (whatever its age); a child
  // run whose parent is not terminal (the parent reads its end); a parent
  // with a child that is not terminal (the orphan sweep needs the parent);
  // a run with a reservation still reserved (its tenant's reserved figure
  // would never be released); a run with a write row younger than
  // `audit_before`; tenant budget rows, workflows, schedules, tokens.
  // A deleted run's idempotency key is free again. Idempotent: a run deleted
  // by another process is simply not counted. With `dry_run`, writes
  // nothing and counts the same set. kInvalidArgument: an empty name in
  // except_workflows.
  //
  // Example (the sweeper's batch):
  //   RUNLOOM_ASSIGN_OR_RETURN(absl::Time now, store->Now());
  //   PruneRequest r{.finished_before = now - absl::Hours(24 * 30)};
  //   RUNLOOM_ASSIGN_OR_RETURN(PruneResult got, store->PruneRuns(r));
  //   // got.runs == r.limit: more may be left for the next batch.
  virtual absl::StatusOr<PruneResult> PruneRuns(const PruneRequest& request) = 0;
};

// The durable state of runloom: every role. What a backend implements.
class Store : public CatalogStore,
              public RunStore,
              public TokenStore,
              public WriteLedgerStore,
              public BudgetStore,
              public TimerStore,
              public SignalStore,
              public ScheduleStore,
              public LiveTextStore,
              public RetentionStore {
 public:
  Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  ~Store() override = default;
};

// A Store that passes every call to the store it wraps. Derive from it to
// change a few methods and keep the rest (fault injection in tests, metrics,
// tracing), as leveldb's EnvWrapper does for Env.
class StoreWrapper : public Store {
 public:
  // Owns `target`.
  explicit StoreWrapper(std::unique_ptr<Store> target)
      : owned_(std::move(target)), inner_(owned_.get()) {}
  // Borrows `target`, which must outlive the wrapper (several wrappers may
  // share one store, e.g. one per simulated process).
  explicit StoreWrapper(Store* target) : inner_(target) {}
  absl::StatusOr<WorkflowVersion> RegisterWorkflow(const std::string& name,
                                                   const std::string& digest,
                                                   const nlohmann::json& canonical) override {
    return inner_->RegisterWorkflow(name, digest, canonical);
  }
  absl::StatusOr<WorkflowVersion> GetWorkflow(const std::string& name, int64_t version) override {
    return inner_->GetWorkflow(name, version);
  }
  absl::StatusOr<std::vector<WorkflowVersion>> ListWorkflows() override {
    return inner_->ListWorkflows();
  }
  absl::StatusOr<CreateRunResult> CreateRun(const NewRun& run, std::vector<Event> events) override {
    return inner_->CreateRun(run, std::move(events));
  }
  absl::StatusOr<RunRecord> GetRun(const std::string& run_id) override {
    return inner_->GetRun(run_id);
  }
  absl::StatusOr<std::vector<RunRecord>> ListRuns(const RunFilter& filter) override {
    return inner_->ListRuns(filter);
  }
  absl::StatusOr<std::vector<std::string>> ListOrphanedChildren(int limit) override {
    return inner_->ListOrphanedChildren(limit);
  }
  absl::StatusOr<ActiveRunCounts> CountActiveRuns() override { return inner_->CountActiveRuns(); }
  using Store::AcquireLease;
  absl::StatusOr<Lease> AcquireLease(LeaseRequest request) override {
    return inner_->AcquireLease(std::move(request));
  }
  absl::StatusOr<RunRecord> RenewLease(const std::string& run_id, const std::string& token,
                                       absl::Duration ttl) override {
    return inner_->RenewLease(run_id, token, ttl);
  }
  absl::Status Commit(const RunWrite& write) override { return inner_->Commit(write); }
  absl::StatusOr<std::vector<StepRecord>> ListSteps(const std::string& run_id,
                                                    std::optional<int64_t> revision) override {
    return inner_->ListSteps(run_id, revision);
  }
  absl::StatusOr<std::vector<Event>> ListEvents(const std::string& run_id, int64_t after_seq,
                                                int limit) override {
    return inner_->ListEvents(run_id, after_seq, limit);
  }
  absl::StatusOr<std::vector<RecoveryCandidate>> FindRecoverable(absl::Duration queued_grace,
                                                                 int limit) override {
    return inner_->FindRecoverable(queued_grace, limit);
  }
  absl::StatusOr<std::vector<LiveLease>> ListLiveLeases(int limit) override {
    return inner_->ListLiveLeases(limit);
  }
  absl::Status ExpireLease(const std::string& run_id, const std::string& token) override {
    return inner_->ExpireLease(run_id, token);
  }
  absl::StatusOr<std::vector<std::string>> FindCancelRequested(
      const std::vector<std::string>& run_ids) override {
    return inner_->FindCancelRequested(run_ids);
  }
  absl::Status Enqueue(const std::string& run_id, std::vector<Event> events) override {
    return inner_->Enqueue(run_id, std::move(events));
  }
  absl::StatusOr<std::vector<std::string>> FindDueTimers(int limit) override {
    return inner_->FindDueTimers(limit);
  }
  absl::StatusOr<std::optional<absl::Time>> NextWakeTime() override {
    return inner_->NextWakeTime();
  }
  absl::StatusOr<bool> HasWorkToCome() override { return inner_->HasWorkToCome(); }
  absl::StatusOr<ScheduleRecord> PutSchedule(const ScheduleRecord& s, bool replace) override {
    return inner_->PutSchedule(s, replace);
  }
  absl::StatusOr<std::optional<ScheduleRecord>> GetSchedule(const std::string& id) override {
    return inner_->GetSchedule(id);
  }
  absl::StatusOr<std::vector<ScheduleRecord>> ListSchedules(const std::string& after_id,
                                                            int limit) override {
    return inner_->ListSchedules(after_id, limit);
  }
  absl::StatusOr<bool> DeleteSchedule(const std::string& id) override {
    return inner_->DeleteSchedule(id);
  }
  absl::StatusOr<bool> SetSchedulePaused(const std::string& id, bool paused,
                                         absl::Time next_fire_at) override {
    return inner_->SetSchedulePaused(id, paused, next_fire_at);
  }
  absl::StatusOr<std::vector<ScheduleRecord>> FindDueSchedules(int limit) override {
    return inner_->FindDueSchedules(limit);
  }
  absl::StatusOr<bool> AdvanceSchedule(const std::string& id, absl::Time tick, absl::Time next,
                                       const std::string& run_id) override {
    return inner_->AdvanceSchedule(id, tick, next, run_id);
  }
  absl::StatusOr<SendSignalResult> SendSignal(const NewSignal& signal) override {
    return inner_->SendSignal(signal);
  }
  absl::StatusOr<std::optional<SignalRecord>> NextSignal(const std::string& run_id,
                                                         const std::string& name) override {
    return inner_->NextSignal(run_id, name);
  }
  absl::StatusOr<std::optional<SignalRecord>> SignalConsumedBy(const std::string& run_id,
                                                               const std::string& key) override {
    return inner_->SignalConsumedBy(run_id, key);
  }
  absl::StatusOr<std::vector<SignalRecord>> ListSignals(const std::string& run_id,
                                                        int64_t after_seq, int limit) override {
    return inner_->ListSignals(run_id, after_seq, limit);
  }
  absl::StatusOr<TokenRecord> CreateToken(const TokenRecord& token,
                                          const std::string& token_hash) override {
    return inner_->CreateToken(token, token_hash);
  }
  absl::StatusOr<std::vector<TokenRecord>> ListTokens() override { return inner_->ListTokens(); }
  absl::StatusOr<TokenRecord> RevokeToken(const std::string& id_or_name) override {
    return inner_->RevokeToken(id_or_name);
  }
  absl::StatusOr<TokenRecord> FindActiveToken(const std::string& token_hash) override {
    return inner_->FindActiveToken(token_hash);
  }
  absl::StatusOr<BeginWriteResult> BeginWrite(const WriteIntent& intent) override {
    return inner_->BeginWrite(intent);
  }
  absl::StatusOr<WriteOperation> FinishWrite(const WriteKey& key,
                                             const WriteResult& result) override {
    return inner_->FinishWrite(key, result);
  }
  absl::StatusOr<std::vector<WriteOperation>> ListWrites(const std::string& run_id) override {
    return inner_->ListWrites(run_id);
  }
  absl::StatusOr<TenantBudget> SetTenantBudget(const std::string& tenant,
                                               std::optional<int64_t> limit_micros) override {
    return inner_->SetTenantBudget(tenant, limit_micros);
  }
  absl::StatusOr<std::vector<TenantBudget>> ListTenantBudgets() override {
    return inner_->ListTenantBudgets();
  }
  absl::StatusOr<std::optional<TenantBudget>> GetTenantBudget(const std::string& tenant) override {
    return inner_->GetTenantBudget(tenant);
  }
  absl::StatusOr<RunBudget> GetRunBudget(const std::string& run_id) override {
    return inner_->GetRunBudget(run_id);
  }
  absl::StatusOr<std::vector<Reservation>> ListReservations(const std::string& run_id) override {
    return inner_->ListReservations(run_id);
  }
  absl::StatusOr<ReserveResult> Reserve(const BudgetRequest& request) override {
    return inner_->Reserve(request);
  }
  absl::StatusOr<Reservation> SettleReservation(const BudgetKey& key,
                                                int64_t cost_micros) override {
    return inner_->SettleReservation(key, cost_micros);
  }
  absl::StatusOr<int64_t> ReleaseReservations(const std::string& run_id) override {
    return inner_->ReleaseReservations(run_id);
  }
  absl::Status PutLiveText(const LiveTextRow& row) override { return inner_->PutLiveText(row); }
  absl::Status DeleteLiveText(const std::string& run_id, const std::string& path,
                              int attempt) override {
    return inner_->DeleteLiveText(run_id, path, attempt);
  }
  absl::StatusOr<std::vector<LiveTextRow>> ListLiveText(const std::string& run_id,
                                                        absl::Duration max_age) override {
    return inner_->ListLiveText(run_id, max_age);
  }
  absl::StatusOr<PruneResult> PruneRuns(const PruneRequest& request) override {
    return inner_->PruneRuns(request);
  }
  absl::StatusOr<absl::Time> Now() override { return inner_->Now(); }
  Clock* clock() override { return inner_->clock(); }

 protected:
  Store& inner() { return *inner_; }  // the wrapped store

 private:
  const std::unique_ptr<Store> owned_;  // null when borrowed
  Store* const inner_;
};

}  // namespace runloom
