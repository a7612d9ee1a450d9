// The SQLite backend composed: one SQLite file (src/store/sqlite/) as the
// Store and, through its queue table, the Transport; an in-process EventBus
// (with a change watcher for the other processes on the file). Registered
// for sqlite: URLs and plain paths.
#include "runloom/backend.h"
#include "runloom/sqlite.h"

#include "core/status_macros.h"
#include "store/sqlite/backup.h"
#include "store/sqlite/handle.h"
#include "store/sqlite/migrations.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#include <utility>

namespace runloom {
namespace {

// The SQLite path a "sqlite:..." URL (or a plain path) names.
absl::StatusOr<std::string> SqlitePath(const std::string& url) {
  if (!absl::StartsWith(url, "sqlite:")) return url;  // a plain path
  absl::string_view rest = absl::string_view(url).substr(absl::string_view("sqlite:").size());
  if (rest == ":memory:") return std::string(":memory:");
  if (!absl::StartsWith(rest, "//")) {
    return absl::InvalidArgumentError("after 'sqlite:' comes '//' and a path, or ':memory:'");
  }
  rest.remove_prefix(2);
  if (rest.empty() || rest == "/") return absl::InvalidArgumentError("no database path");
  if (rest.find_first_of("?#") != absl::string_view::npos) {
    return absl::InvalidArgumentError("query strings and fragments are not supported");
  }
  // sqlite:///abs/path keeps its leading '/'; sqlite://rel/path is relative.
  return std::string(rest);
}

absl::StatusOr<Backend> OpenSqliteFromOptions(const std::string& path,
                                              const BackendOptions& options) {
  if (!options.queue_url.empty()) {
    // Checked before the file is opened, so nothing is created.
    return absl::InvalidArgumentError(absl::StrCat(
        "a Redis queue (the queue URL) needs a PostgreSQL store, but '", path,
        "' is SQLite (whose jobs always travel on its own queue table): drop the queue URL, "
        "or use --db postgres://user@host:port/dbname"));
  }
  SqliteOptions o;
  o.clock = options.clock;
  o.synchronous = options.durability;
  o.busy_timeout = options.lock_timeout;
  o.transport = options.transport;
  o.preallocate_wal = options.long_lived;
  return OpenSqlite(path, o);
}

}  // namespace

absl::StatusOr<Backend> OpenSqlite(const std::string& path, const SqliteOptions& options) {
  if (options.transport.max_deliveries < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("SqliteOptions::transport.max_deliveries must be at least 1, got ",
                     options.transport.max_deliveries));
  }
  Backend backend;
  SqliteOptions opened = options;
  if (opened.event_bus == nullptr) opened.event_bus = NewInProcessEventBus();
  backend.events = opened.event_bus;
  RUNLOOM_ASSIGN_OR_RETURN(std::shared_ptr<store_internal::SqliteHandle> handle,
                           store_internal::SqliteHandle::Open(path, opened));
  backend.store = store_internal::NewSqliteStore(handle);
  backend.transport = store_internal::NewSqliteTransport(std::move(handle), options.transport);
  backend.backup = [path](const std::string& to) { return store_internal::BackupSqlite(path, to); };
  return backend;
}

absl::Status RegisterSqliteBackend(BackendRegistry& registry) {
  return registry.Register(BackendFactory{
      .schemes = {"sqlite"},
      .plain_paths = true,
      .forms = "sqlite:///abs/path.db, sqlite://relative/path.db, sqlite::memory:, "
               "a plain file path",
      .parse = SqlitePath,
      .open = OpenSqliteFromOptions,
  });
}

int64_t SqliteSchemaVersion() { return store_internal::LatestSchemaVersion(); }

}  // namespace runloom
