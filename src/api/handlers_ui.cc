// The web UI's embedded files (src/web) at / and /ui/..., and /api/v1/me,
// which tells the UI who the token belongs to. The files need no token: they
// hold no data; every API call they make carries the session's token.
#include "api/api.h"
#include "api/errors.h"
#include "auth/operations.h"

#include "nlohmann/json.hpp"
#include "web/web_assets.h"

namespace runloom::api {
namespace {

HandlerResult Asset(const Call& c) {
  const web::Asset* a = web::FindAsset(c.request.path);
  if (a == nullptr) return {ErrorResponse(404, "not_found", "no such file")};
  return {HttpResponse{.content_type = std::string(a->content_type), .body = std::string(a->body)}};
}

HandlerResult Me(const Call& c) {
  return {JsonResponse(
      nlohmann::json{{"name", c.principal.name}, {"role", RoleName(c.principal.role)}}.dump())};
}

}  // namespace

std::vector<Route> UiRoutes() {
  return {
      {"GET", "/", std::nullopt, Asset},
      {"GET", "/ui/{file}", std::nullopt, Asset},
      {"GET", "/api/v1/me", RequiredRole(Operation::kRead), Me},
  };
}

}  // namespace runloom::api
