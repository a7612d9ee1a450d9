// Api: the /api/v1 routes (plus /healthz, /readyz, /metrics and the web UI's
// files) over an Engine,
// apart from any socket. Routing is a table of (method, pattern, role,
// handler); handlers are thin: parse, call the engine, encode with the wire
// form (wire/wire.h).
//
// Access: every route but /healthz and /readyz names the least Role it needs
// (runloom/auth.h). The caller's `Authorization: Bearer <token>` goes to the
// Authenticator; no token is 401, a role below the route's is 403. The
// token is never logged or echoed.
//
// Thread-safety: Handle() may be called from many threads at once (the
// engine and the authenticator are thread-safe; the table is const).
#pragma once

#include "runloom/auth.h"
#include "runloom/engine.h"

#include "api/http_types.h"

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace runloom::api {

struct Route {
  std::string method;
  // Segments in {braces} match one non-empty path segment, given to the
  // handler in Call::params (percent-decoded).
  std::string pattern;
  std::optional<Role> role;  // nullopt = no token needed
  std::function<HandlerResult(const Call&)> handler;
};

// What Handle() did: the answer, and the pattern of the route that gave it
// ("" when none matched), the label for per-route metrics.
struct Dispatched {
  HandlerResult result;
  std::string route;
};

class Api {
 public:
  // `engine` must outlive the Api. `auth` nullptr = no authentication:
  // every caller is the admin "local" (`runloom serve --insecure-no-auth`).
  // `metrics` is the registry /metrics serializes (nullptr: /metrics is empty).
  // `allow_kinds`: ServerOptions::allow_kinds.
  Api(Engine* engine, Authenticator* auth, prometheus::Registry* metrics,
      std::optional<std::set<std::string>> allow_kinds = std::nullopt);
  Api(const Api&) = delete;
  Api& operator=(const Api&) = delete;

  // Routes `request`: 404 for an unknown path, 405 for a known path with
  // another method, then 401/403, then the handler.
  Dispatched Handle(const HttpRequest& request) const;

  const std::vector<Route>& routes() const { return routes_; }

 private:
  // Constant after construction.
  Engine* const engine_;
  Authenticator* const auth_;
  prometheus::Registry* const metrics_;
  std::vector<Route> routes_;
};

// The route tables, by area (handlers_runs.cc, handlers_admin.cc).
std::vector<Route> RunRoutes(Engine* engine);
std::vector<Route> AdminRoutes(Engine* engine, prometheus::Registry* metrics,
                               std::optional<std::set<std::string>> allow_kinds);
std::vector<Route> UiRoutes();
std::vector<Route> ScheduleRoutes(Engine* engine);

}  // namespace runloom::api
