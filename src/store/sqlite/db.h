// A small RAII wrapper over the sqlite3 C API: one connection with a cache of
// prepared statements, and a scoped statement that resets itself.
//
// Thread-safety: a Db is used by one thread at a time (connections are opened
// with SQLITE_OPEN_NOMUTEX); the owner serializes access with its own mutex.
// A Statement borrows a cached sqlite3_stmt of its Db and must not outlive it.
//
// Example:
//   RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kSelectRun));
//   st.BindText(1, run_id);
//   RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
//   if (!row) return absl::NotFoundError(...);
//   std::string status = st.ColumnText(0);
#pragma once

#include "runloom/clock.h"

#include "store/record_codec.h"  // ToMicros, FromMicros

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <sqlite3.h>
#include <string>
#include <string_view>
#include <utility>

namespace runloom::store_internal {

// Maps an SQLite result code to a Status with `context` and SQLite's message:
// BUSY/LOCKED -> kUnavailable, CONSTRAINT (unique/primary key) ->
// kAlreadyExists, other CONSTRAINT -> kFailedPrecondition, CORRUPT/NOTADB ->
// kDataLoss / kFailedPrecondition, FULL -> kResourceExhausted, IOERR and
// CANTOPEN -> kUnavailable, anything else -> kInternal.
absl::Status SqliteStatus(sqlite3* db, int rc, std::string_view context);

// A cached prepared statement in use. Resets and clears its bindings when
// destroyed, so a read never keeps a snapshot open.
class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* stmt, const char* sql) : db_(db), stmt_(stmt), sql_(sql) {}
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Parameters are 1-based. A bind error is reported by the next Step()/Run().
  void BindInt(int index, int64_t value);
  void BindText(int index, std::string_view value);
  void BindNull(int index);
  void BindTime(int index, absl::Time value);
  void BindOptionalTime(int index, const std::optional<absl::Time>& value);
  void BindOptionalText(int index, const std::optional<std::string>& value);

  // Advances: true when a row is ready, false when done.
  absl::StatusOr<bool> Step();
  // Steps to completion (for statements returning no rows).
  absl::Status Run();

  // The index of the parameter named `name` ("$1"), 0 when the statement
  // has none of that name; and how many parameters it has.
  int ParameterIndex(const char* name) const { return sqlite3_bind_parameter_index(stmt_, name); }
  int ParameterCount() const { return sqlite3_bind_parameter_count(stmt_); }

  // Columns are 0-based.
  int ColumnCount() const { return sqlite3_column_count(stmt_); }
  bool ColumnIsInt(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_INTEGER; }
  bool ColumnIsNull(int col) const;
  int64_t ColumnInt(int col) const;
  std::string ColumnText(int col) const;
  absl::Time ColumnTime(int col) const;
  std::optional<absl::Time> ColumnOptionalTime(int col) const;

 private:
  void NoteBind(int rc);

  sqlite3* db_;
  sqlite3_stmt* stmt_;  // owned by the Db's cache; nullptr after a move
  const char* sql_;
  int bind_error_ = SQLITE_OK;
};

class Db {
 public:
  // Opens `path` (":memory:" for a private in-memory database) read-write,
  // creating it if needed, with `busy_timeout`. kUnavailable /
  // kFailedPrecondition when the file cannot be opened.
  static absl::StatusOr<std::unique_ptr<Db>> Open(const std::string& path,
                                                  absl::Duration busy_timeout);
  // Takes ownership of an open connection; use Open().
  Db(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Runs one or more SQL statements that return no rows of interest.
  absl::Status Exec(const std::string& sql);
  // Runs a statement returning one text cell (e.g. "PRAGMA journal_mode").
  absl::StatusOr<std::string> QueryText(const std::string& sql);
  absl::StatusOr<int64_t> QueryInt(const std::string& sql);

  // A cached prepared statement for `sql`.
  // REQUIRES: `sql` has static storage duration (it keys the cache by address).
  absl::StatusOr<Statement> Prepare(const char* sql);

  // Defines the SQL function runloom_now() on this connection: `clock`'s
  // time in Unix microseconds (the same function PostgreSQL's schema has, so
  // a statement may be written once for both). `clock` must outlive the Db.
  absl::Status DefineNow(Clock* clock);

  // Rows changed by the last INSERT/UPDATE/DELETE.
  int64_t changes() const { return sqlite3_changes64(db_); }
  // True when no transaction is open.
  bool autocommit() const { return sqlite3_get_autocommit(db_) != 0; }
  sqlite3* raw() { return db_; }
  const std::string& path() const { return path_; }

 private:
  sqlite3* db_;
  std::string path_;
  absl::flat_hash_map<const char*, sqlite3_stmt*> cache_;
};

}  // namespace runloom::store_internal
