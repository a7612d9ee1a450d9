// The SQLite implementation of Store (include/runloom/store.h). Reads run on
// the handle's reader connection; writes are ops on its group-commit queue.
// sqlite_store.cc has creation, reads and recovery; sqlite_commit.cc the
// lease and fenced writes; store/internal/sql_store.cc (over sqlite_sql.cc)
// the catalog, tokens and the write and budget ledgers.
//
// Thread-safety: every method is thread-safe (see SqliteHandle).
#pragma once

#include "runloom/store.h"

#include "store/internal/sql.h"
#include "store/internal/sql_store.h"
#include "store/sqlite/handle.h"
#include "store/write_checks.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace runloom::store_internal {

// The SQLite side of the SQL seam (sqlite_sql.cc).
std::unique_ptr<SqlDatabase> NewSqliteSqlDatabase(std::shared_ptr<SqliteHandle> handle);

class SqliteStore final : public SqlStore {
 public:
  explicit SqliteStore(std::shared_ptr<SqliteHandle> handle)
      : SqlStore(NewSqliteSqlDatabase(handle)), h_(std::move(handle)) {}

  // The catalog, tokens and the two ledgers: SqlStore (store/internal).
  absl::StatusOr<CreateRunResult> CreateRun(const NewRun& run, std::vector<Event> events) override;
  absl::StatusOr<RunRecord> GetRun(const std::string& run_id) override;
  absl::StatusOr<std::vector<RunRecord>> ListRuns(const RunFilter& filter) override;

  using Store::AcquireLease;
  // One write op: the lease, then `first` (when given).
  absl::StatusOr<Lease> AcquireLease(LeaseRequest request) override;
  absl::StatusOr<RunRecord> RenewLease(const std::string& run_id, const std::string& token,
                                       absl::Duration ttl) override;
  absl::Status Commit(const RunWrite& write) override;

  absl::StatusOr<std::vector<StepRecord>> ListSteps(const std::string& run_id,
                                                    std::optional<int64_t> revision) override;
  absl::StatusOr<std::vector<Event>> ListEvents(const std::string& run_id, int64_t after_seq,
                                                int limit) override;

  absl::StatusOr<std::vector<LiveLease>> ListLiveLeases(int limit) override;
  absl::Status ExpireLease(const std::string& run_id, const std::string& token) override;
  absl::StatusOr<std::vector<RecoveryCandidate>> FindRecoverable(absl::Duration queued_grace,
                                                                 int limit) override;
  absl::StatusOr<std::vector<std::string>> FindDueTimers(int limit) override;
  absl::StatusOr<std::vector<std::string>> FindCancelRequested(
      const std::vector<std::string>& run_ids) override;
  absl::Status Enqueue(const std::string& run_id, std::vector<Event> events) override;
  // One write op: the signal, and the wake of the wait it resolves.
  absl::StatusOr<SendSignalResult> SendSignal(const NewSignal& signal) override;

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

}  // namespace runloom::store_internal
