// Env: the side effects an engine reaches for, passed in so a test or an
// embedder can replace each one alone.
//
// clock    where time comes from (leases, retries, sweeps, waits)
// logger   where warnings and errors go (nothing is dropped silently)
// random   where jitter and lease-owner suffixes come from (seed it in tests)
// metrics  a prometheus-cpp registry the engine adds its counters to
// scheduler  how work runs side by side (runloom/scheduler.h)
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

enum class LogLevel { kDebug, kInfo, kWarning, kError };
std::string_view ToString(LogLevel level);  // "debug", "info", "warning", "error"

// Where runloom's log lines go. One line per call; `message` has no trailing
// newline and never contains a secret value or a lease token.
class Logger {
 public:
  Logger() = default;
  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;
  virtual ~Logger() = default;

  virtual void Log(LogLevel level, std::string_view message) = 0;
  // Lines below this level may be skipped before they are formatted.
  virtual LogLevel min_level() const { return LogLevel::kInfo; }
};

// The process-wide default: spdlog to stderr, "[runloom] [warning] message",
// at the level named by the RUNLOOM_LOG_LEVEL environment variable (debug,
// info, warning, error; default info). Never null, never deleted.
Logger* DefaultLogger();

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
};

}  // namespace runloom
