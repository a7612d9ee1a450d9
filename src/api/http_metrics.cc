#include "api/http_metrics.h"

#include "absl/strings/str_cat.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

#include <exception>

namespace runloom::api {
namespace {

// Seconds: 1 ms .. 10 s, for answers from the read model and writes through
// the store's group commit.
const prometheus::Histogram::BucketBoundaries& Buckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10};
  return kBuckets;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpMetrics>> HttpMetrics::Create(prometheus::Registry* registry) {
  std::unique_ptr<HttpMetrics> m(new HttpMetrics());
  if (registry == nullptr) return m;
  try {
    m->latency_ = &prometheus::BuildHistogram()
                       .Name("runloom_http_request_duration_seconds")
                       .Help("HTTP request latency by route pattern, method and status code")
                       .Register(*registry);
    m->open_streams_ = &prometheus::BuildGauge()
                            .Name("runloom_http_open_streams")
                            .Help("Server-Sent Event streams open now")
                            .Register(*registry)
                            .Add({});
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("http metrics: ", e.what()));
  }
  return m;
}

void HttpMetrics::ObserveRequest(const std::string& route, const std::string& method, int status,
                                 double seconds) {
  if (latency_ == nullptr) return;
  latency_
      // An unmatched request's method is the client's text: not a label value.
      ->Add({{"route", route.empty() ? "unmatched" : route},
             {"method", route.empty() ? "any" : method},
             {"code", absl::StrCat(status)}},
            Buckets())
      .Observe(seconds);
}

void HttpMetrics::StreamOpened() {
  if (open_streams_ != nullptr) open_streams_->Increment();
}

void HttpMetrics::StreamClosed() {
  if (open_streams_ != nullptr) open_streams_->Decrement();
}

}  // namespace runloom::api
