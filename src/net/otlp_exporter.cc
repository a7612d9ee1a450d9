#include "net/otlp_exporter.h"

#include "net/http_client.h"

#include "core/escape.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

#include <algorithm>
#include <csignal>
#include <optional>
#include <string_view>

namespace runloom::net {
namespace {

using json = nlohmann::json;

json AnyValue(const json& v) {
  if (v.is_string()) return {{"stringValue", v.get<std::string>()}};
  if (v.is_boolean()) return {{"boolValue", v.get<bool>()}};
  // int64 as a decimal string: the JSON mapping's rule for 64-bit integers.
  if (v.is_number_integer()) return {{"intValue", absl::StrCat(v.get<int64_t>())}};
  if (v.is_number_unsigned()) return {{"intValue", absl::StrCat(v.get<uint64_t>())}};
  if (v.is_number_float()) return {{"doubleValue", v.get<double>()}};
  return {{"stringValue", v.dump(-1, ' ', false, json::error_handler_t::replace)}};
}

json Attributes(const json& object) {
  json out = json::array();
  if (!object.is_object()) return out;
  for (const auto& [key, value] : object.items()) {
    out.push_back({{"key", key}, {"value", AnyValue(value)}});
  }
  return out;
}

std::string Nanos(absl::Time t) { return absl::StrCat(absl::ToUnixNanos(t)); }

}  // namespace

json OtlpTraceRequest(const std::vector<Span>& spans, const OtlpOptions& options) {
  json out = json::array();
  for (const Span& s : spans) {
    json span = {{"traceId", s.trace_id},
                 {"spanId", s.span_id},
                 {"name", s.name},
                 {"kind", static_cast<int>(s.kind)},
                 {"startTimeUnixNano", Nanos(s.start)},
                 {"endTimeUnixNano", Nanos(std::max(s.start, s.end))},
                 {"attributes", Attributes(s.attributes)},
                 {"status", s.error ? json{{"code", 2}, {"message", s.error_message}}
                                    : json{{"code", 1}}}};
    if (!s.parent_span_id.empty()) span["parentSpanId"] = s.parent_span_id;
    out.push_back(std::move(span));
  }
  json resource = {{"service.name", options.service_name}};
  if (!options.service_version.empty()) resource["service.version"] = options.service_version;
  return {{"resourceSpans",
           {{{"resource", {{"attributes", Attributes(resource)}}},
             {"scopeSpans",
              {{{"scope", {{"name", "runloom"}, {"version", options.service_version}}},
                {"spans", std::move(out)}}}}}}}};
}

absl::StatusOr<std::unique_ptr<OtlpExporter>> OtlpExporter::Create(OtlpOptions options) {
  if (!absl::StartsWith(options.endpoint, "http://") &&
      !absl::StartsWith(options.endpoint, "https://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("the OTLP endpoint '", RedactUrl(options.endpoint),
                     "' is not an http(s) URL; give the collector's traces URL, e.g. "
                     "http://127.0.0.1:4318/v1/traces"));
  }
  if (options.max_queue == 0 || options.max_batch == 0 ||
      options.flush_every <= absl::ZeroDuration() || options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("OTLP exporter: queue, batch, flush and timeout must be > 0");
  }
  std::unique_ptr<OtlpExporter> out(new OtlpExporter(std::move(options)));
  // The thread takes no asynchronous signal: a process that waits for
  // SIGTERM on a thread of its own (the CLI's SignalWatcher, which may start
  // after this) must be the one to get it, not this one, where the default
  // action would end the process.
  sigset_t all;
  sigset_t before;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &before);
  out->thread_ = std::thread([self = out.get()] { self->Loop(); });
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  return out;
}

OtlpExporter::~OtlpExporter() { Stop(); }

void OtlpExporter::Export(TraceSpan span) {
  runloom::MutexLock l(&mu_);
  if (stopping_ || queue_.size() >= options_.max_queue) {
    dropped_.fetch_add(1);
    return;
  }
  queue_.push_back(std::move(span));
  if (queue_.size() >= options_.max_batch) wake_.Signal();
}

