// The API's one error form and the one Status -> HTTP table (STYLE.md §2: no
// other module knows HTTP).
//
// Errors are JSON {"code": "...", "message": "...", "field": "..."} where
// `code` is stable (clients switch on it), `message` is for people and
// `field` names the offending request field when there is one.
//
// Thread-safety: pure functions.
#pragma once

#include "api/http_types.h"
#include "wire/refusal.h"

#include "absl/status/status.h"

#include <string>

namespace runloom::api {

// An error response: `status`, and the JSON body above ("" field = omitted).
HttpResponse ErrorResponse(int status, const std::string& code, const std::string& message,
                           const std::string& field = "");

// The HTTP status and stable code for a Status an engine call returned:
// kInvalidArgument 400 invalid_argument, kNotFound 404 not_found,
// kAlreadyExists 409 already_exists, kFailedPrecondition 409
// failed_precondition, kAborted 409 conflict, kUnauthenticated 401,
// kPermissionDenied 403, kResourceExhausted 429, kUnavailable 503,
// kDeadlineExceeded 504, anything else 500 internal (its message is not
// shown: it may hold internals).
HttpResponse StatusResponse(const absl::Status& status);

// A refusal (wire/refusal.h) as an error response, its HTTP status from
// the table above by the engine's code it carries.
HttpResponse RefusalResponse(const wire::Refusal& refusal);

// A JSON body with status `status` (200 by default).
HttpResponse JsonResponse(const std::string& json_text, int status = 200);

}  // namespace runloom::api
