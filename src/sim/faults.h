// The fault-injecting wrappers every simulated process reaches the shared
// store and queue through, and the simulated external service its http
// writes go to (sim.h). Each call is a scheduling point: a crashed process's
// call fails without reaching the store, a stopped process's call waits for
// it to wake, a slow call lets the clock (and other processes) move first;
// a write may fail before it applies or lose its reply after it applied.
// The wrappers also check, against the store as it is just before the call,
// that what the store accepts is allowed (the checker's inline half).
//
// Thread-safety: none (the simulator's single thread).
#pragma once

#include "runloom/stage_events.h"
#include "runloom/store.h"
#include "runloom/transport.h"

#include "llm/cap_board.h"
#include "steps/http_exchange.h"
#include "testing/transport_wrapper.h"

#include "sim/world.h"

#include <functional>
#include <map>
#include <memory>
#include <string>

namespace runloom::sim {

// How often each fault strikes while faults are on (a seed picks them).
struct FaultRates {
  double store_fail = 0;  // a call fails before it reaches the store
  double lost_reply = 0;  // a write applies and its reply is lost
  double slow = 0;        // a call waits first (the clock moves, others run)
  double stop = 0;        // the calling process is stopped past its lease (SIGSTOP)
  double message_lost = 0;
  double message_duplicated = 0;
  double message_delayed = 0;
  double answer_dropped = 0;  // the service applies a write and the answer is lost
  absl::Duration stop_for;    // how long a stopped process sleeps
};

// What the simulation counts and decides about faults, shared by the wrappers.
struct FaultState {
  FaultRates rates;
  bool on = true;
  int64_t operations = 0;
  int64_t calls_returned = 0;  // store calls that reached the store (the checker's "dirty" mark)
  int faults = 0;
  int parks = 0;  // runs parked (moves to waiting): at a timer, a wait for a signal
  int wakes = 0;  // timers woken (waiting -> queued by the timer party)
  int signals_kept = 0;      // signals the store kept (SendSignal, created)
  int signals_resolved = 0;  // of them, those that resolved the wait of a run resting at it
  int signal_parks = 0;      // moves to waiting for a signal
  int over_limit = 0;        // leases refused over a concurrency limit (issue 23)
  int keyed_leases = 0;      // leases taken on runs with a concurrency key
  int leases_ended = 0;      // leases ended early: their holder was dead (issue 27)
};

class FaultStore final : public StoreWrapper {
 public:
  // Borrows `base`, `world` and `faults`, which must outlive it.
  FaultStore(Store* base, World* world, FaultState* faults, std::shared_ptr<Incarnation> inc,
             bool injects)
      : StoreWrapper(base),
        base_(base),
        world_(world),
        faults_(faults),
        inc_(std::move(inc)),
        injects_(injects) {}

  absl::StatusOr<CreateRunResult> CreateRun(const NewRun& run, std::vector<Event> events) override;
  absl::StatusOr<RunRecord> GetRun(const std::string& run_id) override;
  absl::StatusOr<WorkflowVersion> GetWorkflow(const std::string& name, int64_t version) override;
  using Store::AcquireLease;
  absl::StatusOr<Lease> AcquireLease(LeaseRequest request) override;
  absl::StatusOr<RunRecord> RenewLease(const std::string& run_id, const std::string& token,
                                       absl::Duration ttl) override;
  absl::Status Commit(const RunWrite& write) override;
  absl::StatusOr<std::vector<StepRecord>> ListSteps(const std::string& run_id,
                                                    std::optional<int64_t> revision) override;
  absl::StatusOr<std::vector<RecoveryCandidate>> FindRecoverable(absl::Duration queued_grace,
                                                                 int limit) override;
  absl::StatusOr<std::vector<LiveLease>> ListLiveLeases(int limit) override;
  absl::Status ExpireLease(const std::string& run_id, const std::string& token) override;
  absl::StatusOr<std::vector<std::string>> FindCancelRequested(
      const std::vector<std::string>& run_ids) override;
  absl::Status Enqueue(const std::string& run_id, std::vector<Event> events) override;
  absl::StatusOr<BeginWriteResult> BeginWrite(const WriteIntent& intent) override;
  absl::StatusOr<WriteOperation> FinishWrite(const WriteKey& key,
                                             const WriteResult& result) override;
  absl::StatusOr<ReserveResult> Reserve(const BudgetRequest& request) override;
  absl::StatusOr<Reservation> SettleReservation(const BudgetKey& key, int64_t cost_micros) override;
  absl::StatusOr<int64_t> ReleaseReservations(const std::string& run_id) override;
  absl::StatusOr<SendSignalResult> SendSignal(const NewSignal& signal) override;
  absl::StatusOr<PruneResult> PruneRuns(const PruneRequest& request) override;
  absl::StatusOr<std::optional<SignalRecord>> NextSignal(const std::string& run_id,
                                                         const std::string& name) override;
  absl::StatusOr<std::optional<SignalRecord>> SignalConsumedBy(const std::string& run_id,
                                                               const std::string& key) override;

