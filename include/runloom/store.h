// Store: the durable state of runloom behind one interface.
//
// A Store keeps the workflow catalog, one row per run, step records, run
// events, and the queue messages (the embedded transport's queue; the outbox
// in distributed mode). Every run status write is a compare-and-set on the
// expected status and, for executor writes, the current lease token, and is
// checked against the transition table (status.h); events and step records are
// written in the same transaction as the state change they describe.
//
// Lease deadlines are computed by the store from its own clock, never by
// comparing the clocks of different machines.
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

#include "runloom/clock.h"
#include "runloom/event_bus.h"
#include "runloom/run.h"
#include "runloom/transport.h"

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
  int max_attempts = 5;
  std::string phase;
  nlohmann::json context = nlohmann::json::object();  // stored in RunRecord::context
};

struct CreateRunResult {
  RunRecord run;
  bool created = true;  // false: the idempotency key matched `run`, nothing was written
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
  std::optional<std::string> entry;
  std::optional<nlohmann::json> context;
  std::optional<bool> cancel_requested;
  bool reset_attempts = false;  // a decision or rerun starts a fresh attempt budget
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

struct RunFilter {
  std::optional<RunStatus> status;
  std::string workflow_name;
  int limit = 100;
};

class Store {
 public:
  Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  virtual ~Store() = default;

  // ---- catalog ----
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

  // ---- runs ----
  // Inserts the run (queued), `events` and its queue message in one
  // transaction. With an idempotency key already used for this workflow name,
  // writes nothing and returns the existing run with created = false.
  virtual absl::StatusOr<CreateRunResult> CreateRun(const NewRun& run,
                                                    std::vector<Event> events) = 0;
  virtual absl::StatusOr<RunRecord> GetRun(const std::string& run_id) = 0;
  virtual absl::StatusOr<std::vector<RunRecord>> ListRuns(const RunFilter& filter) = 0;

  // ---- leases ----
  // Takes the lease on a run that is queued, or running with an expired
  // lease: status running, a new token, attempts + 1, expiry now + ttl, and
  // `events` appended (their data may be amended with the attempt number).
  // kAborted: another lease is live. kFailedPrecondition: paused or terminal.
  virtual absl::StatusOr<Lease> AcquireLease(const std::string& run_id, const std::string& owner,
                                             absl::Duration ttl, std::vector<Event> events) = 0;
  // AcquireLease, then, on the run's first lease only (attempt 1), `first`:
  // a fenced executor write made with the new token (the store sets its
  // run_id, party and lease_token). An executor starting a fresh run thus
  // takes the lease and starts its first step in one commit instead of two.
  // Errors are AcquireLease's (nothing written). Otherwise the lease is held
  // and `first_write` says what became of `first`: OK (applied), Commit's
  // refusal (e.g. kCancelled), or kFailedPrecondition when this was not the
  // run's first lease; when not OK, nothing of `first` was written. The
  // default runs AcquireLease and Commit one after the other; a backend
  // overrides it with one transaction.
  struct FirstLease {
    Lease lease;
    absl::Status first_write;
  };
  virtual absl::StatusOr<FirstLease> AcquireFirstLease(const std::string& run_id,
                                                       const std::string& owner, absl::Duration ttl,
                                                       std::vector<Event> events,
                                                       const RunWrite& first);
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
  // Runs `running` whose lease expired, and runs `queued` for longer than
  // `queued_grace` with no live lease and no queue message.
  virtual absl::StatusOr<std::vector<RecoveryCandidate>> FindRecoverable(
      absl::Duration queued_grace, int limit) = 0;
  // Adds a queue message (outbox row) for the run unless one is pending, and
  // appends `events` (e.g. the sweeper's "run.lease_expired"), atomically.
  virtual absl::Status Enqueue(const std::string& run_id, std::vector<Event> events) = 0;

  // The clock the store computes lease deadlines with.
  virtual Clock* clock() = 0;
};

// A Store that passes every call to the store it wraps. Derive from it to
// change a few methods and keep the rest (fault injection in tests, metrics,
// tracing), as leveldb's EnvWrapper does for Env.
class StoreWrapper : public Store {
 public:
  explicit StoreWrapper(std::unique_ptr<Store> target) : inner_(std::move(target)) {}
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
  absl::StatusOr<Lease> AcquireLease(const std::string& run_id, const std::string& owner,
                                     absl::Duration ttl, std::vector<Event> events) override {
    return inner_->AcquireLease(run_id, owner, ttl, std::move(events));
  }
  absl::StatusOr<FirstLease> AcquireFirstLease(const std::string& run_id, const std::string& owner,
                                               absl::Duration ttl, std::vector<Event> events,
                                               const RunWrite& first) override {
    return inner_->AcquireFirstLease(run_id, owner, ttl, std::move(events), first);
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
  absl::Status Enqueue(const std::string& run_id, std::vector<Event> events) override {
    return inner_->Enqueue(run_id, std::move(events));
  }
  Clock* clock() override { return inner_->clock(); }

 protected:
  Store& inner() { return *inner_; }  // the wrapped store

 private:
  std::unique_ptr<Store> inner_;
};

struct SqliteOptions {
  // PRAGMA synchronous: "normal" (default: durable against process crashes,
  // a power loss may drop the last commits) or "full" (fsync every commit).
  std::string synchronous = "normal";
  // How long a writer waits for another process's write lock.
  absl::Duration busy_timeout = absl::Seconds(10);
  Clock* clock = nullptr;  // nullptr = RealClock()
  EventBus* event_bus = nullptr;
  bool watch_other_processes = true;  // bus: not owned, see event_bus.h; true: other processes' too
};

// The embedded backend: a store and the queue-table transport over one file.
struct EmbeddedBackend {
  std::unique_ptr<Store> store;
  std::unique_ptr<Transport> transport;  // reads the queue table of `store`'s file
};

// Opens (creating if needed) the SQLite database at `path` (":memory:" for a
// private in-memory database), applying migrations. A database whose schema
// is newer than this binary is refused with kFailedPrecondition.
absl::StatusOr<EmbeddedBackend> OpenSqlite(const std::string& path, const SqliteOptions& options);

}  // namespace runloom
