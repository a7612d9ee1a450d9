// One PostgreSQL connection (libpq) and its results, as the store uses them.
//
// Statements are named constants (`const char*` with static storage); each
// is prepared once per connection, on first use, and executed with text
// parameters (never spliced into SQL text). Results are read in text
// format through PgRow, which offers the column readers store/record_codec.h
// expects. Server errors map to Status codes by SQLSTATE (PgStatus).
//
// Thread-safety: a PgConn is used by one thread at a time (the pool hands it
// out); PgResult and PgRow are plain values.
#pragma once

#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

#include <cstdint>
#include <libpq-fe.h>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace runloom::store_internal {

// Text parameters of one statement ($1, $2, ...). NULL is a null pointer.
class PgParams {
 public:
  PgParams& Text(std::string v);
  PgParams& Int(int64_t v);
  PgParams& Time(absl::Time t);  // Unix microseconds
  PgParams& Null();
  PgParams& OptionalText(const std::optional<std::string>& v);
  PgParams& OptionalInt(const std::optional<int64_t>& v);
  // A text[] parameter (bind as $n::text[]).
  PgParams& TextArray(const std::vector<std::string>& v);
  // The same with NULL elements (std::nullopt).
  PgParams& OptionalTextArray(const std::vector<std::optional<std::string>>& v);

  int size() const { return static_cast<int>(values_.size()); }
  // Pointers into this object: valid until it changes or dies.
  std::vector<const char*> Pointers() const;

 private:
  std::vector<std::optional<std::string>> values_;
};

class PgResult;

// A row of a PgResult (which must outlive it).
class PgRow {
 public:
  PgRow(const PGresult* r, int row) : r_(r), row_(row) {}
  bool ColumnIsNull(int col) const;
  std::string ColumnText(int col) const;
  int64_t ColumnInt(int col) const;
  absl::Time ColumnTime(int col) const;
  std::optional<absl::Time> ColumnOptionalTime(int col) const;

 private:
  const PGresult* r_;
  int row_;
};

class PgResult {
 public:
  explicit PgResult(PGresult* r) : r_(r, &PQclear) {}
  int rows() const { return PQntuples(r_.get()); }
  int columns() const { return PQnfields(r_.get()); }
  PgRow row(int i) const { return PgRow(r_.get(), i); }

 private:
  std::unique_ptr<PGresult, decltype(&PQclear)> r_;
};

// `r`'s error (or OK) as a Status: SQLSTATE 23505 -> kAlreadyExists; 40001,
// 40P01 (serialization failure, deadlock) -> kAborted with IsRetryable();
// class 08, 57P01-57P03 (connection, shutdown) and 57014, 55P03 (statement
// or lock timeout) -> kUnavailable; 23xxx other -> kFailedPrecondition;
// anything else -> kInternal. `context` says what was being done.
absl::Status PgStatus(const PGresult* r, absl::string_view context);
// True for the kAborted of a serialization failure or deadlock: the whole
// transaction may be run again.
bool IsRetryableTxnError(const absl::Status& s);

class PgConn {
 public:
  // Connects with `conninfo` (a URI or key=value string; libpq parses it).
  // `session_sql` runs once after connecting (SET search_path, timeouts).
  // kUnavailable with libpq's message on failure.
  static absl::StatusOr<std::unique_ptr<PgConn>> Connect(const std::string& conninfo,
                                                         const std::string& session_sql);
  ~PgConn();
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;

  // Runs the prepared statement `sql` (static storage: its address names it)
  // with `params`. Statements deferred before it run first, in the same
  // round trip; the first error among them all is returned.
  absl::StatusOr<PgResult> Exec(const char* sql, const PgParams& params);
  absl::StatusOr<PgResult> Exec(const char* sql) { return Exec(sql, PgParams()); }
  // Runs `sql` (one or more statements, no parameters) unprepared, after
  // the deferred statements (Flush).
  absl::Status ExecScript(const std::string& sql);

  // Queues the prepared statement `sql` to run just before the next Exec
  // (or Flush, or ExecScript) on this connection, in one round trip with it
  // (libpq pipeline mode). For writes whose result nobody reads: a
  // transaction's BEGIN, inserts and updates, then COMMIT, cost two round
  // trips instead of one each. Its error, if any, is returned by that next
  // call, and the statements after it are skipped (the transaction is
  // aborted, as it would be one statement at a time).
  void Defer(const char* sql, PgParams params);
  // Runs the deferred statements now (OK when there are none).
  absl::Status Flush();
  // Drops the deferred statements unrun (a transaction given up).
  void DropDeferred() { deferred_.clear(); }

  // False once the connection is lost; the pool then drops it.
  bool ok() const { return PQstatus(conn_) == CONNECTION_OK; }
  PGconn* raw() { return conn_; }

 private:
  explicit PgConn(PGconn* c) : conn_(c) {}
  // The statement name of `sql`, preparing it on first use. The pointer
  // stays valid for the connection's life (RunPipeline keeps several).
  absl::StatusOr<const std::string*> Prepared(const char* sql);
  // Runs the deferred statements, then `last` (when not null) in one
  // pipeline; returns `last`'s result (or an empty result without it).
  absl::StatusOr<PgResult> RunPipeline(const char* last, const PgParams* last_params);

  PGconn* conn_;
  // sql -> statement name. A node map: a name's address survives the
  // rehash of a later insert (a flat map moved it, and a pipeline that
  // prepared a new statement read the freed name: ASan, `runloom run`).
  absl::node_hash_map<const char*, std::string> prepared_;
  std::vector<std::pair<const char*, PgParams>> deferred_;
};

// The host:port/dbname of a libpq URI, for messages (never the password).
std::string DescribeConninfo(const std::string& conninfo);

}  // namespace runloom::store_internal
