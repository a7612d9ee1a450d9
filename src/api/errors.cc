#include "api/errors.h"

#include "core/log.h"
#include "wire/refusal.h"

#include "nlohmann/json.hpp"

namespace runloom::api {
namespace {

struct HttpCode {
  absl::StatusCode status;
  int http;
};

// The one Status -> HTTP table; the stable code beside each status is the
// wire's (wire::ErrorCode).
constexpr HttpCode kTable[] = {
    {absl::StatusCode::kInvalidArgument, 400},    {absl::StatusCode::kOutOfRange, 400},
    {absl::StatusCode::kNotFound, 404},           {absl::StatusCode::kAlreadyExists, 409},
    {absl::StatusCode::kFailedPrecondition, 409}, {absl::StatusCode::kAborted, 409},
    {absl::StatusCode::kUnauthenticated, 401},    {absl::StatusCode::kPermissionDenied, 403},
    {absl::StatusCode::kResourceExhausted, 429},  {absl::StatusCode::kUnavailable, 503},
    {absl::StatusCode::kDeadlineExceeded, 504},
};

// The HTTP status of `code`; 0 for one the table does not have.
int HttpStatusOf(absl::StatusCode code) {
  for (const HttpCode& c : kTable) {
    if (c.status == code) return c.http;
  }
  return 0;
}

}  // namespace

HttpResponse ErrorResponse(int status, const std::string& code, const std::string& message,
                           const std::string& field) {
  nlohmann::json j = {{"code", code}, {"message", message}};
  if (!field.empty()) j["field"] = field;
  return {.status = status, .body = j.dump()};
}

HttpResponse StatusResponse(const absl::Status& status) {
  if (const int http = HttpStatusOf(status.code()); http != 0) {
    return ErrorResponse(http, std::string(wire::ErrorCode(status.code())),
                         std::string(status.message()));
  }
  // Internal errors and broken invariants: the message may name internals,
  // so it goes to the log, not to the client.
  Log(DefaultLogger(), LogLevel::kError, "http: answered 500 for ", status.ToString());
  return ErrorResponse(500, "internal", "internal error; see the server log");
}

HttpResponse RefusalResponse(const wire::Refusal& r) {
  const int http = HttpStatusOf(r.status);
  return ErrorResponse(http != 0 ? http : 500, r.code, r.message, r.field);
}

HttpResponse JsonResponse(const std::string& json_text, int status) {
  return {.status = status, .body = json_text};
}

}  // namespace runloom::api
