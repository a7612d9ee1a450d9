#include "store/sqlite/db.h"

#include "core/status_macros.h"
#include "store/sqlite/wal_gather_vfs.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include <mutex>
#include <utility>

namespace runloom::store_internal {

absl::Status SqliteStatus(sqlite3* db, int rc, std::string_view context) {
  std::string msg = absl::StrCat(std::string(context), ": ", sqlite3_errstr(rc));
  if (db != nullptr) {
    const char* detail = sqlite3_errmsg(db);
    if (detail != nullptr && std::string_view(detail) != sqlite3_errstr(rc)) {
      absl::StrAppend(&msg, " (", detail, ")");
    }
  }
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(
          absl::StrCat(msg, "; another connection holds the database lock past busy_timeout"));
    case SQLITE_CONSTRAINT:
      if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY) {
        return absl::AlreadyExistsError(msg);
      }
      return absl::FailedPreconditionError(msg);
    case SQLITE_CORRUPT:
      return absl::DataLossError(msg);
    case SQLITE_NOTADB:
      return absl::FailedPreconditionError(
          absl::StrCat(msg, "; the file is not an SQLite database"));
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(msg);
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
      return absl::UnavailableError(msg);
    case SQLITE_READONLY:
    case SQLITE_PERM:
      return absl::FailedPreconditionError(msg);
    default:
      return absl::InternalError(msg);
  }
}

namespace {

void RunloomNow(sqlite3_context* ctx, int /*argc*/, sqlite3_value** /*argv*/) {
  auto* clock = static_cast<Clock*>(sqlite3_user_data(ctx));
  sqlite3_result_int64(ctx, ToMicros(clock->Now()));
}

}  // namespace

// ---- Statement ----

Statement::Statement(Statement&& other) noexcept
    : db_(other.db_), stmt_(other.stmt_), sql_(other.sql_), bind_error_(other.bind_error_) {
  other.stmt_ = nullptr;
}

