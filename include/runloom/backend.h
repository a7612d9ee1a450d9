// Backend: the store, the transport and the event bus an Engine runs on;
// BackendRegistry, which opens one from a URL by its scheme; OpenBackend,
// the registry of every backend built in.
//
// A backend names where state lives (Store), how "run R needs an executor"
// travels (Transport) and who is told of changes (EventBus). Each backend has
// its own header with its options and factory (runloom/sqlite.h,
// runloom/postgres.h) and its own library (runloom::backend_sqlite,
// runloom::backend_postgres), which registers it (RegisterSqliteBackend,
// RegisterPostgresBackend); src/backend/ is where they are composed. An
// embedder that links only runloom::backend_sqlite links no PostgreSQL,
// Redis or libcurl; OpenBackend (runloom::backends) links them all, so the
// CLI's `--db` and embedders share one syntax.
//
// Thread-safety: a BackendRegistry is filled before use and then only read:
// Open may be called from any thread. The parts a backend returns are
// thread-safe (see their headers).
#pragma once

#include "runloom/clock.h"
#include "runloom/event_bus.h"
#include "runloom/pool_use.h"
#include "runloom/store.h"
#include "runloom/transport.h"

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <vector>

namespace runloom {

class CapBoard;  // src/llm/cap_board.h

struct Backend {
  // Where the store publishes its commits (shared: the store and transport
  // keep it alive too, so the three may be moved apart). Every backend
  // OpenBackend returns has one; the engine needs it (its waits are wake-ups,
  // not polls).
  std::shared_ptr<EventBus> events;
  std::unique_ptr<Store> store;          // required
  std::unique_ptr<Transport> transport;  // required
  // Where the LLM concurrency cap is published: nullptr = in this process
  // only; a PostgreSQL backend with a Redis queue shares a Redis key among
  // its workers, and counts their calls in flight together on Redis.
  std::shared_ptr<CapBoard> llm_caps;
  // What the store's connection pool has done (PostgreSQL), the LLM cap's
  // pool limiter measures it (runloom/pool_use.h); null = no pool (SQLite's
  // single writer batches instead). Safe to call after the store is gone
  // (then a PoolUse of size 0).
  std::function<PoolUse()> pool_use;
  // An online copy of the database to the new file `to`, consistent while
  // runs execute (SQLite: its backup API; store/sqlite/backup.h has the
  // codes). Null for a backend that has none: PostgreSQL is backed up with
  // its own tools (docs/operations.md, "Backups").
  std::function<absl::Status(const std::string& to)> backup;
};

// Options OpenBackend maps onto the backend it opens. Each backend uses what
// applies to it and ignores the rest.
struct BackendOptions {
  // The time authority of a backend that keeps time on the client (SQLite)
  // and the clock it waits on. nullptr = RealClock(). A backend with a
  // server clock ignores it. Not owned; must outlive the backend.
  Clock* clock = nullptr;
  // "normal" (default) or "full" (every commit synced to disk before it
  // returns). SQLite: PRAGMA synchronous.
  std::string durability = "normal";
  // How long a write waits for another writer's lock before kUnavailable.
  // SQLite: busy_timeout.
  absl::Duration lock_timeout = absl::Seconds(10);
  TransportOptions transport;
  // Where jobs travel when not on the store's own queue: "" = the store's
  // queue (SQLite table; PostgreSQL table), or redis://host:port[/n] (a
  // Redis Stream fed by the store's outbox; PostgreSQL only). With SQLite,
  // or a malformed URL, OpenBackend fails with kInvalidArgument; with a
  // Redis that cannot be reached, kUnavailable; nothing is written either way.
  std::string queue_url;
  // The process keeps the backend open and writes continuously (a worker, a
  // server, a benchmark). SQLite: SqliteOptions::preallocate_wal.
  bool long_lived = false;
};

// How a backend is opened from a URL of its scheme (the shape of DuckDB's
// StorageExtension: a name and an attach function).
struct BackendFactory {
  // The URL schemes it opens ("postgres", "postgresql"); never empty.
  std::vector<std::string> schemes;
  // Whether a plain path ("/var/lib/runloom.db", ":memory:") is its URL; at
  // most one factory of a registry says so.
  bool plain_paths = false;
  // The accepted forms, for messages ("postgres://user@host:port/dbname").
  std::string forms;
  // What `url` (its scheme one of `schemes`, or a plain path) names, in the
  // form `open` takes (a file path; the URL itself); for a malformed URL,
  // kInvalidArgument saying only what was wrong (the registry adds the URL
  // and the accepted forms). nullptr = the URL as it is. Thread-safe.
  std::function<absl::StatusOr<std::string>(const std::string& url)> parse;
  // Opens what `parse` returned: the backend's own errors. Thread-safe.
  std::function<absl::StatusOr<Backend>(const std::string& target, const BackendOptions& options)>
      open;
};

class BackendRegistry {
 public:
  // kAlreadyExists when a scheme (or the plain paths) has a factory already;
  // kInvalidArgument for a factory with no scheme or no open function.
  // Nothing is registered then.
  absl::Status Register(BackendFactory factory);
  // Opens the backend `url` names (see OpenBackend for the errors).
  absl::StatusOr<Backend> Open(const std::string& url, const BackendOptions& options) const;
  // The accepted forms of every factory, in registration order.
  std::string AcceptedForms() const;

 private:
  std::vector<BackendFactory> factories_;
  absl::flat_hash_map<std::string, size_t> by_scheme_;  // index into factories_
  std::optional<size_t> plain_paths_;
};

// The backend registries every backend library fills (each adds only itself).
absl::Status RegisterSqliteBackend(BackendRegistry& registry);    // runloom::backend_sqlite
absl::Status RegisterPostgresBackend(BackendRegistry& registry);  // runloom::backend_postgres

// Every backend built in (runloom::backends): SQLite and PostgreSQL.
const BackendRegistry& BuiltinBackends();

// Opens the backend `url` names, from BuiltinBackends(). Accepted forms:
//   sqlite:///abs/path.db     SQLite file at /abs/path.db
//   sqlite://rel/path.db      SQLite file at rel/path.db (relative to the cwd)
//   sqlite::memory:           a private in-memory SQLite database
//   /abs/path.db, rel.db      a plain path: SQLite (":memory:" too)
// kInvalidArgument: an empty URL, an unknown scheme, or a malformed URL (the
// message says what was wrong and lists the accepted forms); otherwise the
// backend's own errors (e.g. OpenSqlite's).
//
// Example:
//   RUNLOOM_ASSIGN_OR_RETURN(Backend b, OpenBackend("sqlite:///tmp/runloom.db", {}));
//   RUNLOOM_ASSIGN_OR_RETURN(auto engine, Engine::Open({}, std::move(b)));
absl::StatusOr<Backend> OpenBackend(const std::string& url, const BackendOptions& options);

// `url` fit to print: a password in it (scheme://user:PASSWORD@host...) is
// replaced by "***"; anything else is returned unchanged. Every message,
// banner and JSON field that names a backend uses it.
std::string RedactedUrl(const std::string& url);

}  // namespace runloom
