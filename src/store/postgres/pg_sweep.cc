#include "store/postgres/pg_sweep.h"

#include "runloom/clock.h"

#include "core/log.h"
#include "core/status_macros.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

#include <utility>

namespace runloom::store_internal {
namespace {

// pg_blocking_pids() takes the lock manager's locks for a moment, so it is
// asked only about backends that are waiting on a lock. xact_start travels
// as Unix microseconds so the termination can check it is the same
// transaction. $1: the limit in microseconds.
constexpr char kCandidates[] =
    "WITH waits AS ("
    " SELECT w.pid AS waiter, unnest(pg_blocking_pids(w.pid)) AS blocker"
    " FROM pg_stat_activity w"
    " WHERE w.datname = current_database() AND w.wait_event_type = 'Lock') "
    "SELECT a.pid, COALESCE(a.application_name, ''),"
    " COALESCE(host(a.client_addr) || ':' || a.client_port, 'local'),"
    " (extract(epoch FROM clock_timestamp() - a.xact_start) * 1000000)::bigint,"
    " (extract(epoch FROM a.xact_start) * 1000000)::bigint,"
    " array_to_string(array_agg(DISTINCT waits.waiter ORDER BY waits.waiter), ',') "
    "FROM pg_stat_activity a JOIN waits ON waits.blocker = a.pid "
    "WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()"
    " AND a.backend_type = 'client backend' AND a.xact_start IS NOT NULL"
    " AND a.xact_start < clock_timestamp() - $1::bigint * interval '1 microsecond' "
    "GROUP BY a.pid, a.application_name, a.client_addr, a.client_port, a.xact_start "
    "ORDER BY a.xact_start";
// No row: the transaction ended (or the backend left) since the candidates
// were read, and there is nothing to terminate. $1 pid, $2 xact_start (us).
constexpr char kTerminate[] =
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
    "WHERE pid = $1::integer AND (extract(epoch FROM xact_start) * 1000000)::bigint = $2";

std::vector<int64_t> ParsePids(absl::string_view csv) {
  std::vector<int64_t> out;
  for (absl::string_view part : absl::StrSplit(csv, ',', absl::SkipEmpty())) {
    int64_t pid = 0;
    if (absl::SimpleAtoi(part, &pid)) out.push_back(pid);
  }
  return out;
}

}  // namespace

std::string DescribeTermination(const TerminatedBackend& t) {
  return absl::StrCat("PostgreSQL long-transaction sweep: terminated backend ", t.pid,
                      " (application_name '", t.application_name, "', client ", t.client,
                      ", transaction open ",
                      absl::FormatDuration(absl::Trunc(t.transaction_age, absl::Milliseconds(100))),
                      ", blocking backends ", absl::StrJoin(t.blocked_pids, ","), ")");
}

absl::StatusOr<std::vector<TerminatedBackend>> SweepLongTransactions(PgConn& c,
                                                                     absl::Duration limit,
                                                                     Logger* logger) {
  RUNLOOM_ASSIGN_OR_RETURN(PgResult r,
                           c.Exec(kCandidates, PgParams().Int(absl::ToInt64Microseconds(limit))));
  std::vector<TerminatedBackend> done;
  for (int i = 0; i < r.rows(); ++i) {
    const PgRow row = r.row(i);
    TerminatedBackend t;
    t.pid = row.ColumnInt(0);
    t.application_name = row.ColumnText(1);
    t.client = row.ColumnText(2);
    t.transaction_age = absl::Microseconds(row.ColumnInt(3));
    t.blocked_pids = ParsePids(row.ColumnText(5));
    absl::StatusOr<PgResult> killed =
        c.Exec(kTerminate, PgParams().Int(t.pid).Int(row.ColumnInt(4)));
    if (!killed.ok()) {
      if (!c.ok()) return killed.status();
      Log(logger, LogLevel::kWarning, "PostgreSQL long-transaction sweep: could not terminate ",
          "backend ", t.pid,
          " (needs superuser, the same role, or pg_signal_backend): ", killed.status().ToString());
      continue;
    }
    if (killed->rows() == 0) continue;  // its transaction ended meanwhile
    if (killed->row(0).ColumnInt(0) == 0) {
      Log(logger, LogLevel::kWarning, "PostgreSQL long-transaction sweep: signalling backend ",
          t.pid, " failed (see the server log)");
      continue;
    }
    Log(logger, LogLevel::kWarning, DescribeTermination(t));
    done.push_back(std::move(t));
  }
  return done;
}

LongTransactionSweeper::LongTransactionSweeper(std::string conninfo, std::string session_sql,
                                               absl::Duration limit, absl::Duration interval,
                                               Logger* logger)
    : conninfo_(std::move(conninfo)),
      session_sql_(std::move(session_sql)),
      limit_(limit),
      logger_(logger),
      task_(RealClock(), interval, [this] { Tick(); }) {}

void LongTransactionSweeper::Tick() {
  if (conn_ == nullptr || !conn_->ok()) {
    conn_.reset();
    absl::StatusOr<std::unique_ptr<PgConn>> c = PgConn::Connect(conninfo_, session_sql_);
    if (!c.ok()) {
      Log(logger_, LogLevel::kWarning,
          "PostgreSQL long-transaction sweep: cannot connect, trying again next interval: ",
          c.status().ToString());
      return;
    }
    conn_ = *std::move(c);
  }
  absl::StatusOr<std::vector<TerminatedBackend>> swept =
      SweepLongTransactions(*conn_, limit_, logger_);
  if (!swept.ok()) {
    Log(logger_, LogLevel::kWarning,
        "PostgreSQL long-transaction sweep failed, trying again next interval: ",
        swept.status().ToString());
  }
}

}  // namespace runloom::store_internal
