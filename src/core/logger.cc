// The default Logger: spdlog to stderr. spdlog does the formatting, the
// stderr locking and the level filter; this file only maps our levels.
#include "runloom/env.h"

#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

#include <cstdlib>
#include <memory>
#include <string>

namespace runloom {
namespace {

spdlog::level::level_enum ToSpdlog(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarning:
      return spdlog::level::warn;
    case LogLevel::kError:
      return spdlog::level::err;
  }
  return spdlog::level::err;
}

// RUNLOOM_LOG_LEVEL=debug|info|warning|error; anything else = info.
LogLevel LevelFromEnvironment() {
  const char* v = std::getenv("RUNLOOM_LOG_LEVEL");
  const std::string s = v == nullptr ? "" : v;
  if (s == "debug") return LogLevel::kDebug;
  if (s == "warning" || s == "warn") return LogLevel::kWarning;
  if (s == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

class SpdlogLogger final : public Logger {
 public:
  SpdlogLogger() : level_(LevelFromEnvironment()) {
    // Not registered in spdlog's global registry: an embedder's own spdlog
    // set-up (names, sinks, levels) stays untouched.
    logger_ = std::make_shared<spdlog::logger>("runloom",
                                               std::make_shared<spdlog::sinks::stderr_sink_mt>());
    logger_->set_pattern("[runloom] [%l] %v");
    logger_->set_level(ToSpdlog(level_));
  }
  void Log(LogLevel level, std::string_view message) override {
    logger_->log(ToSpdlog(level), "{}", message);
  }
  LogLevel min_level() const override { return level_; }

 private:
  const LogLevel level_;
  std::shared_ptr<spdlog::logger> logger_;
};

class DroppingLogger final : public Logger {
 public:
  void Log(LogLevel, std::string_view) override {}
  LogLevel min_level() const override { return LogLevel::kError; }
};

}  // namespace

std::string_view ToString(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "error";
}

Logger* DefaultLogger() {
  static Logger* const logger = new SpdlogLogger();  // never deleted: usable during exit
  return logger;
}

Logger* NullLogger() {
  static DroppingLogger logger;
  return &logger;
}

}  // namespace runloom