Statement::~Statement() {
  if (stmt_ != nullptr) {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
}

void Statement::NoteBind(int rc) {
  if (rc != SQLITE_OK && bind_error_ == SQLITE_OK) bind_error_ = rc;
}

void Statement::BindInt(int index, int64_t value) {
  NoteBind(sqlite3_bind_int64(stmt_, index, value));
}

void Statement::BindText(int index, std::string_view value) {
  NoteBind(
      sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
}

void Statement::BindNull(int index) { NoteBind(sqlite3_bind_null(stmt_, index)); }

void Statement::BindTime(int index, absl::Time value) { BindInt(index, ToMicros(value)); }

void Statement::BindOptionalTime(int index, const std::optional<absl::Time>& value) {
  if (value.has_value()) {
    BindTime(index, *value);
  } else {
    BindNull(index);
  }
}

void Statement::BindOptionalText(int index, const std::optional<std::string>& value) {
  if (value.has_value()) {
    BindText(index, *value);
  } else {
    BindNull(index);
  }
}

absl::StatusOr<bool> Statement::Step() {
  if (bind_error_ != SQLITE_OK) {
    return SqliteStatus(db_, bind_error_, absl::StrCat("binding parameters of: ", sql_));
  }
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  // sqlite3_step's code may be generic; the extended code says more.
  return SqliteStatus(db_, sqlite3_extended_errcode(db_), absl::StrCat("executing: ", sql_));
}

absl::Status Statement::Run() {
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

bool Statement::ColumnIsNull(int col) const {
  return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
}

int64_t Statement::ColumnInt(int col) const { return sqlite3_column_int64(stmt_, col); }

std::string Statement::ColumnText(int col) const {
  const unsigned char* text = sqlite3_column_text(stmt_, col);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}

absl::Time Statement::ColumnTime(int col) const { return FromMicros(ColumnInt(col)); }

std::optional<absl::Time> Statement::ColumnOptionalTime(int col) const {
  if (ColumnIsNull(col)) return std::nullopt;
  return ColumnTime(col);
}

// ---- Db ----

namespace {

// SQLite counts every allocation it makes in process-wide statistics, under one
// process-wide mutex (SQLITE_CONFIG_MEMSTATUS, on by default): with a writer,
// readers and executors all in SQLite at once, about a third of a bench's
// futex calls were that mutex (perf, `syscalls:sys_enter_futex`). runloom
// reads none of these statistics (nor sets a heap limit, which needs them), so
// they are off. Only possible before SQLite initialises: in a process that has
// already used SQLite (an embedder), sqlite3_config refuses and its setting
// stays.
void TurnOffMemoryStatisticsOnce() {
  static std::once_flag once;
  std::call_once(once, [] { (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); });
}

}  // namespace

absl::StatusOr<std::unique_ptr<Db>> Db::Open(const std::string& path, absl::Duration busy_timeout) {
  TurnOffMemoryStatisticsOnce();
  sqlite3* raw = nullptr;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  // Every connection through the shim (wal_gather_vfs.h); only one that
  // writes ever buffers anything.
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, WalGatherVfsName());
  if (rc != SQLITE_OK) {
    absl::Status s =
        SqliteStatus(raw, rc,
                     absl::StrCat("opening database ", path,
                                  " (check that the directory exists and is writable)"));
    sqlite3_close_v2(raw);
    return s;
  }
  sqlite3_extended_result_codes(raw, 1);
  int64_t ms = absl::ToInt64Milliseconds(busy_timeout);
  if (ms < 0) ms = 0;
  if (ms > INT32_MAX) ms = INT32_MAX;
  sqlite3_busy_timeout(raw, static_cast<int>(ms));
  return std::make_unique<Db>(raw, path);
}

Db::~Db() {
  for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
  sqlite3_close_v2(db_);
}

absl::Status Db::Exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (err != nullptr) sqlite3_free(err);
  if (rc != SQLITE_OK) {
    return SqliteStatus(db_, sqlite3_extended_errcode(db_),
                        absl::StrCat("database ", path_, ": executing: ", sql));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Db::QueryText(const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    return SqliteStatus(db_, rc, absl::StrCat("database ", path_, ": preparing: ", sql));
  }
  std::string out;
  absl::StatusOr<bool> row;
  {
    Statement st(db_, stmt, sql.c_str());
    row = st.Step();
    if (row.ok() && *row) out = st.ColumnText(0);
  }  // resets `stmt` before it is finalized
  sqlite3_finalize(stmt);
  if (!row.ok()) return row.status();
  return out;
}

absl::StatusOr<int64_t> Db::QueryInt(const std::string& sql) {
  RUNLOOM_ASSIGN_OR_RETURN(std::string text, QueryText(sql));
  int64_t out = 0;
  if (!absl::SimpleAtoi(text, &out)) {
    return absl::InternalError(
        absl::StrCat("database ", path_, ": ", sql, " returned '", text, "', not an integer"));
  }
  return out;
}

absl::StatusOr<Statement> Db::Prepare(const char* sql) {
  auto it = cache_.find(sql);
  if (it != cache_.end()) return Statement(db_, it->second, sql);
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    return SqliteStatus(db_, sqlite3_extended_errcode(db_),
                        absl::StrCat("database ", path_, ": preparing: ", sql));
  }
  cache_.emplace(sql, stmt);
  return Statement(db_, stmt, sql);
}

absl::Status Db::DefineNow(Clock* clock) {
  // Not SQLITE_DETERMINISTIC: the value changes between calls.
  const int rc = sqlite3_create_function_v2(db_, "runloom_now", 0, SQLITE_UTF8, clock, &RunloomNow,
                                            nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return SqliteStatus(db_, rc, "define runloom_now()");
  return absl::OkStatus();
}

}  // namespace runloom::store_internal
