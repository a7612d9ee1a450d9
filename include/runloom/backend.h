// Backend: the store, the transport and the event bus an Engine runs on,
// and a factory that opens one from a URL.
//
// A backend names where state lives (Store), how "run R needs an executor"
// travels (Transport) and who is told of changes (EventBus). Each backend has
// its own header with its options and factory (runloom/sqlite.h);
// OpenBackend picks one from a URL, so the CLI's `--db` and embedders share
// one syntax.
//
// Thread-safety: OpenBackend may be called from any thread; the parts it
// returns are thread-safe (see their headers).
#pragma once

#include "runloom/clock.h"
#include "runloom/event_bus.h"
#include "runloom/store.h"
#include "runloom/transport.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <memory>
#include <string>

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
  // Connections in the store's pool (PostgreSQL pool_size), the LLM cap's
  // pool limiter; 0 = no pool (SQLite's single writer batches instead).
  int pool_connections = 0;
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
};

// Opens the backend `url` names. Accepted forms:
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
