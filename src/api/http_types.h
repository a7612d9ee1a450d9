// The HTTP request and response the API's routing and handlers see, apart
// from Beast: the server (server.cc) converts to and from these, so handlers
// and their tests need no socket.
//
// Thread-safety: plain values.
#pragma once

#include "runloom/auth.h"

#include "absl/time/time.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace runloom::api {

struct HttpRequest {
  std::string method;                        // "GET", "POST", ...
  std::string path;                          // the target without its query, percent-decoded
  std::map<std::string, std::string> query;  // decoded; a repeated key keeps the last value
  std::string body;
  // Header values the API reads ("" when absent). `authorization` is a
  // secret: never logged.
  std::string authorization;
  std::string accept;
  std::string content_type;
  std::string last_event_id;
  bool has_last_event_id = false;
  // W3C Trace Context (POST /runs: the run joins the caller's trace).
  std::string traceparent;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

// What a handler asks the server to stream instead of answering once: a
// run's events as Server-Sent Events after `after_seq`, or (all_runs) every
// run's status changes, first those since `changes_after` (a resume) when set.
struct StreamRequest {
  bool all_runs = false;
  std::string run_id;
  int64_t after_seq = 0;
  std::optional<absl::Time> changes_after;
};

struct HandlerResult {
  HttpResponse response;
  std::optional<StreamRequest> stream;  // set: `response` is unused
};

// A matched call: the request, the {placeholders} of the route in order,
// and the authenticated caller.
struct Call {
  const HttpRequest& request;
  std::vector<std::string> params;
  Principal principal;
};

}  // namespace runloom::api
