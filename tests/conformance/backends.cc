// The backends the conformance suites run against in this build, each named
// by the URL OpenBackend opens.
#include "conformance_fixture.h"

#include <filesystem>

namespace runloom::conformance {
namespace {

// Runs AcquireLease's first write through Store::ApplyFirstWrite (lease,
// then commit, in two transactions: the path of a backend without a
// one-commit lease) over a real backend, so it meets the same suite.
class TwoCommitFirstWrite final : public StoreWrapper {
 public:
  using StoreWrapper::AcquireLease;
  using StoreWrapper::StoreWrapper;
  absl::StatusOr<Lease> AcquireLease(const std::string& run_id, const std::string& owner,
                                     absl::Duration ttl, std::vector<Event> events,
                                     const RunWrite* first) override {
    absl::StatusOr<Lease> lease =
        inner().AcquireLease(run_id, owner, ttl, std::move(events), nullptr);
    if (lease.ok() && first != nullptr) ApplyFirstWrite(*first, *lease);
    return lease;
  }
};

}  // namespace

std::vector<BackendFactory> AllBackendFactories() {
  std::vector<BackendFactory> out;
  BackendFactory file;
  file.name = "SqliteFile";
  file.shared_location = true;
  file.url = [](const std::string& location) {
    return "sqlite://" + (std::filesystem::path(location) / "runloom.db").string();
  };
  out.push_back(file);

  BackendFactory memory;
  memory.name = "SqliteMemory";
  memory.url = [](const std::string&) { return std::string("sqlite::memory:"); };
  out.push_back(memory);

  BackendFactory two_commit = memory;
  two_commit.name = "SqliteMemoryTwoCommitFirstWrite";
  two_commit.wrap_store = [](std::unique_ptr<Store> s) -> std::unique_ptr<Store> {
    return std::make_unique<TwoCommitFirstWrite>(std::move(s));
  };
  out.push_back(two_commit);
  return out;
}

}  // namespace runloom::conformance
