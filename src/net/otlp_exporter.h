// OtlpExporter: spans sent to an OpenTelemetry collector with OTLP/HTTP
// in its JSON encoding (issue 25, traces).
//
// Debian 12 packages no OpenTelemetry C++ SDK, so this is written here on
// libcurl (http_client.h) and nlohmann-json: a bounded queue, one thread
// that posts a batch every `flush_every` (or as soon as `max_batch` spans
// wait), and nothing else of the SDK (no sampler, no metrics, no logs).
//
// Never blocking the caller is the rule: Export() only appends to the queue
// under a lock, and a span that finds the queue full is dropped and counted
// (dropped()). A collector that is slow or down costs the thread's posts
// (each bounded by `timeout`), never the engine's: a batch the collector
// did not accept (an error status, a timeout, no connection) is dropped and
// counted too (failed_batches(), dropped()). Stop() posts what is queued,
// once, within `timeout`, and joins.
//
// The JSON follows the OTLP specification's JSON mapping: trace and span
// ids as lower-case hex, times as decimal strings of Unix nanoseconds,
// attributes as {key, value: {stringValue|intValue|doubleValue|boolValue}}.
//
// Thread-safety: every method may be called from any thread.
//
// Example:
//   absl::StatusOr<std::unique_ptr<net::OtlpExporter>> otlp =
//       net::OtlpExporter::Create({.endpoint = "http://127.0.0.1:4318/v1/traces"});
//   (*otlp)->Export({.trace_id = t, .span_id = s, .name = "run blog", ...});
//   options.env.spans = otlp->get();  // the engine's spans (runloom/trace.h)
#pragma once

#include "runloom/mutex.h"
#include "runloom/trace.h"

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace runloom::net {

// The spans: runloom::TraceSpan (runloom/trace.h).
using Span = TraceSpan;

struct OtlpOptions {
  std::string endpoint;  // the traces URL, e.g. http://127.0.0.1:4318/v1/traces
  std::string service_name = "runloom";
  std::string service_version;
  // Sent with every post (OTEL_EXPORTER_OTLP_HEADERS: an API key, say).
  std::vector<std::pair<std::string, std::string>> headers;
  size_t max_queue = 4096;  // spans waiting; a span past it is dropped
  size_t max_batch = 512;   // spans per post
  absl::Duration flush_every = absl::Seconds(1);
  absl::Duration timeout = absl::Seconds(5);  // each post, connect included
};

class OtlpExporter final : public SpanSink {
 public:
  // Starts the thread. kInvalidArgument: an endpoint that is not an
  // http(s) URL, a zero bound.
  static absl::StatusOr<std::unique_ptr<OtlpExporter>> Create(OtlpOptions options);
  OtlpExporter(const OtlpExporter&) = delete;
  OtlpExporter& operator=(const OtlpExporter&) = delete;
  ~OtlpExporter() override;

  // Queues `span`, or drops it (counted) when the queue is full. Never
  // blocks on the network.
  void Export(TraceSpan span) override ABSL_LOCKS_EXCLUDED(mu_);
  // Posts what is queued (once, within the timeout) and joins the thread;
  // later Exports are dropped. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  int64_t exported() const { return exported_.load(); }  // spans the collector accepted
  int64_t dropped() const { return dropped_.load(); }    // queue full, or their post failed
  int64_t failed_batches() const { return failed_batches_.load(); }

 private:
  explicit OtlpExporter(OtlpOptions options) : options_(std::move(options)) {}
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  // True when the collector accepted the batch (or it was empty).
  bool Post(std::vector<Span> batch);

  const OtlpOptions options_;
  std::atomic<int64_t> exported_{0};
  std::atomic<int64_t> dropped_{0};
  std::atomic<int64_t> failed_batches_{0};
  runloom::Mutex mu_;
  runloom::CondVar wake_;
  std::vector<Span> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // started by Create, joined by Stop
};

// The OTLP/JSON body of `spans` (ExportTraceServiceRequest).
nlohmann::json OtlpTraceRequest(const std::vector<Span>& spans, const OtlpOptions& options);

// Where traces go: `flag` (--otlp-endpoint, a traces URL as given) when not
// empty, else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given, else
// OTEL_EXPORTER_OTLP_ENDPOINT with "/v1/traces" appended; "" = off.
// `getenv` reads the environment (std::getenv in production).
std::string OtlpTracesEndpoint(std::string_view flag,
                               const std::function<const char*(const char*)>& getenv);
// OTEL_EXPORTER_OTLP_HEADERS: "k1=v1,k2=v2" (values percent-decoded).
// kInvalidArgument naming the malformed entry (never its value: a header
// may hold a key).
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseOtlpHeaders(
    std::string_view text);

// W3C traceparent headers: runloom::ParseTraceParent and TraceParentOf
// (runloom/trace.h).

}  // namespace runloom::net
