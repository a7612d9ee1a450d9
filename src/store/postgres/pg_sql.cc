// The PostgreSQL side of the SQL seam (store/internal/sql.h): a write body
// runs in PgHandle::Txn (run again on a serialization failure or deadlock),
// a read in PgHandle::Read, each statement prepared once per connection.
#include "core/status_macros.h"
#include "store/internal/sql.h"
#include "store/postgres/pg_store.h"

#include <memory>
#include <utility>

namespace runloom::store_internal {
namespace {

class PgSession final : public SqlSession {
 public:
  explicit PgSession(PgConn& c) : c_(c) {}

  absl::StatusOr<SqlRows> Query(const Sql& sql, const SqlArgs& args) override {
    PgParams p;
    for (const SqlValue& v : args.values()) {
      if (const int64_t* n = std::get_if<int64_t>(&v)) {
        p.Int(*n);
      } else if (const std::string* s = std::get_if<std::string>(&v)) {
        p.Text(*s);
      } else {
        p.Null();
      }
    }
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c_.Exec(sql.postgres, p));
    const int columns = r.columns();
    SqlRows out(columns);
    for (int i = 0; i < r.rows(); ++i) {
      const PgRow row = r.row(i);
      for (int c = 0; c < columns; ++c) {
        if (row.ColumnIsNull(c)) {
          out.AddNull();
        } else {
          out.AddText(row.ColumnText(c));
        }
      }
    }
    return out;
  }

 private:
  PgConn& c_;
};

class PgSqlDatabase final : public SqlDatabase {
 public:
  explicit PgSqlDatabase(std::shared_ptr<PgHandle> h) : h_(std::move(h)) {}

  absl::Status Write(SqlBody body) override {
    return h_->Txn([&](PgConn& c) {
      PgSession s(c);
      return body(s);
    });
  }

  absl::Status Read(SqlBody body) override {
    return h_->Read([&](PgConn& c) {
      PgSession s(c);
      return body(s);
    });
  }

 private:
  const std::shared_ptr<PgHandle> h_;
};

}  // namespace

std::unique_ptr<SqlDatabase> NewPgSqlDatabase(std::shared_ptr<PgHandle> handle) {
  return std::make_unique<PgSqlDatabase>(std::move(handle));
}

}  // namespace runloom::store_internal
