// The default Logger: spdlog to stderr. log_line.cc formats the line, with
// its timestamp from RealClock() (only clock_real.cc reads the system
// clock); spdlog does the stderr locking and the level filter.
#include "runloom/clock.h"
#include "runloom/env.h"

#include "core/log_line.h"

#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

#include <atomic>
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

// RUNLOOM_LOG_FORMAT=text|json; anything else = text (the CLI refuses it first).
LogFormat FormatFromEnvironment() {
  const char* v = std::getenv("RUNLOOM_LOG_FORMAT");
  return ParseLogFormat(v == nullptr ? "" : v).value_or(LogFormat::kText);
}

class SpdlogLogger final : public Logger {
 public:
  SpdlogLogger() : level_(LevelFromEnvironment()), format_(FormatFromEnvironment()) {
    // Not registered in spdlog's global registry: an embedder's own spdlog
    // set-up (names, sinks, levels) stays untouched.
    logger_ = std::make_shared<spdlog::logger>("runloom",
                                               std::make_shared<spdlog::sinks::stderr_sink_mt>());
    logger_->set_pattern("%v");  // the whole line is FormatLogLine's
    logger_->set_level(ToSpdlog(level_));
  }
  void Log(LogLevel level, std::string_view message) override { LogWithFields(level, message, {}); }
  void LogWithFields(LogLevel level, std::string_view message, const LogFields& fields) override {
    if (level < level_) return;
    logger_->log(ToSpdlog(level), "{}",
                 FormatLogLine(format_.load(std::memory_order_relaxed), RealClock()->Now(), level,
                               message, fields));
  }
  LogLevel min_level() const override { return level_; }
  void set_format(LogFormat format) { format_.store(format, std::memory_order_relaxed); }

 private:
  const LogLevel level_;
  std::atomic<LogFormat> format_;
  std::shared_ptr<spdlog::logger> logger_;
};

SpdlogLogger* TheDefaultLogger() {
  static SpdlogLogger* const logger = new SpdlogLogger();  // never deleted: usable during exit
  return logger;
}

class DroppingLogger final : public Logger {
 public:
  void Log(LogLevel, std::string_view) override {}
  void LogWithFields(LogLevel, std::string_view, const LogFields&) override {}
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

std::optional<LogFormat> ParseLogFormat(std::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return std::nullopt;
}

Logger* DefaultLogger() { return TheDefaultLogger(); }

void SetDefaultLogFormat(LogFormat format) { TheDefaultLogger()->set_format(format); }

Logger* NullLogger() {
  static DroppingLogger logger;
  return &logger;
}

}  // namespace runloom
