// ForwardingStore: a Store that passes every call to another Store. Tests
// derive from it to change one method of a real backend (inject a race, run
// an interface default) and keep everything else real.
#pragma once

#include "runloom/store.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace runloom::testing {

class ForwardingStore : public Store {
 public:
  explicit ForwardingStore(std::unique_ptr<Store> inner) : inner_(std::move(inner)) {}
  absl::StatusOr<WorkflowVersion> RegisterWorkflow(const std::string& name,
                                                   const std::string& digest,
                                                   const nlohmann::json& canonical) override {
    return inner_->RegisterWorkflow(name, digest, canonical);
  }
  absl::StatusOr<WorkflowVersion> GetWorkflow(const std::string& name, int64_t version) override {
    return inner_->GetWorkflow(name, version);
  }
  absl::StatusOr<std::vector<WorkflowVersion>> ListWorkflows() override {
    return inner_->ListWorkflows();
  }
  absl::StatusOr<CreateRunResult> CreateRun(const NewRun& run, std::vector<Event> events) override {
    return inner_->CreateRun(run, std::move(events));
  }
  absl::StatusOr<RunRecord> GetRun(const std::string& run_id) override {
    return inner_->GetRun(run_id);
  }
  absl::StatusOr<std::vector<RunRecord>> ListRuns(const RunFilter& filter) override {
    return inner_->ListRuns(filter);
  }
  absl::StatusOr<Lease> AcquireLease(const std::string& run_id, const std::string& owner,
                                     absl::Duration ttl, std::vector<Event> events) override {
    return inner_->AcquireLease(run_id, owner, ttl, std::move(events));
  }
  absl::StatusOr<FirstLease> AcquireFirstLease(const std::string& run_id,
                                               const std::string& owner, absl::Duration ttl,
                                               std::vector<Event> events,
                                               const RunWrite& first) override {
    return inner_->AcquireFirstLease(run_id, owner, ttl, std::move(events), first);
  }
  absl::StatusOr<RunRecord> RenewLease(const std::string& run_id, const std::string& token,
                                       absl::Duration ttl) override {
    return inner_->RenewLease(run_id, token, ttl);
  }
  absl::Status Commit(const RunWrite& write) override { return inner_->Commit(write); }
  absl::StatusOr<std::vector<StepRecord>> ListSteps(const std::string& run_id,
                                                    std::optional<int64_t> revision) override {
    return inner_->ListSteps(run_id, revision);
  }
  absl::StatusOr<std::vector<Event>> ListEvents(const std::string& run_id, int64_t after_seq,
                                                int limit) override {
    return inner_->ListEvents(run_id, after_seq, limit);
  }
  absl::StatusOr<std::vector<RecoveryCandidate>> FindRecoverable(absl::Duration queued_grace,
                                                                 int limit) override {
    return inner_->FindRecoverable(queued_grace, limit);
  }
  absl::Status Enqueue(const std::string& run_id, std::vector<Event> events) override {
    return inner_->Enqueue(run_id, std::move(events));
  }
  Clock* clock() override { return inner_->clock(); }

 protected:
  Store& inner() { return *inner_; }

 private:
  std::unique_ptr<Store> inner_;
};

}  // namespace runloom::testing
