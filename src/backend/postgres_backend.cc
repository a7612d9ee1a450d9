// The PostgreSQL backend composed: the PostgreSQL store (src/store/postgres/)
// with its queue table as the Transport, or, with a queue URL, a Redis Stream
// fed from that table as the outbox (src/transport/redis/) and the LLM cap
// board on the same Redis (src/llm/redis_cap_board.h); the store's
// LISTEN/NOTIFY EventBus. Registered for postgres: and postgresql: URLs.
#include "runloom/backend.h"
#include "runloom/postgres.h"

#include "core/status_macros.h"
#include "llm/redis_cap_board.h"
#include "store/postgres/pg_migrations.h"
#include "store/postgres/pg_store.h"
#include "transport/redis/redis_transport.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#include <optional>
#include <utility>

namespace runloom {
namespace {

absl::StatusOr<std::string> CheckPostgresUrl(const std::string& url) {
  const absl::string_view scheme = absl::string_view(url).substr(0, url.find(':'));
  if (!absl::StartsWith(absl::string_view(url).substr(scheme.size()), "://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("after '", scheme, ":' comes '//user@host:port/dbname'"));
  }
  return url;
}

absl::StatusOr<Backend> OpenPostgresFromOptions(const std::string& url,
                                                const BackendOptions& options) {
  PostgresOptions o;
  o.lock_timeout = options.lock_timeout;
  o.transport = options.transport;
  o.queue_url = options.queue_url;
  return OpenPostgres(url, o);
}

}  // namespace

absl::StatusOr<Backend> OpenPostgres(const std::string& url, const PostgresOptions& options) {
  std::optional<redis::RedisUrl> queue;
  if (!options.queue_url.empty()) {
    absl::StatusOr<redis::RedisUrl> q = redis::ParseRedisUrl(options.queue_url);
    if (!q.ok())
      return absl::InvalidArgumentError(absl::StrCat("queue URL: ", q.status().message()));
    // Before the database is opened (and migrated): nothing is written
    // when the queue cannot be used.
    RUNLOOM_RETURN_IF_ERROR(transport_internal::CheckRedisReachable(*q, {}));
    queue = *std::move(q);
  }
  RUNLOOM_ASSIGN_OR_RETURN(std::shared_ptr<store_internal::PgHandle> h,
                           store_internal::PgHandle::Open(url, options));
  Backend b;
  b.events = std::shared_ptr<EventBus>(h, h->bus());
  if (queue.has_value()) {
    RUNLOOM_ASSIGN_OR_RETURN(std::string instance, store_internal::PgInstanceId(*h));
    transport_internal::RedisTransportOptions o;
    o.transport = options.transport;
    o.key_prefix = absl::StrCat("runloom:{", instance, "}");
    b.llm_caps = redis::NewRedisCapBoard(*queue, o.key_prefix);
    RUNLOOM_ASSIGN_OR_RETURN(
        b.transport, transport_internal::NewRedisTransport(*queue, std::move(o),
                                                           store_internal::NewPgStreamDatabase(h)));
  } else {
    b.transport = store_internal::NewPgTransport(h);
  }
  b.pool_use = [weak = std::weak_ptr<store_internal::PgHandle>(h)] {
    std::shared_ptr<store_internal::PgHandle> handle = weak.lock();
    return handle != nullptr ? handle->Use() : PoolUse{};
  };
  b.store = std::make_unique<store_internal::PgStore>(std::move(h));
  return b;
}

absl::Status RegisterPostgresBackend(BackendRegistry& registry) {
  return registry.Register(BackendFactory{
      .schemes = {"postgres", "postgresql"},
      .forms = "postgres://user@host:port/dbname",
      .parse = CheckPostgresUrl,
      .open = OpenPostgresFromOptions,
  });
}

int64_t PostgresSchemaVersion() { return store_internal::LatestPostgresSchemaVersion(); }

}  // namespace runloom
