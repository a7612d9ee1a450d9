// PendingGate (runloom/gate.h): its JSON form, and the one place that reads
// and writes the run context's pending gate (through engine/rules/run_context.h).
#include "runloom/gate.h"

#include "engine/rules/run_context.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <utility>

namespace runloom {
namespace {

// j[key] as a string: "" when missing, kDataLoss when not a string.
absl::StatusOr<std::string> StringAt(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) {
    return std::string();
  }
  if (!it->is_string()) {
    return absl::DataLossError(
        absl::StrCat("pending gate: \"", key, "\" is ", it->dump(), ", not a string"));
  }
  return it->get<std::string>();
}

}  // namespace

bool PendingGate::Allows(std::string_view decision) const {
  return std::find(allowed_decisions.begin(), allowed_decisions.end(), decision) !=
         allowed_decisions.end();
}

nlohmann::json PendingGateToJson(const PendingGate& gate) {
  return {{"path", gate.step_path},
          {"step_id", gate.step_id},
          {"phase", gate.phase},
          {"proposal", gate.proposal},
          {"proposal_digest", gate.proposal_digest},
          {"allow", gate.allowed_decisions},
          {"revision_phase", gate.revision_phase},
          {"title", gate.title}};
}

absl::StatusOr<PendingGate> PendingGateFromJson(const nlohmann::json& j) {
  if (!j.is_object()) {
    return absl::DataLossError(absl::StrCat("pending gate: ", j.dump(), " is not an object"));
  }
  PendingGate gate;
  const std::pair<const char*, std::string*> strings[] = {
      {"path", &gate.step_path},
      {"step_id", &gate.step_id},
      {"phase", &gate.phase},
      {"proposal_digest", &gate.proposal_digest},
      {"revision_phase", &gate.revision_phase},
      {"title", &gate.title},
  };
  for (const auto& [key, field] : strings) {
    absl::StatusOr<std::string> v = StringAt(j, key);
    if (!v.ok()) {
      return v.status();
    }
    *field = *std::move(v);
  }
  gate.proposal = j.value("proposal", nlohmann::json());
  auto allow = j.find("allow");
  if (allow != j.end()) {
    if (!allow->is_array()) {
      return absl::DataLossError(
          absl::StrCat("pending gate: \"allow\" is ", allow->dump(), ", not a list"));
    }
    for (const nlohmann::json& a : *allow) {
      if (!a.is_string()) {
        return absl::DataLossError(
            absl::StrCat("pending gate: \"allow\" holds ", a.dump(), ", not a string"));
      }
      gate.allowed_decisions.push_back(a.get<std::string>());
    }
  }
  return gate;
}

std::string_view ToString(Decision d) {
  switch (d) {
    case Decision::kApprove:
      return kDecisions[0];
    case Decision::kEdit:
      return kDecisions[1];
    case Decision::kReject:
      return kDecisions[2];
    case Decision::kRequestRevision:
      return kDecisions[3];
  }
  return "unknown";
}

std::optional<Decision> ParseDecision(std::string_view name) {
  for (Decision d : {Decision::kApprove, Decision::kEdit, Decision::kReject,
                     Decision::kRequestRevision}) {
    if (ToString(d) == name) return d;
  }
  return std::nullopt;
}

absl::StatusOr<PendingGate> PendingGateOf(const RunRecord& run) {
  const engine_internal::RunContext context = engine_internal::ContextOf(run);
  if (context.pending_gate.is_null()) {
    return absl::NotFoundError(absl::StrCat("run ", run.id, " has no pending approval gate"));
  }
  return PendingGateFromJson(context.pending_gate);
}

nlohmann::json ContextWithPendingGate(nlohmann::json context, const PendingGate& gate) {
  engine_internal::RunContext c = engine_internal::DecodeRunContext(context);
  c.pending_gate = PendingGateToJson(gate);
  return engine_internal::EncodeRunContext(c);
}

nlohmann::json ContextWithoutPendingGate(nlohmann::json context) {
  engine_internal::RunContext c = engine_internal::DecodeRunContext(context);
  c.pending_gate = nullptr;
  return engine_internal::EncodeRunContext(c);
}

}  // namespace runloom
