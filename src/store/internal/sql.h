// The SQL seam the two SQL backends adapt to, so that the orchestration
// around their statements (what to read, what to check, what to write, in
// one transaction) is written once, in store/internal/sql_store.cc, and not
// once per backend.
//
// A statement is a `Sql`: its text in each dialect. Both dialects take the
// parameters as $1, $2, ... (SQLite binds "$N" by name), and both have the
// SQL function runloom_now(), the store's clock in Unix microseconds (the
// server's clock plus the test offset in PostgreSQL, the handle's Clock in
// SQLite). A backend adapts by implementing SqlDatabase: how to run a body
// in a read or a write transaction, and how to run one statement of it.
//
// Only cold paths go through the seam (the catalog, tokens, the write and
// budget ledgers): results are copied into SqlRows. The hot paths (create,
// lease, commit, the queue) stay on each backend's own API, where each has
// its own batching (SQLite's group commit, PostgreSQL's pipelines).
//
// Thread-safety: a SqlDatabase is thread-safe; a SqlSession is used by the
// one thread running the body it was given to; SqlArgs and SqlRows are
// plain values.
#pragma once

#include "store/record_codec.h"  // ToMicros, FromMicros

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace runloom::store_internal {

// A parameter or a result cell. PostgreSQL returns every cell as text; a
// reader converts (SqlRow::ColumnInt parses).
using SqlValue = std::variant<std::monostate, int64_t, std::string>;

// The parameters of one statement, $1 first.
class SqlArgs {
 public:
  SqlArgs& Text(std::string v) {
    values_.emplace_back(std::in_place_index<2>, std::move(v));
    return *this;
  }
  SqlArgs& Int(int64_t v) {
    values_.emplace_back(std::in_place_index<1>, v);
    return *this;
  }
  SqlArgs& Time(absl::Time t) { return Int(ToMicros(t)); }
  SqlArgs& Null() {
    values_.emplace_back(std::in_place_index<0>);
    return *this;
  }
  SqlArgs& OptionalInt(const std::optional<int64_t>& v) { return v ? Int(*v) : Null(); }

  const std::vector<SqlValue>& values() const { return values_; }

 private:
  std::vector<SqlValue> values_;
};

// One row of a SqlRows (which must outlive it): the row type the record
// codecs read (store/record_codec.h).
class SqlRow {
 public:
  explicit SqlRow(const SqlValue* cells) : cells_(cells) {}
  bool ColumnIsNull(int col) const { return std::holds_alternative<std::monostate>(cells_[col]); }
  std::string ColumnText(int col) const;
  // 0 for NULL; kDataLoss is not possible here, so a text cell that is not
  // an integer reads as 0 (the schema's integer columns never hold one).
  int64_t ColumnInt(int col) const;
  absl::Time ColumnTime(int col) const { return FromMicros(ColumnInt(col)); }
  std::optional<absl::Time> ColumnOptionalTime(int col) const {
    if (ColumnIsNull(col)) return std::nullopt;
    return ColumnTime(col);
  }

 private:
  const SqlValue* cells_;
};

// The rows a statement returned (none for one without RETURNING).
class SqlRows {
 public:
  explicit SqlRows(int columns = 0) : columns_(columns) {}
  int rows() const { return columns_ == 0 ? 0 : static_cast<int>(cells_.size()) / columns_; }
  SqlRow row(int i) const { return SqlRow(cells_.data() + static_cast<size_t>(i) * columns_); }
  // For an adapter: append the cells of the row being read, in order.
  void AddNull() { cells_.emplace_back(std::in_place_index<0>); }
  void AddInt(int64_t v) { cells_.emplace_back(std::in_place_index<1>, v); }
  void AddText(std::string v) { cells_.emplace_back(std::in_place_index<2>, std::move(v)); }

 private:
  int columns_;
  std::vector<SqlValue> cells_;
};

// A statement in both dialects. Each text has static storage duration (a
// backend keys its prepared statements by the address). `sqlite` is null
// for a statement with nothing to do there (a row lock, which SQLite's one
// writer makes moot): SqlSession::Query then returns no rows.
struct Sql {
  const char* postgres;
  const char* sqlite;
};
// A statement both dialects spell the same.
constexpr Sql BothDialects(const char* text) { return Sql{text, text}; }

// One transaction (or one read) in progress.
class SqlSession {
 public:
  virtual ~SqlSession() = default;
  // Runs `sql` with `args`. Errors carry the backends' codes: kAlreadyExists
  // for a unique key, kUnavailable for a lost connection or a busy file.
  virtual absl::StatusOr<SqlRows> Query(const Sql& sql, const SqlArgs& args) = 0;
  absl::Status Exec(const Sql& sql, const SqlArgs& args) { return Query(sql, args).status(); }
};

using SqlBody = absl::FunctionRef<absl::Status(SqlSession&)>;

class SqlDatabase {
 public:
  virtual ~SqlDatabase() = default;
  // Runs `body` in one write transaction: all its statements commit or none
  // do. The body may run more than once (a retried serialization failure, a
  // group commit run again): it starts from nothing each time.
  virtual absl::Status Write(SqlBody body) = 0;
  // Runs `body` on a consistent snapshot, writing nothing. May run it more
  // than once (a lost connection).
  virtual absl::Status Read(SqlBody body) = 0;
};

}  // namespace runloom::store_internal
