// The backends the conformance suites run against in this build.
#include "conformance_fixture.h"

#include <filesystem>

namespace runloom::conformance {
namespace {

absl::StatusOr<Backend> FromEmbedded(absl::StatusOr<EmbeddedBackend> e) {
  if (!e.ok()) return e.status();
  return Backend{std::move(e->store), std::move(e->transport)};
}

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
  return out;
}

}  // namespace runloom::conformance