 private:
  // Before a call: the scheduling point and the faults that strike first.
  absl::Status Before(const char* what, bool writes);
  // After a write the store applied: whether its reply is lost.
  bool ReplyLost(const char* what);
  // A fenced write is accepted only under the current, live lease.
  void CheckFenced(const char* what, const RunRecord& before, const std::string& token);

  Store* const base_;
  World* const world_;
  FaultState* const faults_;
  const std::shared_ptr<Incarnation> inc_;
  const bool injects_;  // false for the clients' process
};

class FaultTransport final : public testing::TransportWrapper {
 public:
  FaultTransport(Transport* base, World* world, FaultState* faults,
                 std::shared_ptr<Incarnation> inc)
      : TransportWrapper(base), base_(base), world_(world), faults_(faults), inc_(std::move(inc)) {}

  absl::StatusOr<std::vector<QueueMessage>> Claim(const std::string& consumer, int max,
                                                  absl::Duration visibility) override;
  absl::Status Ack(const QueueMessage& m) override;
  absl::Status Release(const QueueMessage& m) override;

 private:
  Transport* const base_;
  World* const world_;
  FaultState* const faults_;
  const std::shared_ptr<Incarnation> inc_;
};

// The checker's record of the LLM cap protocol (llm/cap_board.h), kept by
// every process's FaultCapBoard from what the board answered: who holds the
// lease on deciding the cap and until when (world time: the board's clock),
// and every publication.
struct CapLedger {
  std::string holder;
  absl::Time expires = absl::InfinitePast();
  absl::Duration lease;  // the controllers' lease
  int max_cap = 0;       // the controllers' ceiling
  int publications = 0;
  int takeovers = 0;  // the lease went to another controller
};

// One process's way to the shared cap board: each call is a scheduling
// point with the store's faults (crashed, stopped, slow, failed before it
// reaches the board); the answers are checked against the ledger: never two
// lease holders at once, no publication but by the holder of a live lease,
// every cap within [1, max_cap].
class FaultCapBoard final : public CapBoard {
 public:
  // Borrows everything; all must outlive it.
  FaultCapBoard(CapBoard* base, World* world, FaultState* faults, std::shared_ptr<Incarnation> inc,
                CapLedger* ledger)
      : base_(base), world_(world), faults_(faults), inc_(std::move(inc)), ledger_(ledger) {}

  absl::StatusOr<std::string> Lead(const std::string& provider, const std::string& candidate,
                                   absl::Duration lease) override;
  absl::StatusOr<bool> Publish(const std::string& provider, const std::string& leader, int cap,
                               absl::Duration ttl) override;
  absl::Status Cut(const std::string& provider, int cap, absl::Duration ttl) override;
  absl::StatusOr<std::optional<int>> Read(const std::string& provider) override;
  absl::StatusOr<std::string> Report(const std::string& provider,
                                     const SenseReport& report) override;
  absl::StatusOr<std::vector<SenseReport>> ReadReports(const std::string& provider,
                                                       std::string* after, int* malformed) override;
  std::string Describe() const override { return "the simulated board"; }

 private:
  absl::Status Before(const char* what);
  void CheckCap(const char* what, int cap);

  CapBoard* const base_;
  World* const world_;
  FaultState* const faults_;
  const std::shared_ptr<Incarnation> inc_;
  CapLedger* const ledger_;
};

// Where one process's stage events go (reference 004's Redis pub/sub): each
// message is handed to `check` (the checker, against the store as it is at
// the moment of publishing); with faults on, a publish fails now and then
// and the publisher is disconnected until the engine lets it connect again.
// Not a scheduling point: nothing moves between an engine's commit and the
// event it publishes after it.
class SimPublisher final : public MessagePublisher {
 public:
  using Check = std::function<void(const std::string& who, const std::string& channel,
                                   const std::string& payload)>;
  SimPublisher(World* world, FaultState* faults, std::shared_ptr<Incarnation> inc, Check check)
      : world_(world), faults_(faults), inc_(std::move(inc)), check_(std::move(check)) {}
  absl::Status Publish(const std::string& channel, const std::string& payload) override;
  bool connected() const override { return connected_; }

 private:
  World* const world_;
  FaultState* const faults_;
  const std::shared_ptr<Incarnation> inc_;
  const Check check_;
  bool connected_ = false;
};

// An external service with a lookup endpoint and no deduplication of its
// own: every POST it receives applies once more. The ledger protocol is what
// keeps it to one effect per write.
class SimService {
 public:
  SimService(World* world, FaultState* faults) : world_(world), faults_(faults) {}
  absl::StatusOr<steps_internal::Reply> Send(const steps_internal::Exchange& e);
  // Effects applied per Idempotency-Key.
  const std::map<std::string, int>& effects() const { return effects_; }

 private:
  World* const world_;
  FaultState* const faults_;
  std::map<std::string, int> effects_;
};

}  // namespace runloom::sim