void OtlpExporter::Stop() {
  {
    runloom::MutexLock l(&mu_);
    stopping_ = true;
    wake_.Signal();
  }
  if (thread_.joinable()) thread_.join();
}

void OtlpExporter::Loop() {
  for (;;) {
    std::vector<Span> batch;
    bool stop = false;
    {
      runloom::MutexLock l(&mu_);
      if (!stopping_ && queue_.size() < options_.max_batch) {
        wake_.WaitWithTimeout(&mu_, options_.flush_every);
      }
      stop = stopping_;
      const size_t n = std::min(queue_.size(), options_.max_batch);
      batch.assign(std::make_move_iterator(queue_.begin()),
                   std::make_move_iterator(queue_.begin() + static_cast<ptrdiff_t>(n)));
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(n));
      if (stop && batch.empty()) return;
    }
    // Stopping, a collector that refused a batch is not tried again for the
    // rest: Stop waits for one failed post at most, not one per batch.
    if (!Post(std::move(batch)) && stop) {
      runloom::MutexLock l(&mu_);
      dropped_.fetch_add(static_cast<int64_t>(queue_.size()));
      queue_.clear();
      return;
    }
  }
}

bool OtlpExporter::Post(std::vector<Span> batch) {
  if (batch.empty()) return true;
  HttpRequest req;
  req.method = "POST";
  req.url = options_.endpoint;
  req.headers = {{"content-type", "application/json"}};
  for (const auto& h : options_.headers) req.headers.push_back(h);
  req.body = OtlpTraceRequest(batch, options_).dump(-1, ' ', false, json::error_handler_t::replace);
  req.total_timeout = options_.timeout;
  req.connect_timeout = std::min(options_.timeout, absl::Seconds(10));
  req.max_response_bytes = size_t{64} << 10;  // the reply is a small partialSuccess
  absl::StatusOr<HttpResponse> r = SendHttp(req);
  const auto n = static_cast<int64_t>(batch.size());
  if (r.ok() && r->status >= 200 && r->status < 300) {  // NOLINT: HTTP classes
    exported_.fetch_add(n);
    return true;
  }
  failed_batches_.fetch_add(1);
  dropped_.fetch_add(n);
  return false;
}

std::string OtlpTracesEndpoint(std::string_view flag,
                               const std::function<const char*(const char*)>& getenv) {
  if (!flag.empty()) return std::string(flag);
  if (const char* t = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); t != nullptr && *t != '\0') {
    return t;
  }
  if (const char* base = getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); base != nullptr && *base != '\0') {
    return absl::StrCat(absl::StripSuffix(base, "/"), "/v1/traces");
  }
  return "";
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseOtlpHeaders(
    std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  int n = 0;
  // absl::string_view: Debian's Abseil has its own, not std's.
  for (absl::string_view entry :
       absl::StrSplit(absl::string_view(text.data(), text.size()), ',', absl::SkipWhitespace())) {
    ++n;
    const size_t eq = entry.find('=');
    const std::string name(absl::StripAsciiWhitespace(entry.substr(0, eq)));
    if (eq == std::string_view::npos || name.empty() ||
        name.find_first_of(" \t\r\n:") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "OTEL_EXPORTER_OTLP_HEADERS: entry ", n, " is not name=value (entries are separated by ','"
          ")"));
    }
    absl::string_view raw = absl::StripAsciiWhitespace(entry.substr(eq + 1));
    std::optional<std::string> decoded =
        PercentDecode(std::string_view(raw.data(), raw.size()), /*plus_is_space=*/false);
    if (!decoded) {
      return absl::InvalidArgumentError(
          absl::StrCat("OTEL_EXPORTER_OTLP_HEADERS: entry ", n, " ('", name,
                       "') has a '%' not followed by two hex digits (write '%25' for a '%')"));
    }
    std::string value = *std::move(decoded);
    if (value.find_first_of("\r\n") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "OTEL_EXPORTER_OTLP_HEADERS: entry ", n, " ('", name, "') has a line break in its value"));
    }
    out.emplace_back(absl::AsciiStrToLower(name), std::move(value));
  }
  return out;
}

}  // namespace runloom::net
