#include "engine/observe/run_spans.h"

#include "engine/rules/run_context.h"

#include "absl/strings/str_cat.h"

namespace runloom::engine_internal {

TraceContext StepAttemptTrace(const RunRecord& run, std::string_view path, int attempt,
                              std::string_view lease_token) {
  const TraceContext root = RunTraceOf(run);
  return TraceContext{
      .trace_id = root.trace_id,
      .span_id = SpanIdOf(absl::StrCat("runloom step ", run.id, "/", std::string(path), "/",
                                       attempt, "/", std::string(lease_token)))};
}

void ExportRunSpan(SpanSink* sink, const RunRecord& run, const std::string& workflow,
                   absl::Time end) {
  if (sink == nullptr) return;
  const TraceContext root = RunTraceOf(run);
  const RunContext context = ContextOf(run);
  TraceSpan span{.trace_id = root.trace_id,
                 .span_id = root.span_id,
                 .parent_span_id = context.trace ? context.trace->parent_span_id : "",
                 .name = absl::StrCat("run ", workflow),
                 .kind = SpanKind::kServer,
                 .start = run.created_at,
                 .end = run.finished_at.value_or(end)};
  span.attributes = {{"runloom.run_id", run.id},
                     {"runloom.workflow", workflow},
                     {"runloom.workflow_version", run.workflow_version},
                     {"runloom.status", std::string(ToString(run.status))},
                     {"runloom.attempts", run.attempts},
                     {"runloom.revision", run.revision}};
  if (!run.parent_run_id.empty()) span.attributes["runloom.parent_run_id"] = run.parent_run_id;
  if (run.status == RunStatus::kFailed || run.status == RunStatus::kBudgetStopped) {
    span.error = true;
    span.error_message = run.error;
  }
  sink->Export(std::move(span));
}

void ExportStepAttemptSpan(SpanSink* sink, const RunRecord& run, const StepAttemptSpan& step) {
  if (sink == nullptr) return;
  const TraceContext self = StepAttemptTrace(run, step.path, step.attempt, step.lease_token);
  TraceSpan span{.trace_id = self.trace_id,
                 .span_id = self.span_id,
                 .parent_span_id = RunSpanIdOf(run.id, run.revision),
                 .name = absl::StrCat("step ", step.path),
                 .start = step.start,
                 .end = step.end};
  span.attributes = {{"runloom.run_id", run.id},        {"runloom.step", step.path},
                     {"runloom.kind", step.kind},       {"runloom.attempt", step.attempt},
                     {"runloom.worker", step.worker},   {"runloom.outcome", step.outcome},
                     {"runloom.revision", run.revision}};
  if (!step.error_class.empty()) span.attributes["runloom.error_class"] = step.error_class;
  if (step.outcome == "failed" || step.outcome == "retried") {
    span.error = true;
    span.error_message = step.error;
  }
  sink->Export(std::move(span));
}

void ExportTakeoverSpan(SpanSink* sink, const RunRecord& run, std::string_view previous_owner,
                        std::string_view by, absl::Time at) {
  if (sink == nullptr) return;
  const TraceContext root = RunTraceOf(run);
  TraceSpan span{.trace_id = root.trace_id,
                 // Two sweepers may both requeue one expiry (each appends
                 // its run.lease_expired): each span is its own, by when.
                 .span_id = SpanIdOf(
                     absl::StrCat("runloom takeover ", run.id, "/", run.revision, "/", run.attempts,
                                  "/", std::string(previous_owner), "/", absl::ToUnixNanos(at))),
                 .parent_span_id = root.span_id,
                 .name = "lease.takeover",
                 .start = at,
                 .end = at};
  span.attributes = {{"runloom.run_id", run.id},
                     {"runloom.attempt", run.attempts},
                     {"runloom.revision", run.revision},
                     {"runloom.previous_owner", std::string(previous_owner)},
                     {"runloom.by", std::string(by)}};
  sink->Export(std::move(span));
}

}  // namespace runloom::engine_internal
