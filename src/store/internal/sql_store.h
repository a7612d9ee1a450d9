// What the SQL backends share: the Store methods whose orchestration is the
// same in SQLite and PostgreSQL (the workflow catalog, API tokens, the write
// ledger, the budget ledger, the signal reads), written once over the SQL seam
// (store/internal/sql.h). A SQL backend derives from SqlStore, hands it its
// SqlDatabase adapter, and implements the rest: run creation, leases,
// commits, the run reads and recovery, where each backend has its own
// batching.
//
// Thread-safety: every method is thread-safe (the SqlDatabase is).
#pragma once

#include "runloom/store.h"

#include "store/internal/sql.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace runloom::store_internal {

class SqlStore : public Store {
 public:
  explicit SqlStore(std::unique_ptr<SqlDatabase> sql) : sql_(std::move(sql)) {}

  // ---- catalog ----
  absl::StatusOr<WorkflowVersion> RegisterWorkflow(const std::string& name,
                                                   const std::string& digest,
                                                   const nlohmann::json& canonical) final;
  absl::StatusOr<WorkflowVersion> GetWorkflow(const std::string& name, int64_t version) final;
  absl::StatusOr<std::vector<WorkflowVersion>> ListWorkflows() final;

  // ---- tokens (the hash only; never the secret) ----
  absl::StatusOr<TokenRecord> CreateToken(const TokenRecord& token,
                                          const std::string& token_hash) final;
  absl::StatusOr<std::vector<TokenRecord>> ListTokens() final;
  absl::StatusOr<TokenRecord> RevokeToken(const std::string& id_or_name) final;
  absl::StatusOr<TokenRecord> FindActiveToken(const std::string& token_hash) final;

  // ---- the write ledger ----
  absl::StatusOr<BeginWriteResult> BeginWrite(const WriteIntent& intent) final;
  absl::StatusOr<WriteOperation> FinishWrite(const WriteKey& key, const WriteResult& result) final;
  absl::StatusOr<std::vector<WriteOperation>> ListWrites(const std::string& run_id) final;

  // ---- the budget ledger ----
  absl::StatusOr<TenantBudget> SetTenantBudget(const std::string& tenant,
                                               std::optional<int64_t> limit_micros) final;
  absl::StatusOr<std::vector<TenantBudget>> ListTenantBudgets() final;
  absl::StatusOr<std::optional<TenantBudget>> GetTenantBudget(const std::string& tenant) final;
  absl::StatusOr<RunBudget> GetRunBudget(const std::string& run_id) final;
  absl::StatusOr<std::vector<Reservation>> ListReservations(const std::string& run_id) final;
  absl::StatusOr<ReserveResult> Reserve(const BudgetRequest& request) final;
  absl::StatusOr<Reservation> SettleReservation(const BudgetKey& key, int64_t cost_micros) final;
  absl::StatusOr<int64_t> ReleaseReservations(const std::string& run_id) final;

  // ---- timers: the earliest wake time (FindDueTimers is each backend's) ----
  absl::StatusOr<std::optional<absl::Time>> NextWakeTime() final;
  absl::StatusOr<bool> HasWorkToCome() final;
  absl::StatusOr<std::vector<std::string>> ListOrphanedChildren(int limit) final;
  absl::StatusOr<ActiveRunCounts> CountActiveRuns() final;

  // ---- signals: the reads (SendSignal is each backend's, with its commit) ----
  absl::StatusOr<std::optional<SignalRecord>> NextSignal(const std::string& run_id,
                                                         const std::string& name) final;
  absl::StatusOr<std::optional<SignalRecord>> SignalConsumedBy(const std::string& run_id,
                                                               const std::string& key) final;
  absl::StatusOr<std::vector<SignalRecord>> ListSignals(const std::string& run_id,
                                                        int64_t after_seq, int limit) final;

  // ---- schedules ----
  absl::StatusOr<ScheduleRecord> PutSchedule(const ScheduleRecord& s, bool replace) final;
  absl::StatusOr<std::optional<ScheduleRecord>> GetSchedule(const std::string& id) final;
  absl::StatusOr<std::vector<ScheduleRecord>> ListSchedules(const std::string& after_id,
                                                            int limit) final;
  absl::StatusOr<bool> DeleteSchedule(const std::string& id) final;
  absl::StatusOr<bool> SetSchedulePaused(const std::string& id, bool paused,
                                         absl::Time next_fire_at) final;
  absl::StatusOr<std::vector<ScheduleRecord>> FindDueSchedules(int limit) final;
  absl::StatusOr<bool> AdvanceSchedule(const std::string& id, absl::Time tick, absl::Time next,
                                       const std::string& run_id) final;

  // ---- streaming: the text so far of each call ----
  absl::Status PutLiveText(const LiveTextRow& row) final;
  absl::Status DeleteLiveText(const std::string& run_id, const std::string& path,
                              int attempt) final;
  absl::StatusOr<std::vector<LiveTextRow>> ListLiveText(const std::string& run_id,
                                                        absl::Duration max_age) final;

  // ---- retention: deleting finished runs with their rows (sql_retention.cc) ----
  absl::StatusOr<PruneResult> PruneRuns(const PruneRequest& request) final;

 private:
  const std::unique_ptr<SqlDatabase> sql_;
};

}  // namespace runloom::store_internal
