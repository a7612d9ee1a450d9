// One HTTP exchange of an http step, over the shared client (net/http_client.h):
// the request as the step builds it, the answer as it reads it.
//
// Thread-safety: stateless functions.
#pragma once

#include "runloom/step.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace runloom::steps_internal {

struct Exchange {
  std::string method;
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;  // may hold secrets: never logged
  std::string body;  // JSON text; "" = none (sent as application/json when set)
  absl::Duration timeout;
  size_t max_response_bytes = 0;
  // Polled while the request runs; true aborts it (kCancelled).
  std::function<bool()> cancelled;
};

struct Reply {
  int status = 0;
  std::string body;
};

// Sends `e` (with Content-Type: application/json when it has a body).
// kUnavailable when no answer came (refused, reset, dropped connection),
// kDeadlineExceeded past e.timeout, kResourceExhausted for a body over
// e.max_response_bytes, kCancelled when e.cancelled said so. Any HTTP status
// is an answer (OK). Messages never hold a header or a body.
absl::StatusOr<Reply> Send(const Exchange& e);

// How the http kind sends (NewHttpStep): Send above, or a simulated service
// (src/sim/). Must be thread-safe.
using HttpSender = std::function<absl::StatusOr<Reply>(const Exchange&)>;
// The http kind (NewHttpStep) sending through `send` (empty = Send).
std::shared_ptr<StepKind> NewHttpStepWith(HttpSender send);

// The body as JSON when it parses as JSON (bounded), else as a JSON string.
nlohmann::json BodyJson(const std::string& body);

}  // namespace runloom::steps_internal
