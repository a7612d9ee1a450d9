#include "api/errors.h"

#include "core/log.h"

#include "nlohmann/json.hpp"

namespace runloom::api {
namespace {

struct HttpCode {
  absl::StatusCode status;
  int http;
  const char* code;
};

// The one Status -> HTTP table.
constexpr HttpCode kTable[] = {
    {absl::StatusCode::kInvalidArgument, 400, "invalid_argument"},
    {absl::StatusCode::kOutOfRange, 400, "invalid_argument"},
    {absl::StatusCode::kNotFound, 404, "not_found"},
    {absl::StatusCode::kAlreadyExists, 409, "already_exists"},
    {absl::StatusCode::kFailedPrecondition, 409, "failed_precondition"},
    {absl::StatusCode::kAborted, 409, "conflict"},
    {absl::StatusCode::kUnauthenticated, 401, "unauthenticated"},
    {absl::StatusCode::kPermissionDenied, 403, "forbidden"},
    {absl::StatusCode::kResourceExhausted, 429, "resource_exhausted"},
    {absl::StatusCode::kUnavailable, 503, "unavailable"},
    {absl::StatusCode::kDeadlineExceeded, 504, "deadline_exceeded"},
};

}  // namespace

HttpResponse ErrorResponse(int status, const std::string& code, const std::string& message,
                           const std::string& field) {
  nlohmann::json j = {{"code", code}, {"message", message}};
  if (!field.empty()) j["field"] = field;
  return {.status = status, .body = j.dump()};
}

HttpResponse StatusResponse(const absl::Status& status) {
  for (const HttpCode& c : kTable) {
    if (c.status == status.code()) {
      return ErrorResponse(c.http, c.code, std::string(status.message()));
    }
  }
  // Internal errors and broken invariants: the message may name internals,
  // so it goes to the log, not to the client.
  Log(DefaultLogger(), LogLevel::kError, "http: answered 500 for ", status.ToString());
  return ErrorResponse(500, "internal", "internal error; see the server log");
}

HttpResponse JsonResponse(const std::string& json_text, int status) {
  return {.status = status, .body = json_text};
}

}  // namespace runloom::api
