// Env: the side effects an engine reaches for, passed in so a test or an
// embedder can replace each one alone.
//
// clock    where time comes from (leases, retries, sweeps, waits)
// logger   where warnings and errors go (nothing is dropped silently)
// random   where jitter and lease-owner suffixes come from (seed it in tests)
// metrics  a prometheus-cpp registry the engine adds its counters to
// scheduler  how work runs side by side (runloom/scheduler.h)
// spans    where the engine's trace spans go (runloom/trace.h)
//
// Every field has a default that works in production: the backend's time
// authority, a logger that writes to stderr, a randomly seeded generator, and
// no metrics. The pointed-to objects are owned by the caller and must outlive
// whatever was given the Env.
//
// Thread-safety: Logger implementations must be safe to call from any thread.
// A random generator given here is used under the engine's own lock.
//
// Example:
//   auto registry = std::make_shared<prometheus::Registry>();
//   CapturingLogger log;            // a test's Logger
//   absl::BitGen gen(std::seed_seq{42});
//   EngineOptions options;
//   options.env = {.logger = &log, .random = gen, .metrics = registry.get()};
#pragma once

#include "absl/random/bit_gen_ref.h"

#include <optional>
#include <string>
#include <string_view>

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace runloom {

class Clock;
class Scheduler;
class SpanSink;

enum class LogLevel { kDebug, kInfo, kWarning, kError };
std::string_view ToString(LogLevel level);  // "debug", "info", "warning", "error"

// What a log line is about, where that applies: the run, the step (its path,
// e.g. "review/turn[1]"), the attempt (of the step when `step` is set, else
// the run's lease attempt) and the worker (the lease owner executing the
// run). Empty / 0 = does not apply. The views need only outlive the call.
struct LogFields {
  std::string_view run_id;
  std::string_view step;
  int attempt = 0;
  std::string_view worker;
};

// Where runloom's log lines go. One line per call; `message` has no trailing
// newline and never contains a secret value or a lease token.
class Logger {
 public:
  Logger() = default;
  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;
  virtual ~Logger() = default;

  virtual void Log(LogLevel level, std::string_view message) = 0;
  // A line with the fields it is about. The default drops the fields and
  // calls Log(level, message), so a Logger written before fields existed
  // keeps working. (Not an overload of Log: a subclass overriding one of two
  // overloads would hide the other, and clang warns -Woverloaded-virtual.)
  virtual void LogWithFields(LogLevel level, std::string_view message,
                             const LogFields& /*fields*/) {
    Log(level, message);
  }
  // Lines below this level may be skipped before they are formatted.
  virtual LogLevel min_level() const { return LogLevel::kInfo; }
};

// How DefaultLogger() writes a line (docs/operations.md, "Log lines"):
//   kText  2026-12-05T22:10:03.123Z [runloom] [warning] message run_id=r_1 attempt=2
//   kJson  {"ts":"2026-12-05T22:10:03.123Z","level":"warning","msg":"message","run_id":"r_1",
//          "attempt":2}
// Timestamps are UTC with milliseconds; a field is written only when it applies.
enum class LogFormat { kText, kJson };
// "text" or "json"; std::nullopt for anything else.
std::optional<LogFormat> ParseLogFormat(std::string_view name);

// The process-wide default: spdlog to stderr, at the level named by the
// RUNLOOM_LOG_LEVEL environment variable (debug, info, warning, error;
// default info), in the format named by RUNLOOM_LOG_FORMAT (text, json;
// default text) until SetDefaultLogFormat. Never null, never deleted.
Logger* DefaultLogger();
// Switches DefaultLogger()'s format for the lines logged from now on.
// Thread-safe.
void SetDefaultLogFormat(LogFormat format);

// A logger that drops every line (for benchmarks that measure the engine,
// not the terminal).
Logger* NullLogger();

struct Env {
  // nullptr = the backend's time authority (Store::clock()).
  Clock* clock = nullptr;
  // nullptr = DefaultLogger().
  Logger* logger = nullptr;
  // Empty = a generator seeded from the operating system.
  std::optional<absl::BitGenRef> random;
  // nullptr = no metrics are recorded.
  prometheus::Registry* metrics = nullptr;
  // nullptr = ThreadScheduler() (a thread per parallel branch).
  Scheduler* scheduler = nullptr;
  // Where the engine's spans go (runloom/trace.h); nullptr = nothing is
  // traced.
  SpanSink* spans = nullptr;
};

}  // namespace runloom
