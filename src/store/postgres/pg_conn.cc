#include "store/postgres/pg_conn.h"

#include "core/status_macros.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

#include <cstdlib>
#include <utility>

namespace runloom::store_internal {

PgParams& PgParams::Text(std::string v) {
  values_.emplace_back(std::move(v));
  return *this;
}
PgParams& PgParams::Int(int64_t v) {
  values_.emplace_back(absl::StrCat(v));
  return *this;
}
PgParams& PgParams::Time(absl::Time t) { return Int(absl::ToUnixMicros(t)); }
PgParams& PgParams::Null() {
  values_.emplace_back(std::nullopt);
  return *this;
}
PgParams& PgParams::OptionalText(const std::optional<std::string>& v) {
  values_.push_back(v);
  return *this;
}
PgParams& PgParams::OptionalInt(const std::optional<int64_t>& v) {
  return v.has_value() ? Int(*v) : Null();
}

PgParams& PgParams::TextArray(const std::vector<std::string>& v) {
  std::vector<std::optional<std::string>> all(v.begin(), v.end());
  return OptionalTextArray(all);
}

PgParams& PgParams::OptionalTextArray(const std::vector<std::optional<std::string>>& v) {
  // The array literal: every element quoted, its quotes and backslashes
  // escaped; an unquoted NULL is a null element.
  std::string array = "{";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) array += ',';
    if (!v[i].has_value()) {
      array += "NULL";
      continue;
    }
    array += '"';
    for (char ch : *v[i]) {
      if (ch == '"' || ch == '\\') array += '\\';
      array += ch;
    }
    array += '"';
  }
  array += '}';
  return Text(std::move(array));
}

std::vector<const char*> PgParams::Pointers() const {
  std::vector<const char*> out;
  out.reserve(values_.size());
  for (const auto& v : values_) out.push_back(v.has_value() ? v->c_str() : nullptr);
  return out;
}

bool PgRow::ColumnIsNull(int col) const { return PQgetisnull(r_, row_, col) != 0; }

std::string PgRow::ColumnText(int col) const {
  return std::string(PQgetvalue(r_, row_, col), static_cast<size_t>(PQgetlength(r_, row_, col)));
}

int64_t PgRow::ColumnInt(int col) const {
  if (ColumnIsNull(col)) return 0;
  const char* v = PQgetvalue(r_, row_, col);
  if (v[0] == 't' && v[1] == '\0') return 1;  // a boolean column
  if (v[0] == 'f' && v[1] == '\0') return 0;
  return std::strtoll(v, nullptr, 10);
}

absl::Time PgRow::ColumnTime(int col) const { return absl::FromUnixMicros(ColumnInt(col)); }

std::optional<absl::Time> PgRow::ColumnOptionalTime(int col) const {
  if (ColumnIsNull(col)) return std::nullopt;
  return ColumnTime(col);
}

absl::Status PgStatus(const PGresult* r, absl::string_view context) {
  const ExecStatusType st = r == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(r);
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK || st == PGRES_EMPTY_QUERY) {
    return absl::OkStatus();
  }
  const char* state = r == nullptr ? nullptr : PQresultErrorField(r, PG_DIAG_SQLSTATE);
  const std::string code = state == nullptr ? "" : state;
  std::string message = r == nullptr ? "no result (connection lost)" : PQresultErrorMessage(r);
  absl::StripTrailingAsciiWhitespace(&message);
  const std::string text = absl::StrCat(context, ": ", message);
  if (code == "23505") return absl::AlreadyExistsError(text);
  if (code == "40001" || code == "40P01") {
    absl::Status s = absl::AbortedError(text);
    s.SetPayload("runloom.pg.retry", absl::Cord("1"));
    return s;
  }
  if (code.empty() || absl::StartsWith(code, "08") || code == "57P01" || code == "57P02" ||
      code == "57P03" || code == "57014" || code == "55P03" || code == "53300") {
    return absl::UnavailableError(text);
  }
  if (absl::StartsWith(code, "23")) return absl::FailedPreconditionError(text);
  return absl::InternalError(absl::StrCat(text, " (SQLSTATE ", code, ")"));
}

bool IsRetryableTxnError(const absl::Status& s) {
  return s.code() == absl::StatusCode::kAborted && s.GetPayload("runloom.pg.retry").has_value();
}

absl::StatusOr<std::unique_ptr<PgConn>> PgConn::Connect(const std::string& conninfo,
                                                        const std::string& session_sql) {
  PGconn* c = PQconnectdb(conninfo.c_str());
  if (c == nullptr) return absl::ResourceExhaustedError("libpq could not allocate a connection");
  if (PQstatus(c) != CONNECTION_OK) {
    std::string why = PQerrorMessage(c);
    absl::StripTrailingAsciiWhitespace(&why);
    // libpq's message spans lines ("...failed: ...\n\tIs the server
    // running..."); one line reads better in a log or after "error:".
    absl::StrReplaceAll({{"\n\t", " "}, {"\n", "; "}}, &why);
    PQfinish(c);
    return absl::UnavailableError(
        absl::StrCat("cannot connect to PostgreSQL at ", DescribeConninfo(conninfo), ": ", why));
  }
  std::unique_ptr<PgConn> conn(new PgConn(c));
  if (!session_sql.empty()) RUNLOOM_RETURN_IF_ERROR(conn->ExecScript(session_sql));
  return conn;
}

PgConn::~PgConn() { PQfinish(conn_); }

