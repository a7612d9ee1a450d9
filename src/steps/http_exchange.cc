#include "steps/http_exchange.h"

#include "core/bounded_json.h"

#include "net/http_client.h"

#include <algorithm>

namespace runloom::steps_internal {

absl::StatusOr<Reply> Send(const Exchange& e) {
  net::HttpRequest req;
  req.method = e.method;
  req.url = e.url;
  req.headers = e.headers;
  if (!e.body.empty()) {
    req.headers.emplace_back("Content-Type", "application/json");
    req.body = e.body;
  }
  req.total_timeout = e.timeout;
  req.connect_timeout = std::min(req.connect_timeout, e.timeout);
  req.max_response_bytes = e.max_response_bytes;
  req.cancelled = e.cancelled;
  absl::StatusOr<net::HttpResponse> resp = net::SendHttp(req);
  if (!resp.ok()) return resp.status();
  return Reply{.status = resp->status, .body = std::move(resp->body)};
}

nlohmann::json BodyJson(const std::string& body) {
  if (body.empty()) return nullptr;
  absl::StatusOr<nlohmann::json> parsed =
      ParseJsonBounded(body, "http response", StepOutputLimits());
  if (parsed.ok()) return *std::move(parsed);
  return body;
}

}  // namespace runloom::steps_internal
