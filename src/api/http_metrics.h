// The HTTP server's metrics on the engine's prometheus-cpp registry:
// runloom_http_request_duration_seconds{route,method,code} (a histogram; its
// _count is the request count) and runloom_http_open_streams (a gauge).
//
// Thread-safety: every method is thread-safe (prometheus-cpp's metrics are).
#pragma once

#include "absl/status/statusor.h"

#include <memory>
#include <string>

namespace prometheus {
class Registry;
class Gauge;
template <typename T>
class Family;
class Histogram;
}  // namespace prometheus

namespace runloom::api {

class HttpMetrics {
 public:
  // `registry` nullptr = record nothing. kInvalidArgument when the registry
  // already has these names (prometheus-cpp throws; this returns).
  static absl::StatusOr<std::unique_ptr<HttpMetrics>> Create(prometheus::Registry* registry);
  HttpMetrics(const HttpMetrics&) = delete;
  HttpMetrics& operator=(const HttpMetrics&) = delete;

  // `route` is the route's pattern ("" = none matched: recorded as "unmatched").
  void ObserveRequest(const std::string& route, const std::string& method, int status,
                      double seconds);
  void StreamOpened();
  void StreamClosed();

 private:
  HttpMetrics() = default;
  // Constant after Create(); nullptr when there is no registry.
  prometheus::Family<prometheus::Histogram>* latency_ = nullptr;
  prometheus::Gauge* open_streams_ = nullptr;
};

}  // namespace runloom::api
