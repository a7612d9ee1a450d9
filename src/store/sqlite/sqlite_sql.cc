// The SQLite side of the SQL seam (store/internal/sql.h): a write body runs
// as one op of the group commit (WriteQueue: in its own SAVEPOINT, so a
// refused body is rolled back alone), a read on a reader connection.
#include "store/internal/sql.h"

#include "core/status_macros.h"
#include "store/sqlite/sqlite_store.h"

#include "absl/strings/str_cat.h"

#include <memory>
#include <utility>

namespace runloom::store_internal {
namespace {

class SqliteSession final : public SqlSession {
 public:
  explicit SqliteSession(Db& db) : db_(db) {}

  absl::StatusOr<SqlRows> Query(const Sql& sql, const SqlArgs& args) override {
    if (sql.sqlite == nullptr) return SqlRows();
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db_.Prepare(sql.sqlite));
    const std::vector<SqlValue>& values = args.values();
    if (st.ParameterCount() != static_cast<int>(values.size())) {
      return absl::InternalError(absl::StrCat("statement takes ", st.ParameterCount(),
                                              " parameters but was given ", values.size(), ": ",
                                              sql.sqlite));
    }
    for (size_t i = 0; i < values.size(); ++i) {
      const std::string name = absl::StrCat("$", i + 1);
      const int index = st.ParameterIndex(name.c_str());
      if (index == 0) {
        return absl::InternalError(
            absl::StrCat("statement has no parameter ", name, ": ", sql.sqlite));
      }
      const SqlValue& v = values[i];
      if (const int64_t* n = std::get_if<int64_t>(&v)) {
        st.BindInt(index, *n);
      } else if (const std::string* s = std::get_if<std::string>(&v)) {
        st.BindText(index, *s);
      } else {
        st.BindNull(index);
      }
    }
    const int columns = st.ColumnCount();
    SqlRows out(columns);
    while (true) {
      RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) return out;
      for (int c = 0; c < columns; ++c) {
        if (st.ColumnIsNull(c)) {
          out.AddNull();
        } else if (st.ColumnIsInt(c)) {
          out.AddInt(st.ColumnInt(c));
        } else {
          out.AddText(st.ColumnText(c));
        }
      }
    }
  }

 private:
  Db& db_;
};

class SqliteSqlDatabase final : public SqlDatabase {
 public:
  explicit SqliteSqlDatabase(std::shared_ptr<SqliteHandle> h) : h_(std::move(h)) {}

  absl::Status Write(SqlBody body) override {
    return h_->Write([&](WriteTxn& txn) {
      SqliteSession s(txn.db);
      return body(s);
    });
  }

  absl::Status Read(SqlBody body) override {
    return h_->Read([&](Db& db) {
      SqliteSession s(db);
      return body(s);
    });
  }

 private:
  const std::shared_ptr<SqliteHandle> h_;
};

}  // namespace

std::unique_ptr<SqlDatabase> NewSqliteSqlDatabase(std::shared_ptr<SqliteHandle> handle) {
  return std::make_unique<SqliteSqlDatabase>(std::move(handle));
}

}  // namespace runloom::store_internal
