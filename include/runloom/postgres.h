// The PostgreSQL backend: a Store, and a queue-table Transport (or a Redis
// Streams one, PostgresOptions::queue_url), in one PostgreSQL database, for
// runs shared by workers on many machines.
//
// Everything lives in the schema `runloom` of the database the URL names
// (created and migrated on open; nothing else in the database is touched):
// the catalog, runs, step records, events, and the queue table, which is at
// once the store's outbox and the transport's queue. Workers claim messages
// with FOR UPDATE SKIP LOCKED and wait on LISTEN/NOTIFY; every status write
// is one compare-and-set on the run's row under its lock; the time authority
// is the server's clock (now()). Commits are announced with NOTIFY (a
// trigger on the runs table), so an EventBus subscriber in any process, on
// any machine, wakes on every committed change.
//
// Thread-safety: the store and transport returned are thread-safe (see
// store.h, transport.h); they share a pool of connections.
#pragma once

#include "runloom/backend.h"
#include "runloom/env.h"
#include "runloom/event_bus.h"
#include "runloom/transport.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <cstdint>
#include <memory>
#include <string>

namespace runloom {

struct PostgresOptions {
  // Connections in the pool the store and transport share (one more is
  // opened for LISTEN). At least 1.
  int pool_size = 8;
  // How long an operation waits for a free connection, or for the server to
  // come back (reconnecting with backoff: 50 ms doubling to 1 s), before it
  // fails with kUnavailable.
  absl::Duration acquire_timeout = absl::Seconds(10);
  // Connect timeout of one attempt (libpq connect_timeout; whole seconds,
  // at least 1).
  absl::Duration connect_timeout = absl::Seconds(5);
  // statement_timeout of every statement: a statement running longer is
  // cancelled by the server and the operation fails with kUnavailable.
  absl::Duration statement_timeout = absl::Seconds(30);
  // lock_timeout: how long a write waits for another transaction's row lock.
  absl::Duration lock_timeout = absl::Seconds(10);
  // The long-transaction sweep: every long_transaction_sweep_interval the
  // backend terminates (pg_terminate_backend) each session of this database
  // whose transaction has been open longer than long_transaction_limit AND
  // that blocks at least one other session (pg_blocking_pids), and logs a
  // warning for each. An old transaction that blocks nobody is never
  // touched. Zero = off. Lower: a forgotten transaction stalls writers for
  // less time, but a legitimately long one that holds a lock others want is
  // cut sooner. Needs a role that may see and signal those sessions
  // (superuser, the same role, or pg_read_all_stats + pg_signal_backend);
  // see docs/operations.md.
  absl::Duration long_transaction_limit = absl::Seconds(60);
  // How often the sweep looks (on a connection of its own). Must be positive
  // when the sweep is on.
  absl::Duration long_transaction_sweep_interval = absl::Seconds(5);
  // Where the backend's warnings go (the sweep's terminations, a server clock
  // that cannot be read). nullptr = DefaultLogger(). Not owned; must outlive
  // the backend.
  Logger* logger = nullptr;
  // The transport's options (delivery cap).
  TransportOptions transport;
  // Where jobs travel: "" = the database's own queue table (claimed with
  // FOR UPDATE SKIP LOCKED, woken by LISTEN/NOTIFY); or
  // "redis://host:port[/n]" = a Redis Stream read by a consumer group, fed
  // from the queue table as an outbox by a relay thread of the transport
  // (docs/formats/redis-streams.md). With Redis, the database keeps the
  // outbox, the dead letters and the time authority; Redis only messages.
  std::string queue_url;
  // Where commits are published. nullptr = a new in-process bus, fed by
  // NOTIFY from every process on the database. Returned as Backend::events.
  std::shared_ptr<EventBus> event_bus;
};

// Opens the database `url` names (a libpq URI:
// postgres://user[:password]@host:port/dbname[?param=value...]), applying
// migrations, starts the long-transaction sweep (when on), and opens the
// transport options.queue_url names. kInvalidArgument: a malformed URL
// (database or queue) or bad option; kUnavailable: a server cannot be
// reached (the message has libpq's reason, never the password, or names the
// Redis server; an unreachable Redis is found before the database is
// touched); kFailedPrecondition: the database's runloom schema is newer
// than this binary (nothing written).
//
// Example:
//   RUNLOOM_ASSIGN_OR_RETURN(Backend b, OpenPostgres("postgres://runloom@db:5432/runloom", {}));
absl::StatusOr<Backend> OpenPostgres(const std::string& url, const PostgresOptions& options);

// The newest PostgreSQL schema version this build reads and writes; a
// database at a newer one is refused untouched (docs/operations.md
// "Versions and compatibility").
int64_t PostgresSchemaVersion();

}  // namespace runloom
