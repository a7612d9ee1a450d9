// An outbound HTTP client: one request, one response, through libcurl.
//
// Model providers (src/llm) and the `http` step kind (src/steps) call out
// with it. It follows no redirects, speaks only http and https, bounds the
// response it keeps, and maps every transport failure onto a status code a
// retry policy can act on:
//   kDeadlineExceeded    connect or total timeout
//   kUnavailable         cannot connect or resolve; connection dropped or
//                        reset before a whole response arrived
//   kResourceExhausted   the response body is larger than max_response_bytes
//   kCancelled           `cancelled` returned true while the request ran
//   kInvalidArgument     a malformed URL or a scheme other than http(s)
// An HTTP error status (4xx, 5xx) is not an error here: it is a response.
// A failure after the request was written to the connection (a timeout, a
// cancel, a dropped connection) carries kHttpSentPayload (WasSent): the
// server may have acted on it, and a paid API may bill it.
//
// Error messages name the method and the URL without its query string or
// credentials, and never a header or a body (they may carry secrets).
//
// On a fiber (core/fiber.h: a run's step on an executor) the request is
// performed by one process-wide thread with libcurl's multi interface and
// the fiber suspends meanwhile, so thousands of requests in flight hold no
// executor; `cancelled` and `on_data` are then called on that thread, while
// the fiber waits. Off a fiber it is performed on the calling thread.
//
// Thread-safety: SendHttp may be called from many threads at once.
//
// Example:
//   net::HttpRequest req{.method = "POST", .url = base + "/v1/chat/completions"};
//   req.headers = {{"content-type", "application/json"}, {"authorization", "Bearer " + key}};
//   req.body = payload.dump();
//   absl::StatusOr<net::HttpResponse> resp = net::SendHttp(req);
//   if (resp.ok() && resp->status == 429) wait(resp->Header("retry-after"));
#pragma once

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace runloom::net {

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  // Sent as given; curl's own "Expect: 100-continue" is never sent.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // sent when not empty, or always for POST/PUT/PATCH
  absl::Duration connect_timeout = absl::Seconds(10);
  absl::Duration total_timeout = absl::Seconds(60);
  size_t max_response_bytes = size_t{16} << 20;
  // Polled while the request runs (a few times a second); true aborts it.
  std::function<bool()> cancelled;
  // Called with each piece of the body as it arrives (of whatever status;
  // the headers are in by then), on the calling thread, or for a fiber on
  // the transfer thread while the fiber waits, e.g. to read a streamed reply
  // as it comes. The body is still kept in
  // HttpResponse::body and bounded by max_response_bytes: a piece that would
  // pass the bound is not passed here. Unset = nobody listens.
  std::function<void(std::string_view)> on_data;
};

struct HttpResponse {
  int status = 0;
  // The final response's headers, names lower-cased, in the order received.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  absl::Duration elapsed;

  // The first header named `name` (lower-case), or nullopt.
  std::optional<std::string_view> Header(std::string_view name) const;
};

absl::StatusOr<HttpResponse> SendHttp(const HttpRequest& request);

// Set on a SendHttp failure whose request reached the connection.
inline constexpr char kHttpSentPayload[] = "runloom.dev/http_sent";
// True when `s` is such a failure: the request's fate is unknown.
bool WasSent(const absl::Status& s);

// `url` without its query, fragment and user:password@, for messages.
std::string RedactUrl(std::string_view url);

}  // namespace runloom::net
