// The SQLite backend: a Store and its queue-table Transport over one file.
//
// Everything lives in one SQLite database in WAL mode: the catalog, runs,
// step records, events, and the queue table, which is at once the store's
// outbox and the transport's queue (so its outbox relay has nothing to do).
// Several processes may open the same file; each handle has one group-commit
// writer. The time authority is SqliteOptions::clock.
//
// Thread-safety: the store and transport returned are thread-safe (see
// store.h, transport.h). Formats: docs/formats/sqlite-schema.md.
#pragma once

#include "runloom/backend.h"
#include "runloom/clock.h"
#include "runloom/event_bus.h"
#include "runloom/transport.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <cstdint>
#include <memory>
#include <string>

namespace runloom {

struct SqliteOptions {
  // PRAGMA synchronous: "normal" (default: durable against process crashes,
  // a power loss may drop the last commits) or "full" (fsync every commit).
  std::string synchronous = "normal";
  // How long a writer waits for another process's write lock.
  absl::Duration busy_timeout = absl::Seconds(10);
  // The backend's time authority (Store::Now()) and the clock it waits on.
  // nullptr = RealClock(). Not owned; must outlive the backend.
  Clock* clock = nullptr;
  // The queue-table transport's options (delivery cap).
  TransportOptions transport;
  // Where commits are published. nullptr = a new in-process bus. Either way
  // it is returned as Backend::events, and the store and transport keep it
  // alive for as long as they live.
  std::shared_ptr<EventBus> event_bus;
  // Also publish other processes' commits to the same file (a change watcher
  // thread: inotify on the WAL, confirmed by PRAGMA data_version, with a 1 s
  // fallback check). Not for ":memory:".
  bool watch_other_processes = true;
  // WAL pages between checkpoints (4,000 pages = about 16 MB): a PASSIVE
  // checkpoint copies the WAL into the file every that many pages without
  // waiting for anyone. Under continuous writes, readers' snapshots keep
  // the last pages from being copied, so the WAL never starts over: at twice
  // this many pages a RESTART checkpoint waits (up to 100 ms) for readers to
  // move on, so the next write starts the WAL from its beginning. The WAL
  // file is thus at most about twice this size (and never kept past 64 MiB).
  int wal_checkpoint_pages = 4000;
  // For a process that keeps the file open and writes continuously (a
  // worker, a server): at open, the WAL file is extended with zeros to the
  // size continuous writes grow it to (2.5 x wal_checkpoint_pages frames,
  // at most 64 MiB; about 41 MB by default), inside a write transaction,
  // and synced, so that commits overwrite the file instead of growing it.
  // Measured: the p99 from enqueue to first step at 1,900 runs/s fell by
  // about a fifth (docs/performance.md); opening takes ~70 ms longer. The
  // zeros are never valid frames. Off for short commands, which would pay
  // for writing them. Not for ":memory:".
  bool preallocate_wal = false;
};

// Opens (creating if needed) the SQLite database at `path` (":memory:" for a
// private in-memory database), applying migrations. Returns its store and
// transport (Backend::events is left unset). kFailedPrecondition, with the
// file left untouched, when `path` cannot be a runloom database: a
// directory or other non-file, not SQLite, another application's file
// (another application_id, or id 0 with tables of its own), a schema newer
// than this binary, no read and write permission, a missing parent
// directory; kInvalidArgument: an empty path or a bad option;
// kUnavailable: locked or an I/O error (worth a retry).
//
// Example:
//   SqliteOptions o;
//   o.synchronous = "full";
//   RUNLOOM_ASSIGN_OR_RETURN(Backend backend, OpenSqlite("/var/lib/runloom.db", o));
absl::StatusOr<Backend> OpenSqlite(const std::string& path, const SqliteOptions& options);

// The newest SQLite schema version this build reads and writes (PRAGMA
// user_version); a database at a newer one is refused untouched
// (docs/operations.md "Versions and compatibility").
int64_t SqliteSchemaVersion();

}  // namespace runloom
