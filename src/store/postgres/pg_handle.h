// The shared state of one PostgreSQL backend: a connection pool, the
// transaction runner, the server clock, and the LISTEN connection that turns
// NOTIFY into EventBus publications and queue wake-ups.
//
// Transactions: Txn runs `body` between BEGIN and COMMIT on a pooled
// connection. A serialization failure or deadlock, or a connection lost
// before COMMIT was sent, rolls back and runs `body` again (up to 5 times;
// the body must be safe to re-run, e.g. it re-reads what it checks). A
// connection lost during COMMIT fails with kUnavailable "outcome unknown".
//
// Reconnect: a lost connection is dropped; the next Acquire opens a new one,
// retrying with backoff (50 ms doubling to 1 s) until acquire_timeout.
//
// Long-transaction sweep (pg_sweep.h): when options.long_transaction_limit
// is positive, a LongTransactionSweeper on its own connection, started by
// Open and stopped first by the destructor.
//
// Thread-safety: every method is thread-safe.
#pragma once

#include "runloom/clock.h"
#include "runloom/event_bus.h"
#include "runloom/mutex.h"
#include "runloom/pool_use.h"
#include "runloom/postgres.h"

#include "store/internal/removed_messages.h"
#include "store/postgres/pg_conn.h"
#include "store/postgres/pg_sweep.h"

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace runloom::store_internal {

// NOTIFY channels (the triggers of the schema send them).
// kRunsChannel's payload: one or more "id|status|last_event_seq" lines.
inline constexpr char kRunsChannel[] = "runloom_runs";
inline constexpr char kQueueChannel[] = "runloom_queue";  // payload: empty

class PgHandle {
 public:
  // Connects (one pooled connection, so a bad URL or server fails here),
  // migrates, and starts the listener.
  static absl::StatusOr<std::shared_ptr<PgHandle>> Open(const std::string& url,
                                                        const PostgresOptions& options);
  ~PgHandle();
  PgHandle(const PgHandle&) = delete;
  PgHandle& operator=(const PgHandle&) = delete;

  absl::Status Txn(absl::FunctionRef<absl::Status(PgConn&)> body);
  // Runs `body` on a pooled connection outside a transaction (each statement
  // commits on its own); run again once if the connection was lost.
  absl::Status Read(absl::FunctionRef<absl::Status(PgConn&)> body);

  // The server's clock (runloom_now(): now() plus the test offset).
  absl::StatusOr<absl::Time> ServerNow();
  // What the pool has done since Open (the LLM cap's pool limiter).
  PoolUse Use() ABSL_LOCKS_EXCLUDED(mu_);
  Clock* clock() { return RealClock(); }

  std::string NewLeaseToken() ABSL_LOCKS_EXCLUDED(gen_mu_);
  EventBus* bus() { return bus_.get(); }
  const TransportOptions& transport_options() const { return options_.transport; }

  // Queue wake-ups: a counter bumped by every NOTIFY on kQueueChannel, by a
  // reconnect of the listener, and by Interrupt.
  uint64_t queue_signals() ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until queue_signals() != seen or `local_deadline` (RealClock).
  void AwaitQueueSignal(uint64_t seen, absl::Time local_deadline) ABSL_LOCKS_EXCLUDED(mu_);
  void Interrupt() ABSL_LOCKS_EXCLUDED(mu_);

  // ---- messages a lease deleted ----
  // A lease of the commit group deletes its run's queue message in its own
  // transaction, so the consumer's Ack that follows has nothing to do
  // (store/internal/removed_messages.h).
  void NoteRemovedByLease(int64_t message_id) { removed_.Note(message_id); }
  bool TakeRemovedByLease(int64_t message_id) { return removed_.Take(message_id); }

 private:
  PgHandle(std::string url, const PostgresOptions& options);
  absl::StatusOr<std::unique_ptr<PgConn>> Acquire() ABSL_LOCKS_EXCLUDED(mu_);
  void Return(std::unique_ptr<PgConn> conn) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::unique_ptr<PgConn>> ConnectWithBackoff(absl::Time give_up);
  void ListenLoop();
  void Signal() ABSL_LOCKS_EXCLUDED(mu_);

  const std::string url_;
  const PostgresOptions options_;
  std::string session_sql_;
  std::shared_ptr<EventBus> bus_;
  Logger* logger_;  // options_.logger or DefaultLogger()

  runloom::Mutex mu_;
  std::vector<std::unique_ptr<PgConn>> idle_ ABSL_GUARDED_BY(mu_);
  int open_ ABSL_GUARDED_BY(mu_) = 0;  // connections handed out or idle
  PoolUse use_ ABSL_GUARDED_BY(mu_);
  uint64_t signals_ ABSL_GUARDED_BY(mu_) = 0;

  RemovedMessages removed_{16384};  // a few seconds of leases

  runloom::Mutex gen_mu_;
  absl::BitGen gen_ ABSL_GUARDED_BY(gen_mu_);

  runloom::Notification listening_;  // the listener's first attempt is over
  std::atomic<bool> stop_{false};
  int wake_fd_ = -1;  // eventfd: wakes the listener's poll() on shutdown
  std::thread listener_;
  std::unique_ptr<LongTransactionSweeper> sweeper_;  // null when the sweep is off
};

// The server clock (runloom_now()) on the connection of a transaction.
absl::StatusOr<absl::Time> PgServerNow(PgConn& c);

}  // namespace runloom::store_internal
