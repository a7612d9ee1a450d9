// The long-transaction sweep of the PostgreSQL backend: terminates the
// server backends (sessions) of this database whose transaction has been open
// longer than a limit AND that block at least one other backend, so a
// forgotten `BEGIN` in a psql session, or a client that hung while holding a
// row lock, cannot stall every worker that writes the same run.
//
// What is terminated (all of it, in one statement, on the server's clock):
//   - a backend of the same database (datname = current_database()), a
//     client backend, never the sweep's own;
//   - whose transaction started (xact_start) more than `limit` ago: the age
//     of the transaction, not how long it has been idle;
//   - that appears in pg_blocking_pids() of a backend of the database waiting
//     on a lock.
// An old transaction that blocks nobody, a young one that blocks, and
// everything in other databases are left alone. Each termination is one
// pg_terminate_backend(), re-checked against the same transaction (its
// xact_start), and one warning line (DescribeTermination).
//
// Privileges: the sweeping role must see the other sessions' transactions
// (superuser, the same role, or pg_read_all_stats) and may signal them
// (superuser, the same role, or pg_signal_backend; a superuser's backend only
// by a superuser). A refused termination is logged and the sweep goes on.
//
// Thread-safety: SweepLongTransactions uses `c` from the calling thread only.
// LongTransactionSweeper's Start() and Stop() may be called from any thread;
// its connection is used by its task's thread alone.
#pragma once

#include "runloom/env.h"

#include "core/periodic_task.h"
#include "store/postgres/pg_conn.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace runloom::store_internal {

// One backend the sweep terminated.
struct TerminatedBackend {
  int64_t pid = 0;
  std::string application_name;
  std::string client;  // "host:port", or "local" (a Unix socket)
  absl::Duration transaction_age;
  std::vector<int64_t> blocked_pids;  // the backends it was blocking, ascending
};

// The log line of one termination:
//   PostgreSQL long-transaction sweep: terminated backend 4242
//   (application_name 'psql', client 127.0.0.1:51234, transaction open 75.2s,
//   blocking backends 4250,4251)
std::string DescribeTermination(const TerminatedBackend& t);

// One sweep on `c` (outside a transaction): terminates the backends described
// above, logs each at kWarning on `logger`, and returns them. A termination
// the server refuses (privileges) is logged and skipped. kUnavailable (or
// another PgStatus code) when the candidates cannot be read.
absl::StatusOr<std::vector<TerminatedBackend>> SweepLongTransactions(PgConn& c,
                                                                     absl::Duration limit,
                                                                     Logger* logger);

// The sweep run every `interval` on a connection of its own (so it still runs
// when every pooled connection waits on the lock it is there to break),
// connected on first use and again after it is lost. A failed sweep is
// logged and tried again next interval.
class LongTransactionSweeper {
 public:
  // `conninfo` and `session_sql` as PgConn::Connect takes them. REQUIRES:
  // limit > 0, interval > 0. `logger` must outlive the sweeper.
  LongTransactionSweeper(std::string conninfo, std::string session_sql, absl::Duration limit,
                         absl::Duration interval, Logger* logger);
  ~LongTransactionSweeper() { Stop(); }
  LongTransactionSweeper(const LongTransactionSweeper&) = delete;
  LongTransactionSweeper& operator=(const LongTransactionSweeper&) = delete;

  // Starts the thread; the first sweep comes one interval later.
  void Start() { task_.Start(); }
  // Stops and joins it (a sweep in progress finishes first).
  void Stop() { task_.Stop(); }

 private:
  void Tick();

  // Constant after construction.
  const std::string conninfo_;
  const std::string session_sql_;
  const absl::Duration limit_;
  Logger* const logger_;
  // Used only on the task's thread.
  std::unique_ptr<PgConn> conn_;
  PeriodicTask task_;  // last: its thread uses the members above
};

}  // namespace runloom::store_internal