absl::StatusOr<const std::string*> PgConn::Prepared(const char* sql) {
  auto it = prepared_.find(sql);
  if (it == prepared_.end()) {
    std::string name = absl::StrCat("rl", prepared_.size());
    PGresult* prep = PQprepare(conn_, name.c_str(), sql, 0, nullptr);
    absl::Status s = PgStatus(prep, "PostgreSQL (preparing a statement)");
    PQclear(prep);
    RUNLOOM_RETURN_IF_ERROR(s);
    it = prepared_.emplace(sql, std::move(name)).first;
  }
  return &it->second;
}

absl::StatusOr<PgResult> PgConn::Exec(const char* sql, const PgParams& params) {
  if (!deferred_.empty()) return RunPipeline(sql, &params);
  RUNLOOM_ASSIGN_OR_RETURN(const std::string* name, Prepared(sql));
  const std::vector<const char*> values = params.Pointers();
  PGresult* r =
      PQexecPrepared(conn_, name->c_str(), params.size(), values.data(), nullptr, nullptr, 0);
  absl::Status s = PgStatus(r, "PostgreSQL");
  if (!s.ok()) {
    PQclear(r);
    return s;
  }
  return PgResult(r);
}

void PgConn::Defer(const char* sql, PgParams params) {
  deferred_.emplace_back(sql, std::move(params));
}

absl::Status PgConn::Flush() {
  if (deferred_.empty()) return absl::OkStatus();
  return RunPipeline(nullptr, nullptr).status();
}

// Pipeline mode (libpq 14+): every statement is sent, then one Sync; the
// server runs them in order and skips the rest after an error, up to the
// Sync. Results come back in order, each followed by a null PGresult.
absl::StatusOr<PgResult> PgConn::RunPipeline(const char* last, const PgParams* last_params) {
  std::vector<std::pair<const char*, PgParams>> batch = std::move(deferred_);
  deferred_.clear();
  const size_t n = batch.size() + (last != nullptr ? 1 : 0);
  // Prepared before the pipeline (once per connection), so the pipeline
  // holds only executions.
  std::vector<const std::string*> names;
  names.reserve(n);
  for (const auto& [sql, params] : batch) {
    RUNLOOM_ASSIGN_OR_RETURN(const std::string* name, Prepared(sql));
    names.push_back(name);
  }
  if (last != nullptr) {
    RUNLOOM_ASSIGN_OR_RETURN(const std::string* name, Prepared(last));
    names.push_back(name);
  }
  auto lost = [this](absl::string_view what) {
    std::string why = PQerrorMessage(conn_);
    absl::StripTrailingAsciiWhitespace(&why);
    return absl::UnavailableError(absl::StrCat("PostgreSQL (", what, "): ", why));
  };
  if (PQenterPipelineMode(conn_) != 1) return lost("entering pipeline mode");
  bool sent = true;
  for (size_t i = 0; i < n && sent; ++i) {
    const PgParams& p = i < batch.size() ? batch[i].second : *last_params;
    const std::vector<const char*> values = p.Pointers();
    sent = PQsendQueryPrepared(conn_, names[i]->c_str(), p.size(), values.data(), nullptr, nullptr,
                               0) == 1;
  }
  if (!sent || PQpipelineSync(conn_) != 1) {
    absl::Status s = lost("sending a pipeline");
    PQexitPipelineMode(conn_);
    return s;
  }
  absl::Status first_error;
  PGresult* kept = nullptr;  // `last`'s result
  size_t index = 0;          // the statement whose results come next
  while (true) {
    PGresult* r = PQgetResult(conn_);
    if (r == nullptr) {
      if (PQstatus(conn_) != CONNECTION_OK) {
        if (first_error.ok()) first_error = lost("reading a pipeline's results");
        break;
      }
      ++index;  // the end of one statement's results
      continue;
    }
    const ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_PIPELINE_SYNC) {
      PQclear(r);
      break;
    }
    if (st != PGRES_PIPELINE_ABORTED) {
      absl::Status s = PgStatus(r, "PostgreSQL");
      if (!s.ok() && first_error.ok()) first_error = s;
      if (s.ok() && last != nullptr && index + 1 == n && kept == nullptr) {
        kept = r;
        r = nullptr;
      }
    }
    if (r != nullptr) PQclear(r);
  }
  PQexitPipelineMode(conn_);
  if (!first_error.ok()) {
    if (kept != nullptr) PQclear(kept);
    return first_error;
  }
  if (kept == nullptr) kept = PQmakeEmptyPGresult(conn_, PGRES_COMMAND_OK);
  return PgResult(kept);
}

absl::Status PgConn::ExecScript(const std::string& sql) {
  RUNLOOM_RETURN_IF_ERROR(Flush());
  PGresult* r = PQexec(conn_, sql.c_str());
  absl::Status s = PgStatus(r, "PostgreSQL");
  PQclear(r);
  return s;
}

std::string DescribeConninfo(const std::string& conninfo) {
  PQconninfoOption* opts = PQconninfoParse(conninfo.c_str(), nullptr);
  if (opts == nullptr) return "(unparsable address)";
  std::string host = "localhost", port = "5432", db;
  for (PQconninfoOption* o = opts; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    const absl::string_view k = o->keyword;
    if (k == "host" || k == "hostaddr") host = o->val;
    if (k == "port") port = o->val;
    if (k == "dbname") db = o->val;
  }
  PQconninfoFree(opts);
  return absl::StrCat(host, ":", port, db.empty() ? "" : "/", db);
}

}  // namespace runloom::store_internal
