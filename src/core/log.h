// Log lines through the Env's Logger, formatted only when they will be kept.
#pragma once

#include "runloom/env.h"

#include "absl/strings/str_cat.h"

#include <string>

namespace runloom {

// Logs absl::StrCat(args...) at `level` unless the logger skips that level.
// Example: Log(logger, LogLevel::kWarning, "run ", id, ": ack failed: ", s.ToString());
template <typename... Args>
void Log(Logger* logger, LogLevel level, const Args&... args) {
  if (level < logger->min_level()) {
    return;
  }
  logger->Log(level, absl::StrCat(args...));
}

// The same, about the run, step, attempt or worker in `fields`
// (Logger::LogWithFields).
// Example: Log(logger, LogLevel::kWarning, {.run_id = id, .worker = owner}, "run ", id, ": ...");
template <typename... Args>
void Log(Logger* logger, LogLevel level, const LogFields& fields, const Args&... args) {
  if (level < logger->min_level()) {
    return;
  }
  logger->LogWithFields(level, absl::StrCat(args...), fields);
}

// A Logger that adds the run, step, attempt and worker it was made with to
// every line it passes on to `base` (a field a line gives itself wins). A
// step kind logs through one (StepContext::logger()), so its lines carry them
// without the kind knowing. Thread-safe as `base` is; owns copies of the
// fields, not `base`.
class FieldsLogger final : public Logger {
 public:
  FieldsLogger(Logger* base, std::string run_id, std::string step, int attempt, std::string worker)
      : base_(base),
        run_id_(std::move(run_id)),
        step_(std::move(step)),
        attempt_(attempt),
        worker_(std::move(worker)) {}

  void Log(LogLevel level, std::string_view message) override { LogWithFields(level, message, {}); }
  void LogWithFields(LogLevel level, std::string_view message, const LogFields& fields) override {
    base_->LogWithFields(level, message,
                         {.run_id = fields.run_id.empty() ? run_id_ : fields.run_id,
                          .step = fields.step.empty() ? step_ : fields.step,
                          .attempt = fields.attempt > 0 ? fields.attempt : attempt_,
                          .worker = fields.worker.empty() ? worker_ : fields.worker});
  }
  LogLevel min_level() const override { return base_->min_level(); }

 private:
  Logger* const base_;
  const std::string run_id_;
  const std::string step_;
  const int attempt_;
  const std::string worker_;
};

}  // namespace runloom
