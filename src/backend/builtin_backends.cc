// BuiltinBackends and OpenBackend: every backend this build has.
#include "runloom/backend.h"

#include "core/check.h"

namespace runloom {

const BackendRegistry& BuiltinBackends() {
  static const BackendRegistry* const registry = [] {
    auto* r = new BackendRegistry();
    // Distinct schemes: registering cannot fail.
    const absl::Status sqlite = RegisterSqliteBackend(*r);
    RUNLOOM_CHECK(sqlite.ok()) << sqlite;
    const absl::Status postgres = RegisterPostgresBackend(*r);
    RUNLOOM_CHECK(postgres.ok()) << postgres;
    return r;
  }();
  return *registry;
}

absl::StatusOr<Backend> OpenBackend(const std::string& url, const BackendOptions& options) {
  return BuiltinBackends().Open(url, options);
}

}  // namespace runloom
