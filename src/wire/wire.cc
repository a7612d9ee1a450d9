#include "wire/wire.h"

#include "runloom/events.h"

#include "engine/rules/child_signal.h"
#include "engine/rules/run_context.h"
#include "engine/rules/step_counts.h"

namespace runloom::wire {
namespace {
nlohmann::json TimeOrNull(const std::optional<absl::Time>& t) {
  return t ? nlohmann::json(FormatEventTime(*t)) : nlohmann::json(nullptr);
}
}  // namespace

nlohmann::json RunToJson(const RunRecord& r) {
  // The run context by its named fields (engine/rules/run_context.h), never
  // the stored JSON: where exec steps run stays on the server.
  const engine_internal::RunContext context = engine_internal::ContextOf(r);
  const absl::StatusOr<PendingGate> gate = PendingGateOf(r);  // null on the wire when none
  nlohmann::json budget = nullptr;
  if (context.budget.has_value()) {
    budget = {{"tenant", context.budget->tenant},
              {"limit_micros", context.budget->limit_micros.has_value()
                                   ? nlohmann::json(*context.budget->limit_micros)
                                   : nlohmann::json(nullptr)}};
  }
  // What a waiting run waits for (issue 23); null for any other status.
  nlohmann::json waiting_for = nullptr;
  if (r.status == RunStatus::kWaiting) {
    // A run step waits for its child's end signal (engine/rules/child_signal.h);
    // its wake time is only the parent's poll.
    const std::string child_id = engine_internal::ChildOfSignal(r.wait_signal);
    const bool child = !child_id.empty();
    waiting_for = {{"kind", child ? "child" : r.wait_signal.empty() ? "timer" : "signal"},
                   {"signal", r.wait_signal.empty() || child ? nlohmann::json(nullptr)
                                                             : nlohmann::json(r.wait_signal)},
                   {"child_run_id", child ? nlohmann::json(child_id) : nlohmann::json(nullptr)},
                   {"until", child ? nlohmann::json(nullptr) : TimeOrNull(r.wake_at)},
                   {"step_path", context.timer.has_value() && context.timer->revision == r.revision
                                     ? nlohmann::json(context.timer->step_path)
                                     : nlohmann::json(nullptr)}};
  }
  return {{"id", r.id},
          {"workflow", r.workflow_name},
          {"workflow_version", r.workflow_version},
          {"workflow_digest", r.workflow_digest},
          {"status", std::string(ToString(r.status))},
          {"inputs", r.inputs},
          {"inputs_digest", r.inputs_digest},
          {"idempotency_key", r.idempotency_key},
          {"phase", r.phase},
          {"revision", r.revision},
          {"entry", ToString(r.entry)},
          {"pending_gate", gate.ok() ? PendingGateToJson(*gate) : nlohmann::json(nullptr)},
          {"rerun_from", context.rerun_from},
          {"feedback", context.feedback},
          {"budget", std::move(budget)},
          {"lease_owner", r.lease_owner},
          {"lease_expires_at", TimeOrNull(r.lease_expires_at)},
          {"attempts", r.attempts},
          {"max_attempts", r.max_attempts},
          {"concurrency_key", r.concurrency_key},
          {"concurrency_limit", r.concurrency_limit},
          {"priority", r.priority},
          {"cancel_requested", r.cancel_requested},
          {"outcome", r.outcome},
          {"error", r.error},
          {"last_event_seq", r.last_event_seq},
          {"created_at", FormatEventTime(r.created_at)},
          {"updated_at", FormatEventTime(r.updated_at)},
          {"finished_at", TimeOrNull(r.finished_at)},
          {"waiting_for", std::move(waiting_for)},
          {"parent_run_id", r.parent_run_id.empty() ? nlohmann::json(nullptr)
                                                    : nlohmann::json(r.parent_run_id)},
          {"parent_step_path", context.parent.has_value()
                                   ? nlohmann::json(context.parent->step_path)
                                   : nlohmann::json(nullptr)}};
}

nlohmann::json SignalToJson(const SignalRecord& s) {
  return {{"run_id", s.run_id},
          {"seq", s.seq},
          {"name", s.name},
          {"payload", s.payload},
          {"idempotency_key", s.idempotency_key},
          {"received_at", FormatEventTime(s.received_at)},
          {"consumed", !s.consumed_by.empty()},
          {"consumed_at", TimeOrNull(s.consumed_at)}};
}

nlohmann::json StepCountsToJson(const std::vector<StepRecord>& steps, int64_t revision) {
  const engine_internal::StepCounts c = engine_internal::CountSteps(steps, revision);
  return {{"revision", c.revision},
          {"succeeded", c.succeeded},
          {"failed", c.failed},
          {"skipped", c.skipped},
          {"total", c.total()}};
}

nlohmann::json StepToJson(const StepRecord& s) {
  return {{"path", s.path},
          {"step_id", s.step_id},
          {"kind", s.kind},
          {"phase", s.phase},
          {"revision", s.revision},
          {"attempt", s.attempt},
          {"state", std::string(ToString(s.state))},
          {"output", s.output},
          {"error", s.error},
          {"error_class", s.error_class ? std::string(ToString(*s.error_class)) : ""},
          {"stderr_tail", s.stderr_tail},
          {"started_at", FormatEventTime(s.started_at)},
          {"finished_at", FormatEventTime(s.finished_at)}};
}

nlohmann::json WriteToJson(const WriteOperation& op) {
  const bool done = op.result.has_value();
  return {{"path", op.key.step_path},
          {"action", op.key.action},
          {"decision", op.key.decision},
          {"state", std::string(ToString(op.state))},
          {"idempotency_key", op.idempotency_key},
          {"request_digest", op.request_digest},
          {"begins", op.begins},
          {"http_status", done ? nlohmann::json(op.result->http_status) : nlohmann::json(nullptr)},
          {"source", done ? nlohmann::json(op.result->source) : nlohmann::json(nullptr)},
          {"response", done ? op.result->response : nlohmann::json(nullptr)},
          {"created_at", FormatEventTime(op.created_at)},
          {"finished_at", TimeOrNull(op.finished_at)}};
}

nlohmann::json WorkflowVersionToJson(const WorkflowVersion& v, bool with_definition) {
  nlohmann::json j = {{"name", v.name},
                      {"version", v.version},
                      {"digest", v.digest},
                      {"created_at", FormatEventTime(v.created_at)}};
  if (with_definition) j["definition"] = v.canonical;
  return j;
}

nlohmann::json GateToJson(const PendingGate& gate) { return PendingGateToJson(gate); }

nlohmann::json RunPageToJson(const RunPage& page) {
  nlohmann::json runs = nlohmann::json::array();
  for (const RunRecord& r : page.runs) runs.push_back(RunToJson(r));
  return {{"runs", std::move(runs)}, {"next_cursor", page.next_cursor}};
}

nlohmann::json DeadLetterToJson(const DeadLetter& d) {
  return {{"id", d.id},
          {"run_id", d.run_id},
          {"message_id", d.message_id},
          {"deliveries", d.deliveries},
          {"reason", d.reason},
          {"at", FormatEventTime(d.at)}};
}

nlohmann::json TenantBudgetToJson(const TenantBudget& t) {
  auto or_null = [](const std::optional<int64_t>& v) {
    return v.has_value() ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  return {{"tenant", t.tenant},
          {"limit_micros", or_null(t.figures.limit_micros)},
          {"spent_micros", t.figures.spent_micros},
          {"reserved_micros", t.figures.reserved_micros},
          {"left_micros", or_null(t.figures.left_micros())}};
}

nlohmann::json LlmCapToJson(const LlmCapInfo& cap, size_t keep) {
  const size_t from = cap.history.size() > keep ? cap.history.size() - keep : 0;
  nlohmann::json history = nlohmann::json::array();
  for (size_t i = from; i < cap.history.size(); ++i) {
    const LlmCapDecision& d = cap.history[i];
    history.push_back({{"at", FormatEventTime(d.at)}, {"cap", d.cap}, {"reason", d.reason}});
  }
  return {{"provider", cap.provider},
          {"cap", cap.cap},
          {"in_flight", cap.in_flight},
          {"history", std::move(history)}};
}

nlohmann::json TokenToJson(const TokenRecord& t) {
  return {{"id", t.id},
          {"name", t.name},
          {"role", std::string(RoleName(t.role))},
          {"created_at", FormatEventTime(t.created_at)},
          {"revoked_at", TimeOrNull(t.revoked_at)}};
}

nlohmann::json ScheduleToJson(const ScheduleRecord& s) {
  return {{"id", s.id},
          {"workflow", s.workflow},
          {"cron", s.cron},
          {"timezone", s.timezone},
          {"inputs", s.inputs},
          {"overlap", s.overlap},
          {"catch_up", s.catch_up},
          {"paused", s.paused},
          {"next_fire_at", FormatEventTime(s.next_fire_at)},
          {"last_run_id", s.last_run_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.last_run_id)},
          {"last_fired_at", TimeOrNull(s.last_fired_at)},
          {"created_at", FormatEventTime(s.created_at)},
          {"updated_at", FormatEventTime(s.updated_at)}};
}

const char* LiveFrameType(LiveFrame::Kind kind) {
  switch (kind) {
    case LiveFrame::Kind::kDelta:
      return "llm.delta";
    case LiveFrame::Kind::kReset:
      return "llm.reset";
    case LiveFrame::Kind::kEnd:
      return "llm.end";
  }
  return "llm.delta";
}

nlohmann::json LiveFrameData(const std::string& path, int attempt, int64_t offset,
                             const std::string& text) {
  return {{"path", path}, {"attempt", attempt}, {"offset", offset}, {"text", text}};
}

}  // namespace runloom::wire
