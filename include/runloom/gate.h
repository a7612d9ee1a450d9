// PendingGate: what a run paused at an approval gate waits on.
//
// When the graph reaches an approval step with no decision recorded in the
// run's current revision, the executor resolves the step's proposal, records
// a PendingGate on the run and pauses it. A decision (Engine::Decide) must
// name the gate's proposal digest and one of its allowed decisions. The
// engine, the CLI and the HTTP API all read the gate through this type; its
// JSON form (PendingGateToJson) is what is persisted in the run's context
// under "pending_gate" and what clients see, and it keeps the keys it has
// always had: path, step_id, phase, proposal, proposal_digest, allow,
// revision_phase, title.
//
// Thread-safety: plain values and stateless functions.
//
// Example:
//   absl::StatusOr<PendingGate> gate = PendingGateOf(run);
//   if (gate.ok()) {
//     engine->Decide(run.id, {.proposal_digest = gate->proposal_digest,
//                             .decision = "approve"}, reviewer);
//   }
#pragma once

#include "runloom/run.h"

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace runloom {

// Every decision a reviewer can make; an approval step allows all of them
// unless its `allow:` names fewer. Also the values of run.decided's
// data.decision.
inline constexpr std::string_view kDecisions[] = {"approve", "edit", "reject", "request_revision"};

// A decision as a value; its names are kDecisions.
enum class Decision { kApprove, kEdit, kReject, kRequestRevision };
std::string_view ToString(Decision d);
// nullopt for a name not in kDecisions.
std::optional<Decision> ParseDecision(std::string_view name);

struct PendingGate {
  std::string step_path;  // where the run paused, e.g. "outline_review" (JSON: "path")
  std::string step_id;
  std::string phase;  // the approval step's phase ("" = none)
  // What the reviewer decides on: the step's `proposal:` with its templates
  // resolved.
  nlohmann::json proposal;
  std::string proposal_digest;  // "sha256:<hex>" of `proposal` (JsonDigest)
  // The decisions this gate allows, a subset of kDecisions (JSON: "allow").
  std::vector<std::string> allowed_decisions;
  // The phase request_revision reruns from when the reviewer names none ("" = none).
  std::string revision_phase;
  std::string title;  // the step's `title:`, else its id

  // True when `decision` is one of allowed_decisions.
  bool Allows(std::string_view decision) const;
};

// The JSON form (see the header comment).
nlohmann::json PendingGateToJson(const PendingGate& gate);
// Reads the JSON form. A missing key reads as its default (as every reader
// of the untyped form did); a key of the wrong JSON type is kDataLoss.
absl::StatusOr<PendingGate> PendingGateFromJson(const nlohmann::json& j);

// The gate `run` waits on: kNotFound when it has none (it is not paused at a
// gate), kDataLoss when the recorded gate is malformed. The one reader of
// run.context["pending_gate"].
absl::StatusOr<PendingGate> PendingGateOf(const RunRecord& run);

// `context` (a run's context) with `gate` recorded, or with no gate. The one
// writer of run.context["pending_gate"].
nlohmann::json ContextWithPendingGate(nlohmann::json context, const PendingGate& gate);
nlohmann::json ContextWithoutPendingGate(nlohmann::json context);

}  // namespace runloom
