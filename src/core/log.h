// Log lines through the Env's Logger, formatted only when they will be kept.
#pragma once

#include "runloom/env.h"

#include "absl/strings/str_cat.h"

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

}  // namespace runloom
