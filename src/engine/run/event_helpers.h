// Positional shorthands over the typed event factories (runloom/events.h), so
// the executor's call sites stay one line. They build no JSON themselves.
#pragma once

#include "runloom/events.h"

#include <optional>
#include <string>

namespace runloom::engine_internal::events {

inline Event StepFailed(const std::string& run_id, const std::string& path,
                        const std::string& step_id, int attempt, const std::string& error,
                        ErrorClass error_class, bool will_retry,
                        std::optional<int64_t> retry_in_ms) {
  return StepFailedEvent(run_id, {.path = path,
                                  .step_id = step_id,
                                  .attempt = attempt,
                                  .error = error,
                                  .error_class = error_class,
                                  .will_retry = will_retry,
                                  .retry_in_ms = retry_in_ms});
}

inline Event StepSucceeded(const std::string& run_id, const std::string& path,
                           const std::string& step_id, int attempt, int64_t duration_ms) {
  return StepSucceededEvent(
      run_id, {.path = path, .step_id = step_id, .attempt = attempt, .duration_ms = duration_ms});
}

inline Event RunFinished(const std::string& run_id, RunStatus status, const std::string& outcome,
                         const std::string& error) {
  return RunFinishedEvent(run_id, {.status = status, .outcome = outcome, .error = error});
}

}  // namespace runloom::engine_internal::events
