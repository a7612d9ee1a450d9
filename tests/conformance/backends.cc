// The backends the conformance suites run against in this build.
#include "conformance_fixture.h"

#include <filesystem>

namespace runloom::conformance {
namespace {

absl::StatusOr<Backend> FromEmbedded(absl::StatusOr<EmbeddedBackend> e) {
  if (!e.ok()) return e.status();
  return Backend{std::move(e->store), std::move(e->transport)};
}

// Runs the Store interface's default AcquireFirstLease (lease, then commit,
// in two transactions) over a real backend, so it meets the same suite.
class DefaultFirstLease final : public StoreWrapper {
 public:
  using StoreWrapper::StoreWrapper;
  absl::StatusOr<FirstLease> AcquireFirstLease(const std::string& run_id, const std::string& owner,
                                               absl::Duration ttl, std::vector<Event> events,
                                               const RunWrite& first) override {
    return Store::AcquireFirstLease(run_id, owner, ttl, std::move(events), first);
  }
};

}  // namespace

std::vector<BackendFactory> AllBackendFactories() {
  std::vector<BackendFactory> out;
  out.push_back(BackendFactory{"SqliteFile", true, [](const std::string& location, Clock* clock) {
                                 SqliteOptions o;
                                 o.clock = clock;
                                 return FromEmbedded(OpenSqlite(
                                     (std::filesystem::path(location) / "runloom.db").string(), o));
                               }});
  out.push_back(BackendFactory{"SqliteMemory", false, [](const std::string&, Clock* clock) {
                                 SqliteOptions o;
                                 o.clock = clock;
                                 return FromEmbedded(OpenSqlite(":memory:", o));
                               }});
  out.push_back(
      BackendFactory{"SqliteMemoryDefaultFirstLease", false, [](const std::string&, Clock* clock) {
                       SqliteOptions o;
                       o.clock = clock;
                       absl::StatusOr<Backend> b = FromEmbedded(OpenSqlite(":memory:", o));
                       if (b.ok())
                         b->store = std::make_unique<DefaultFirstLease>(std::move(b->store));
                       return b;
                     }});
  return out;
}

}  // namespace runloom::conformance
