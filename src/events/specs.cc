#include "events/specs.h"

#include <string>
#include <utility>

namespace runloom::events_internal {
namespace {

// Non-empty strings: an empty required string is always a writer's bug.
constexpr size_t kNonEmpty = 1;

FieldSpec Field(std::string name, FieldKind kind, bool required) {
  FieldSpec f;
  f.name = std::move(name);
  f.kind = kind;
  f.required = required;
  return f;
}
FieldSpec Str(std::string name) {
  FieldSpec f = Field(std::move(name), FieldKind::kString, true);
  f.min_length = kNonEmpty;
  return f;
}
FieldSpec OptStr(std::string name) {
  FieldSpec f = Str(std::move(name));
  f.required = false;
  return f;
}
FieldSpec Digest(std::string name) { return Field(std::move(name), FieldKind::kDigest, true); }
FieldSpec OptDigest(std::string name) { return Field(std::move(name), FieldKind::kDigest, false); }
FieldSpec Int(std::string name, int64_t minimum) {
  FieldSpec f = Field(std::move(name), FieldKind::kInteger, true);
  f.minimum = minimum;
  return f;
}
FieldSpec OptInt(std::string name, int64_t minimum) {
  FieldSpec f = Int(std::move(name), minimum);
  f.required = false;
  return f;
}
FieldSpec Bool(std::string name) { return Field(std::move(name), FieldKind::kBoolean, true); }
FieldSpec Enum(std::string name, std::vector<std::string> values) {
  FieldSpec f = Field(std::move(name), FieldKind::kString, true);
  f.one_of = std::move(values);
  return f;
}
FieldSpec OptEnum(std::string name, std::vector<std::string> values) {
  FieldSpec f = Enum(std::move(name), std::move(values));
  f.required = false;
  return f;
}

std::vector<EventSpec> BuildSpecs() {
  // The enums here must match ToString(RunEntry), ToString(ErrorClass) but skipped,
  // the terminal RunStatus values and kDecisions; events_test checks that.
  const std::vector<std::string> kEntries = {"fresh", "resume", "rerun", "revision"};
  const std::vector<std::string> kTerminal = {"completed",      "rejected", "unresolved",
                                              "budget_stopped", "failed",   "cancelled"};
  const std::vector<std::string> kErrorClasses = {"error",        "timeout", "unavailable",
                                                  "rate_limited", "invalid", "cancelled"};
  const std::vector<std::string> kDecisionValues = {"approve", "edit", "reject",
                                                    "request_revision"};
  return {
      {"run.created",
       1,
       {Str("workflow"), Int("workflow_version", 1), Digest("workflow_digest"),
        Digest("inputs_digest"), OptStr("idempotency_key"), OptStr("parent_run_id"),
        Enum("entry", {"fresh"})}},
      {"run.started",
       1,
       {Int("attempt", 1), Str("lease_owner"), Int("revision", 1), Enum("entry", kEntries)}},
      {"run.lease_expired", 1, {Int("attempt", 1), Str("lease_owner")}},
      {"run.dead_lettered", 1, {Str("message_id"), Int("deliveries", 1), Str("reason")}},
      {"run.released", 1, {Str("reason")}},
      {"run.paused", 1, {Str("step_path"), OptDigest("proposal_digest")}},
      {"run.waiting",
       1,
       {Str("step_path"), Enum("for", {"timer", "signal", "child"}), OptStr("until"),
        OptStr("signal"), OptStr("child_run_id")}},
      {"run.decided",
       1,
       {Str("step_path"), Enum("decision", kDecisionValues), Str("reviewer"),
        Digest("proposal_digest"), OptStr("feedback"), OptStr("rerun_from"), Int("revision", 1)}},
      {"run.resumed", 1, {Str("reason")}},
      {"run.cancel_requested", 1, {Str("by")}},
      {"run.rerun_requested",
       1,
       {Str("from_phase"), Int("revision", 1), Str("by"), OptStr("feedback")}},
      {"run.finished",
       1,
       {Enum("status", kTerminal), OptStr("outcome"), OptStr("error"),
        OptEnum("budget_refused_by", {"tenant", "run"}), OptInt("budget_amount_micros", 0),
        OptInt("budget_limit_micros", 0), OptInt("budget_spent_micros", 0),
        OptInt("budget_reserved_micros", 0)}},
      {"step.started",
       1,
       {Str("path"), Str("step_id"), Str("kind"), Int("attempt", 1), OptStr("phase"),
        OptInt("revision", 1), OptEnum("entry", kEntries)}},
      {"step.succeeded",
       1,
       {Str("path"), Str("step_id"), Int("attempt", 1), Int("duration_ms", 0)}},
      {"step.failed",
       1,
       {Str("path"), Str("step_id"), Int("attempt", 1), Str("error"),
        Enum("error_class", kErrorClasses), Bool("will_retry"), OptInt("retry_in_ms", 0)}},
      {"step.skipped", 1, {Str("path"), Str("step_id"), Str("reason")}},
      {"step.reused", 1, {Str("path"), Str("step_id")}},
      {"llm.call",
       1,
       {Str("path"), Int("attempt", 1), Str("model"), Str("provider"), OptStr("provider_model"),
        Enum("outcome", {"ok", "invalid", "error"}), OptEnum("error_class", kErrorClasses),
        Int("input_tokens", 0), Int("output_tokens", 0), Int("cost_micros", 0),
        Int("latency_ms", 0), Int("requests", 0)}},
      {"signal.received",
       1,
       {Str("name"), Int("seq", 1), Bool("resolved"), OptStr("idempotency_key"), OptStr("by")}},
  };
}

}  // namespace

const std::vector<EventSpec>& EventSpecs() {
  static const std::vector<EventSpec> kSpecs = BuildSpecs();
  return kSpecs;
}

const EventSpec* FindEventSpec(std::string_view type) {
  for (const EventSpec& spec : EventSpecs()) {
    if (spec.type == type) {
      return &spec;
    }
  }
  return nullptr;
}

}  // namespace runloom::events_internal
