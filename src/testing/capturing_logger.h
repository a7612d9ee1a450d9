// CapturingLogger: a Logger that keeps every line, for tests that check an
// error was logged instead of dropped.
#pragma once

#include "runloom/env.h"

#include "absl/base/thread_annotations.h"
#include "runloom/mutex.h"

#include <string>
#include <vector>

namespace runloom::testing {

class CapturingLogger final : public Logger {
 public:
  struct Line {
    LogLevel level;
    std::string message;
    // LogFields, copied.
    std::string run_id;
    std::string step;
    int attempt = 0;
    std::string worker;
  };
  void Log(LogLevel level, std::string_view message) override { LogWithFields(level, message, {}); }
  void LogWithFields(LogLevel level, std::string_view message, const LogFields& fields) override {
    runloom::MutexLock l(&mu_);
    lines_.push_back({level, std::string(message), std::string(fields.run_id),
                      std::string(fields.step), fields.attempt, std::string(fields.worker)});
  }
  LogLevel min_level() const override { return LogLevel::kDebug; }

  std::vector<Line> lines() const {
    runloom::MutexLock l(&mu_);
    return lines_;
  }
  // How many lines at `level` or above contain `needle`.
  int Count(LogLevel level, std::string_view needle) const {
    runloom::MutexLock l(&mu_);
    int n = 0;
    for (const Line& line : lines_) {
      n += line.level >= level && line.message.find(needle) != std::string::npos ? 1 : 0;
    }
    return n;
  }

 private:
  mutable runloom::Mutex mu_;
  std::vector<Line> lines_ ABSL_GUARDED_BY(mu_);
};

}  // namespace runloom::testing
