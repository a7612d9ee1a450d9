#include "engine/rules/run_context.h"

#include <string_view>

namespace runloom::engine_internal {
namespace {

constexpr std::string_view kWorkingDir = "working_dir";
constexpr std::string_view kFeedback = "feedback";
constexpr std::string_view kRerunFrom = "rerun_from";
constexpr std::string_view kBudget = "budget";
constexpr std::string_view kPendingGate = "pending_gate";
constexpr std::string_view kTimer = "timer";
constexpr std::string_view kParent = "parent";
constexpr std::string_view kTrace = "trace";

std::string StringAt(const nlohmann::json& j, std::string_view key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

RunContext DecodeRunContext(const nlohmann::json& stored) {
  RunContext c;
  if (!stored.is_object()) return c;
  c.working_dir = StringAt(stored, kWorkingDir);
  c.feedback = StringAt(stored, kFeedback);
  c.rerun_from = StringAt(stored, kRerunFrom);
  if (auto b = stored.find(kBudget); b != stored.end() && b->is_object()) {
    StoredBudget budget{.tenant = StringAt(*b, "tenant")};
    if (auto l = b->find("limit_micros"); l != b->end() && l->is_number_integer()) {
      budget.limit_micros = l->get<int64_t>();
    }
    c.budget = std::move(budget);
  }
  if (auto g = stored.find(kPendingGate); g != stored.end()) c.pending_gate = *g;
  if (auto t = stored.find(kTimer); t != stored.end() && t->is_object()) {
    auto revision = t->find("revision");
    auto until = t->find("until_micros");
    if (revision != t->end() && revision->is_number_integer() && until != t->end() &&
        until->is_number_integer()) {
      c.timer = StoredTimer{.step_path = StringAt(*t, "step_path"),
                            .revision = revision->get<int64_t>(),
                            .until = absl::FromUnixMicros(until->get<int64_t>())};
    }
  }
  if (auto p = stored.find(kParent); p != stored.end() && p->is_object()) {
    auto revision = p->find("revision");
    auto depth = p->find("depth");
    if (revision != p->end() && revision->is_number_integer() && depth != p->end() &&
        depth->is_number_integer()) {
      c.parent = StoredParent{.run_id = StringAt(*p, "run_id"),
                              .step_path = StringAt(*p, "step_path"),
                              .revision = revision->get<int64_t>(),
                              .depth = depth->get<int>()};
    }
  }
  if (auto t = stored.find(kTrace); t != stored.end() && t->is_object()) {
    StoredTrace trace{.trace_id = StringAt(*t, "trace_id"),
                      .parent_span_id = StringAt(*t, "parent_span_id")};
    if (!trace.trace_id.empty()) c.trace = std::move(trace);
  }
  for (const auto& [key, value] : stored.items()) {
    if (key != kWorkingDir && key != kFeedback && key != kRerunFrom && key != kBudget &&
        key != kPendingGate && key != kTimer && key != kParent && key != kTrace) {
      c.unknown[key] = value;
    }
  }
  return c;
}

nlohmann::json EncodeRunContext(const RunContext& c) {
  nlohmann::json out = c.unknown.is_object() ? c.unknown : nlohmann::json::object();
  if (!c.working_dir.empty()) out[std::string(kWorkingDir)] = c.working_dir;
  if (!c.feedback.empty()) out[std::string(kFeedback)] = c.feedback;
  if (!c.rerun_from.empty()) out[std::string(kRerunFrom)] = c.rerun_from;
  if (c.budget.has_value()) {
    nlohmann::json b = {{"tenant", c.budget->tenant}};
    if (c.budget->limit_micros.has_value()) b["limit_micros"] = *c.budget->limit_micros;
    out[std::string(kBudget)] = std::move(b);
  }
  if (!c.pending_gate.is_null()) out[std::string(kPendingGate)] = c.pending_gate;
  if (c.timer.has_value()) {
    out[std::string(kTimer)] = {{"step_path", c.timer->step_path},
                                {"revision", c.timer->revision},
                                {"until_micros", absl::ToUnixMicros(c.timer->until)}};
  }
  if (c.parent.has_value()) {
    out[std::string(kParent)] = {{"run_id", c.parent->run_id},
                                 {"step_path", c.parent->step_path},
                                 {"revision", c.parent->revision},
                                 {"depth", c.parent->depth}};
  }
  if (c.trace.has_value()) {
    out[std::string(kTrace)] = {{"trace_id", c.trace->trace_id},
                                {"parent_span_id", c.trace->parent_span_id}};
  }
  return out;
}

// The run's span: its trace (the stored traceparent's, else derived from
// the run id) and its own id (derived from the run id).
TraceContext RunTraceOf(const RunRecord& run) {
  const RunContext c = ContextOf(run);
  return TraceContext{.trace_id = c.trace ? c.trace->trace_id : TraceIdOf(run.id),
                      .span_id = RunSpanIdOf(run.id, run.revision)};
}

RunContext ContextOf(const RunRecord& run) { return DecodeRunContext(run.context); }

}  // namespace runloom::engine_internal
