#include "store/sqlite/backup.h"

#include "absl/strings/str_cat.h"

#include <cstdio>
#include <filesystem>
#include <sqlite3.h>
#include <system_error>

namespace runloom::store_internal {
namespace {

// Closes a connection however the copy went.
struct Conn {
  sqlite3* db = nullptr;
  ~Conn() { sqlite3_close_v2(db); }
};

absl::Status SqliteError(const char* what, sqlite3* db, const std::string& file) {
  return absl::UnavailableError(
      absl::StrCat("backup: ", what, " ", file, ": ", db != nullptr ? sqlite3_errmsg(db) : "out of memory"));
}

}  // namespace

absl::Status BackupSqlite(const std::string& path, const std::string& to) {
  if (path.empty() || path == ":memory:") {
    return absl::InvalidArgumentError("backup: an in-memory database has no file to copy");
  }
  if (to.empty()) return absl::InvalidArgumentError("backup: --to names no file");
  // No file can have a longer name (Linux's PATH_MAX): refused without
  // echoing it, so a hostile argument does not fill the terminal.
  constexpr size_t kPathMax = 4096;
  if (to.size() >= kPathMax) {
    return absl::InvalidArgumentError(absl::StrCat("backup: --to is ", to.size(),
                                                   " bytes long; a file name is at most ",
                                                   kPathMax - 1, " bytes: name a shorter one"));
  }
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat("backup: database ", path, " does not exist"));
  }
  if (std::filesystem::exists(to, ec) || std::filesystem::is_symlink(to, ec)) {
    return absl::AlreadyExistsError(
        absl::StrCat("backup: ", to, " exists; a backup never overwrites a file: name a new one"));
  }
  const std::string part = to + ".part";
  std::filesystem::remove(part, ec);  // a copy an earlier backup left half-written
  Conn src;
  Conn dst;
  // The source is only read, and never created (no SQLITE_OPEN_CREATE); it
  // is opened read-write because a read-only connection to a WAL file
  // cannot always map its -shm.
  if (sqlite3_open_v2(path.c_str(), &src.db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    return SqliteError("cannot open", src.db, path);
  }
  sqlite3_busy_timeout(src.db, 10'000);
  if (sqlite3_open_v2(part.c_str(), &dst.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                      nullptr) != SQLITE_OK) {
    return SqliteError("cannot create", dst.db, part);
  }
  absl::Status copied;
  sqlite3_backup* b = sqlite3_backup_init(dst.db, "main", src.db, "main");
  if (b == nullptr) {
    copied = SqliteError("cannot start the copy to", dst.db, part);
  } else {
    // Every page in one step: one read transaction, so the copy is one
    // consistent snapshot (a copy in several steps restarts on each write).
    int rc;
    while ((rc = sqlite3_backup_step(b, -1)) == SQLITE_BUSY || rc == SQLITE_LOCKED) {
      sqlite3_sleep(10);
    }
    sqlite3_backup_finish(b);
    if (rc != SQLITE_DONE) copied = SqliteError("copying", dst.db, path);
  }
  // The copy is a rollback-journal file: nothing beside it (no -wal).
  if (copied.ok() &&
      sqlite3_exec(dst.db, "PRAGMA journal_mode = DELETE", nullptr, nullptr, nullptr) != SQLITE_OK) {
    copied = SqliteError("finishing", dst.db, part);
  }
  sqlite3_close_v2(dst.db);
  dst.db = nullptr;
  if (copied.ok()) {
    std::filesystem::rename(part, to, ec);
    if (ec) copied = absl::UnavailableError(absl::StrCat("backup: renaming ", part, " to ", to, ": ", ec.message()));
  }
  if (!copied.ok()) std::filesystem::remove(part, ec);
  return copied;
}

}  // namespace runloom::store_internal
