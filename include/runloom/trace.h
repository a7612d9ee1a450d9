// Traces (issue 25; docs/operations.md "Traces"): the spans the engine
// reports, and where they go.
//
// The engine reports, to the SpanSink given as Env::spans (none = nothing is
// traced):
//   run <workflow>        the run, from its creation to its terminal status
//                         (the root, or a child of the traceparent given to
//                         StartRun / POST /runs), by whichever process ends it
//   step <path>           each step attempt (child of the run)
//   llm <model>           each model call (child of its step attempt)
//   http <METHOD>         each http step request (child of its step attempt)
//   lease.takeover        a run recovered after its lease expired (child of
//                         the run)
// A run's trace id and its span id are derived from the run id (TraceIdOf,
// RunSpanIdOf) unless a traceparent was given, so every process names them
// alike without asking the store. Outbound model and http requests carry the
// W3C `traceparent` of their span.
//
// Thread-safety: SpanSink implementations must be safe to call from any
// thread, and must not block (the engine calls them on its executors).
#pragma once

#include "absl/time/time.h"
#include "nlohmann/json.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace runloom {

enum class SpanKind { kInternal = 1, kServer = 2, kClient = 3 };  // OTLP's numbers

struct TraceSpan {
  std::string trace_id;        // 32 lower-case hex digits, not all zero
  std::string span_id;         // 16 lower-case hex digits, not all zero
  std::string parent_span_id;  // "" for a root span
  std::string name;
  SpanKind kind = SpanKind::kInternal;
  absl::Time start;
  absl::Time end;
  // Flat: string, integer, floating point or boolean values.
  nlohmann::json attributes = nlohmann::json::object();
  bool error = false;         // the span's status is ERROR (else OK)
  std::string error_message;  // with error; never a secret (scrubbed by the caller)
};

class SpanSink {
 public:
  virtual ~SpanSink() = default;
  // Takes the span; never blocks (drops it rather than wait).
  virtual void Export(TraceSpan span) = 0;
};

// Where a span sits: its trace and its own id (the parent of the spans
// below it, and what a request sent from inside it carries as traceparent).
struct TraceContext {
  std::string trace_id;
  std::string span_id;
};

// The trace id of a run given no traceparent: 32 hex digits of
// SHA-256("runloom trace " + run_id).
std::string TraceIdOf(std::string_view run_id);
// A span id derived from `name` (16 hex digits of SHA-256): the run's span
// is RunSpanIdOf(run_id, revision) (a rerun's revision ends again, with a
// span of its own); a step attempt's, SpanIdOf of its run, path,
// attempt and lease.
std::string SpanIdOf(std::string_view name);
std::string RunSpanIdOf(std::string_view run_id, int64_t revision);
// "00-<trace id>-<span id>-01" (W3C Trace Context, sampled).
std::string TraceParentOf(const TraceContext& context);
// A W3C traceparent header (https://www.w3.org/TR/trace-context/): its
// trace id and span id (the caller's span). nullopt for anything else:
// wrong length, upper-case or non-hex digits, all-zero ids, version ff; a
// later version's longer header is read by its first four fields, as the
// specification asks. Its flags are not kept (runloom samples every run).
std::optional<TraceContext> ParseTraceParent(std::string_view header);

}  // namespace runloom
