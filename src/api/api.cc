#include "api/api.h"

#include "api/errors.h"
#include "api/query.h"
#include "auth/operations.h"
#include "core/escape.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace runloom::api {
namespace {

constexpr absl::string_view kBearer = "Bearer ";

// The decoded {placeholders} when `path` matches `pattern`, else nullopt.
std::optional<std::vector<std::string>> Match(absl::string_view pattern, absl::string_view path) {
  std::vector<absl::string_view> want = absl::StrSplit(pattern, '/');
  std::vector<absl::string_view> have = absl::StrSplit(path, '/');
  if (want.size() != have.size()) return std::nullopt;
  std::vector<std::string> params;
  for (size_t i = 0; i < want.size(); ++i) {
    if (absl::StartsWith(want[i], "{")) {
      std::optional<std::string> p =
          have[i].empty() ? std::nullopt
                          : PercentDecode(std::string_view(have[i].data(), have[i].size()), false);
      if (!p) return std::nullopt;
      params.push_back(*std::move(p));
    } else if (want[i] != have[i]) {
      return std::nullopt;
    }
  }
  return params;
}

}  // namespace

Api::Api(Engine* engine, Authenticator* auth, prometheus::Registry* metrics,
         std::optional<std::set<std::string>> allow_kinds)
    : engine_(engine), auth_(auth), metrics_(metrics) {
  routes_ = RunRoutes(engine_);
  for (Route& r : AdminRoutes(engine_, metrics_, std::move(allow_kinds))) {
    routes_.push_back(std::move(r));
  }
  for (Route& r : UiRoutes()) routes_.push_back(std::move(r));
  for (Route& r : ScheduleRoutes(engine_)) routes_.push_back(std::move(r));
}

Dispatched Api::Handle(const HttpRequest& request) const {
  const Route* route = nullptr;
  std::vector<std::string> params;
  bool path_known = false;
  for (const Route& r : routes_) {
    std::optional<std::vector<std::string>> p = Match(r.pattern, request.path);
    if (!p) continue;
    path_known = true;
    if (r.method == request.method) {
      route = &r;
      params = *std::move(p);
      break;
    }
  }
  if (route == nullptr) {
    if (path_known) {
      return {{ErrorResponse(405, "method_not_allowed",
                             absl::StrCat("method ", request.method, " is not allowed here"))},
              ""};
    }
    return {{ErrorResponse(404, "not_found", "no such route")}, ""};
  }
  Principal principal{.name = "local", .role = Role::kAdmin};
  if (route->role && auth_ != nullptr) {
    absl::string_view header = request.authorization;
    if (!absl::StartsWith(header, kBearer) || header.size() == kBearer.size()) {
      return {
          {ErrorResponse(401, "unauthenticated", "send a token: Authorization: Bearer <token>")},
          route->pattern};
    }
    absl::StatusOr<Principal> who = auth_->Authenticate(header.substr(kBearer.size()));
    if (!who.ok()) {
      if (absl::IsUnauthenticated(who.status())) {
        return {{ErrorResponse(401, "unauthenticated", "unknown or revoked token")},
                route->pattern};
      }
      return {{StatusResponse(who.status())}, route->pattern};
    }
    principal = *std::move(who);
    if (!RoleAtLeast(principal.role, *route->role)) {
      return {{ErrorResponse(403, "forbidden",
                             RoleRefusalMessage(*route->role, principal.role))},
              route->pattern};
    }
  }
  Call call{.request = request, .params = std::move(params), .principal = std::move(principal)};
  return {route->handler(call), route->pattern};
}

}  // namespace runloom::api
