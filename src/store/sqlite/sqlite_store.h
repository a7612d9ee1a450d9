// The SQLite implementation of Store (include/runloom/store.h). Reads run on
// the handle's reader connection; writes are ops on its group-commit queue.
// sqlite_store.cc has the catalog, creation and reads; sqlite_commit.cc the
// lease and fenced writes.
//
// Thread-safety: every method is thread-safe (see SqliteHandle).
#pragma once

#include "runloom/store.h"

#include "store/sqlite/handle.h"
#include "store/write_checks.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace runloom::store_internal {

class SqliteStore final : public Store {
 public:
  explicit SqliteStore(std::shared_ptr<SqliteHandle> handle) : h_(std::move(handle)) {}

  absl::StatusOr<WorkflowVersion> RegisterWorkflow(const std::string& name,
                                                   const std::string& digest,
                                                   const nlohmann::json& canonical) override;
  absl::StatusOr<WorkflowVersion> GetWorkflow(const std::string& name, int64_t version) override;
  absl::StatusOr<std::vector<WorkflowVersion>> ListWorkflows() override;

  absl::StatusOr<CreateRunResult> CreateRun(const NewRun& run, std::vector<Event> events) override;
  absl::StatusOr<RunRecord> GetRun(const std::string& run_id) override;
  absl::StatusOr<std::vector<RunRecord>> ListRuns(const RunFilter& filter) override;

  using Store::AcquireLease;
  // One transaction: the lease, then `first` (when given).
  absl::StatusOr<Lease> AcquireLease(const std::string& run_id, const std::string& owner,
                                     absl::Duration ttl, std::vector<Event> events,
                                     const RunWrite* first) override;
  absl::StatusOr<RunRecord> RenewLease(const std::string& run_id, const std::string& token,
                                       absl::Duration ttl) override;
  absl::Status Commit(const RunWrite& write) override;

  absl::StatusOr<std::vector<StepRecord>> ListSteps(const std::string& run_id,
                                                    std::optional<int64_t> revision) override;
  absl::StatusOr<std::vector<Event>> ListEvents(const std::string& run_id, int64_t after_seq,
                                                int limit) override;

  absl::StatusOr<std::vector<RecoveryCandidate>> FindRecoverable(absl::Duration queued_grace,
                                                                 int limit) override;
  absl::StatusOr<std::vector<std::string>> FindCancelRequested(
      const std::vector<std::string>& run_ids) override;
  absl::Status Enqueue(const std::string& run_id, std::vector<Event> events) override;

  // sqlite_tokens.cc
  absl::StatusOr<TokenRecord> CreateToken(const TokenRecord& token,
                                          const std::string& token_hash) override;
  absl::StatusOr<std::vector<TokenRecord>> ListTokens() override;
  absl::StatusOr<TokenRecord> RevokeToken(const std::string& id_or_name) override;
  absl::StatusOr<TokenRecord> FindActiveToken(const std::string& token_hash) override;

  // sqlite_writes.cc
  absl::StatusOr<BeginWriteResult> BeginWrite(const WriteIntent& intent) override;
  absl::StatusOr<WriteOperation> FinishWrite(const WriteKey& key,
                                             const WriteResult& result) override;
  absl::StatusOr<std::vector<WriteOperation>> ListWrites(const std::string& run_id) override;
  absl::StatusOr<TenantBudget> SetTenantBudget(const std::string& tenant,
                                               std::optional<int64_t> limit_micros) override;
  absl::StatusOr<std::vector<TenantBudget>> ListTenantBudgets() override;
  absl::StatusOr<std::optional<TenantBudget>> GetTenantBudget(const std::string& tenant) override;
  absl::StatusOr<RunBudget> GetRunBudget(const std::string& run_id) override;
  absl::StatusOr<std::vector<Reservation>> ListReservations(const std::string& run_id) override;
  absl::StatusOr<ReserveResult> Reserve(const BudgetRequest& request) override;
  absl::StatusOr<Reservation> SettleReservation(const BudgetKey& key, int64_t cost_micros) override;
  absl::StatusOr<int64_t> ReleaseReservations(const std::string& run_id) override;

  absl::StatusOr<absl::Time> Now() override { return h_->Now(); }
  Clock* clock() override { return h_->clock(); }

 private:
  const std::shared_ptr<SqliteHandle> h_;
};

// Appends `events` to run `run_id` after `last_seq`, all at `now`. Returns
// the new last seq.
absl::StatusOr<int64_t> AppendEvents(Db& db, const std::string& run_id, int64_t last_seq,
                                     const std::vector<EncodedEvent>& events, absl::Time now);

// Reads the run row, kNotFound when absent.
absl::StatusOr<RunRecord> LoadRun(Db& db, const std::string& run_id);

// The fence of a write the lease holder makes outside Commit (a write
// intent, a budget reservation), inside the writer's transaction: the run
// `run_id` is running under `token` with a lease unexpired at `now`
// (CheckWriteFence). kNotFound: no run.
absl::Status CheckLeaseFence(Db& db, absl::Time now, const std::string& run_id,
                             const std::string& token);

}  // namespace runloom::store_internal
