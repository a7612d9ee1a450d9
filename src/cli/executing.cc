// The wiring every command that executes runs shares (commands.h:
// ExecutingFlags, ExecutingEngineOptions).
#include "cli/commands.h"

#include "runloom/version.h"

#include "cli/cli_common.h"
#include "core/status_macros.h"
#include "net/otlp_exporter.h"

#include "absl/strings/str_cat.h"

#include <cstdlib>
#include <memory>
#include <utility>

namespace runloom::cli {

absl::StatusOr<EngineOptions> ExecutingEngineOptions(EngineOptions base, const ExecutingFlags& f) {
  RUNLOOM_ASSIGN_OR_RETURN(ConfigFile config, ConfigSetting(f.config));
  config.ApplyTo(base);
  RUNLOOM_ASSIGN_OR_RETURN(base.stage_events, StageEventsSetting(f.stage_events));
  RUNLOOM_ASSIGN_OR_RETURN(base.park_sleeps_over,
                           PositiveDurationFlag("--park-sleeps-over", f.park_sleeps_over));
  RUNLOOM_ASSIGN_OR_RETURN(base.env.spans, SpansSetting(f.otlp_endpoint));
  return base;
}

absl::StatusOr<SpanSink*> SpansSetting(const std::string& flag) {
  // One per process, flushed by its destructor when the process exits
  // (after the command's engine has stopped).
  static std::unique_ptr<net::OtlpExporter> exporter;
  if (exporter != nullptr) return exporter.get();
  const std::string endpoint = net::OtlpTracesEndpoint(flag, [](const char* name) {
    return std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read before any thread starts
  });
  if (endpoint.empty()) return nullptr;
  net::OtlpOptions options{.endpoint = endpoint, .service_version = RUNLOOM_VERSION};
  if (const char* headers = std::getenv("OTEL_EXPORTER_OTLP_HEADERS"); headers != nullptr) {
    RUNLOOM_ASSIGN_OR_RETURN(options.headers, net::ParseOtlpHeaders(headers));
  }
  absl::StatusOr<std::unique_ptr<net::OtlpExporter>> made = net::OtlpExporter::Create(options);
  if (!made.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag.empty() ? "OTEL_EXPORTER_OTLP_ENDPOINT" : "--otlp-endpoint", ": ",
                     made.status().message()));
  }
  exporter = *std::move(made);
  return exporter.get();
}

}  // namespace runloom::cli
