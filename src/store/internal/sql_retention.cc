// SqlStore::PruneRuns (store.h, RetentionStore): a batch of terminal runs
// deleted with every row of theirs, in one write transaction.
//
// The batch is chosen first, by one statement, and then deleted table by
// table by its ids (a JSON array, one parameter in both dialects). On
// PostgreSQL the choice locks the chosen run rows (FOR UPDATE ... SKIP
// LOCKED): a rerun or a decision that reaches a chosen run waits for the
// batch and then finds no row; a run another process is pruning is skipped,
// not waited for. On SQLite the one writer makes the choice stable. The
// delete of `runs` checks the terminal status again, so a run that moved
// on is never deleted, whatever the other tables did.
//
// Tables: every table with a run_id column (docs/formats/sqlite-schema.md),
// children first: write_operations and the budget tables keep their foreign
// keys to runs. Kept: workflows, tokens, schedules (a schedule's
// last_run_id may then name a run that is gone), budget_tenants.
#include "core/status_macros.h"
#include "store/internal/sql_store.h"

#include "nlohmann/json.hpp"

#include <array>
#include <limits>
#include <string>

namespace runloom::store_internal {
namespace {

// The statements below read as SQL, a clause a line: clang-format is off.
// clang-format off
#define RUNLOOM_TERMINAL \
  "('completed', 'rejected', 'unresolved', 'budget_stopped', 'failed', 'cancelled')"
#define RUNLOOM_NOT_FINISHED "('queued', 'running', 'paused', 'waiting')"
// The runs a batch may take. $1 finished before (Unix us), $2 the audit
// horizon (Unix us), $3 the workflow ("" = any), $4 the workflows excepted
// (a JSON array), $5 the bound. EXCEPTED is the dialect's JSON array read.
// A child whose parent is not finished stays (the parent reads its end); a
// parent with an unfinished child stays (the orphan sweep joins the child
// to its parent); an open reservation keeps its run (its tenant's reserved
// figure is released through it); a write row younger than the audit
// horizon keeps its run whole.
#define RUNLOOM_PRUNABLE(EXCEPTED)                                                        \
  "SELECT r.id FROM runs r WHERE r.finished_at < $1 AND r.status IN " RUNLOOM_TERMINAL   \
  " AND (CAST($3 AS TEXT) = '' OR r.workflow_name = $3)"                                 \
  " AND r.workflow_name NOT IN (" EXCEPTED ")"                                           \
  " AND NOT EXISTS (SELECT 1 FROM runs p WHERE r.parent_run_id <> '' AND"               \
  " p.id = r.parent_run_id AND p.status IN " RUNLOOM_NOT_FINISHED ")"                    \
  " AND NOT EXISTS (SELECT 1 FROM runs c WHERE c.parent_run_id = r.id AND"              \
  " c.status IN " RUNLOOM_NOT_FINISHED ")"                                               \
  " AND NOT EXISTS (SELECT 1 FROM budget_reservations b WHERE b.run_id = r.id AND"      \
  " b.state = 'reserved')"                                                               \
  " AND NOT EXISTS (SELECT 1 FROM write_operations w WHERE w.run_id = r.id AND"         \
  " w.created_at >= $2)"                                                                 \
  " ORDER BY r.finished_at, r.id LIMIT $5"
#define RUNLOOM_PG_EXCEPTED "SELECT json_array_elements_text(CAST($4 AS json))"
#define RUNLOOM_SQLITE_EXCEPTED "SELECT value FROM json_each($4)"

constexpr Sql kChooseBatch{RUNLOOM_PRUNABLE(RUNLOOM_PG_EXCEPTED) " FOR UPDATE OF r SKIP LOCKED",
                           RUNLOOM_PRUNABLE(RUNLOOM_SQLITE_EXCEPTED)};

// A dry run: the batch and its rows counted in one statement (one snapshot).
#define RUNLOOM_ROWS_OF(TABLE) \
  " + (SELECT count(*) FROM " TABLE " WHERE run_id IN (SELECT id FROM c))"
#define RUNLOOM_COUNT(EXCEPTED)                                                              \
  "WITH c AS (" RUNLOOM_PRUNABLE(EXCEPTED) ") SELECT (SELECT count(*) FROM c), 0"          \
  RUNLOOM_ROWS_OF("step_records") RUNLOOM_ROWS_OF("run_events") RUNLOOM_ROWS_OF("queue")   \
  RUNLOOM_ROWS_OF("dead_letters") RUNLOOM_ROWS_OF("signals") RUNLOOM_ROWS_OF("live_text")  \
  RUNLOOM_ROWS_OF("budget_reservations") RUNLOOM_ROWS_OF("budget_runs")                    \
  RUNLOOM_ROWS_OF("write_operations")
constexpr Sql kCountBatch{RUNLOOM_COUNT(RUNLOOM_PG_EXCEPTED),
                          RUNLOOM_COUNT(RUNLOOM_SQLITE_EXCEPTED)};

// The delete of one table's rows of the batch ($1, a JSON array of run
// ids); a row per deleted row comes back (at most a batch's rows: small
// integers), which is how both dialects say how many went.
#define RUNLOOM_DELETE(TABLE, KEY, EXTRA)                                                     \
  Sql {                                                                                       \
    "DELETE FROM " TABLE " WHERE " KEY " IN (SELECT json_array_elements_text(CAST($1 AS json)))" \
    EXTRA " RETURNING 1",                                                                     \
        "DELETE FROM " TABLE " WHERE " KEY " IN (SELECT value FROM json_each($1))" EXTRA      \
        " RETURNING 1"                                                                        \
  }

constexpr std::array kDeletes = {
    RUNLOOM_DELETE("step_records", "run_id", ""),
    RUNLOOM_DELETE("run_events", "run_id", ""),
    RUNLOOM_DELETE("queue", "run_id", ""),
    RUNLOOM_DELETE("dead_letters", "run_id", ""),
    RUNLOOM_DELETE("signals", "run_id", ""),
    RUNLOOM_DELETE("live_text", "run_id", ""),
    RUNLOOM_DELETE("budget_reservations", "run_id", ""),
    RUNLOOM_DELETE("budget_runs", "run_id", ""),
    RUNLOOM_DELETE("write_operations", "run_id", ""),
};
// Last, and only a run still terminal.
constexpr Sql kDeleteRuns = RUNLOOM_DELETE("runs", "id", " AND status IN " RUNLOOM_TERMINAL);

#undef RUNLOOM_DELETE
#undef RUNLOOM_COUNT
#undef RUNLOOM_ROWS_OF
#undef RUNLOOM_SQLITE_EXCEPTED
#undef RUNLOOM_PG_EXCEPTED
#undef RUNLOOM_PRUNABLE
#undef RUNLOOM_NOT_FINISHED
#undef RUNLOOM_TERMINAL
// clang-format on

}  // namespace

absl::StatusOr<PruneResult> SqlStore::PruneRuns(const PruneRequest& request) {
  nlohmann::json excepted = nlohmann::json::array();
  for (const std::string& name : request.except_workflows) {
    if (name.empty()) {
      return absl::InvalidArgumentError(
          "prune: an empty workflow name in except_workflows; list names, or none");
    }
    excepted.push_back(name);
  }
  const int64_t limit = request.limit > 0 ? request.limit : std::numeric_limits<int64_t>::max();
  SqlArgs choose;
  choose.Time(request.finished_before)
      .Time(request.audit_before)
      .Text(request.workflow_name)
      .Text(excepted.dump())
      .Int(limit);
  PruneResult out;
  if (request.dry_run) {
    RUNLOOM_RETURN_IF_ERROR(sql_->Read([&](SqlSession& s) -> absl::Status {
      RUNLOOM_ASSIGN_OR_RETURN(SqlRows r, s.Query(kCountBatch, choose));
      out = PruneResult{};
      if (r.rows() > 0) {
        out.runs = r.row(0).ColumnInt(0);
        out.rows = out.runs + r.row(0).ColumnInt(1);
      }
      return absl::OkStatus();
    }));
    return out;
  }
  RUNLOOM_RETURN_IF_ERROR(sql_->Write([&](SqlSession& s) -> absl::Status {
    out = PruneResult{};  // the body may run again (a retried transaction)
    RUNLOOM_ASSIGN_OR_RETURN(SqlRows chosen, s.Query(kChooseBatch, choose));
    if (chosen.rows() == 0) return absl::OkStatus();
    nlohmann::json ids = nlohmann::json::array();
    for (int i = 0; i < chosen.rows(); ++i) ids.push_back(chosen.row(i).ColumnText(0));
    const SqlArgs by_id = SqlArgs().Text(ids.dump());
    for (const Sql& del : kDeletes) {
      RUNLOOM_ASSIGN_OR_RETURN(SqlRows r, s.Query(del, by_id));
      out.rows += r.rows();
    }
    RUNLOOM_ASSIGN_OR_RETURN(SqlRows runs, s.Query(kDeleteRuns, by_id));
    out.runs = runs.rows();
    out.rows += runs.rows();
    return absl::OkStatus();
  }));
  return out;
}

}  // namespace runloom::store_internal
