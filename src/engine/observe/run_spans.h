// The engine's spans (issue 25, runloom/trace.h): the run's, each step
// attempt's and a lease takeover's, built from what the engine already
// knows and handed to Env::spans. Every function does nothing when `sink`
// is null.
//
// Ids are derived, never stored: the run's trace and span from the run
// (RunTraceOf), a step attempt's span from its run, path, attempt and lease
// token, so a process that never saw the run start names them alike.
//
// Thread-safety: stateless functions; the sink is thread-safe.
#pragma once

#include "runloom/run.h"
#include "runloom/trace.h"

#include "absl/time/time.h"

#include <string>
#include <string_view>

namespace runloom::engine_internal {

// The span of a step attempt (its id, in the run's trace).
TraceContext StepAttemptTrace(const RunRecord& run, std::string_view path, int attempt,
                              std::string_view lease_token);

// The run's span, once it is terminal (`run` as written; `end` when its
// finished_at is not known to the caller).
void ExportRunSpan(SpanSink* sink, const RunRecord& run, const std::string& workflow,
                   absl::Time end);

struct StepAttemptSpan {
  std::string path;
  std::string kind;
  int attempt = 0;
  std::string lease_token;
  std::string worker;
  absl::Time start;
  absl::Time end;
  std::string outcome;  // "succeeded", "retried", "failed", "stopped"
  std::string error;    // scrubbed
  std::string error_class;
};
void ExportStepAttemptSpan(SpanSink* sink, const RunRecord& run, const StepAttemptSpan& step);

// A run taken over after its lease expired: `previous_owner` held it, `by`
// recovers it (the sweeper's requeue, or a new lease).
void ExportTakeoverSpan(SpanSink* sink, const RunRecord& run, std::string_view previous_owner,
                        std::string_view by, absl::Time at);

}  // namespace runloom::engine_internal
