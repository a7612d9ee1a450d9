// Refusals in the wire's error form {code, message, field}: what the HTTP API
// sends as an error body and `runloom mcp` as a tool error, so a client of
// either reads the same stable code and the same words for the same refusal.
//
// `code` is stable (clients switch on it), `message` is for people and says
// what was refused, why, and how to fix it; `field` names the offending
// request field ("" = none). The HTTP status of a Refusal is the API's
// business (src/api/errors.h maps `status`); nothing here knows HTTP.
//
// Thread-safety: pure functions.
#pragma once

#include "runloom/gate.h"

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

#include <optional>
#include <string>

namespace runloom::wire {

// The stable code of an engine error: invalid_argument (kInvalidArgument,
// kOutOfRange), not_found, already_exists, failed_precondition, conflict
// (kAborted), unauthenticated, forbidden (kPermissionDenied),
// resource_exhausted, unavailable, deadline_exceeded; anything else
// "internal" (and its message is not for the caller: it may hold internals).
absl::string_view ErrorCode(absl::StatusCode code);

struct Refusal {
  absl::StatusCode status = absl::StatusCode::kUnknown;  // what the engine said
  std::string code;
  std::string message;
  std::string field;
};

// A decision whose name is not one of gate.h's kDecisions (`decision` as
// the caller sent it, shown cut to 64 bytes). Field "decision".
Refusal UnknownDecisionRefusal(absl::string_view decision);

// How an Engine::Decide error on run `run_id` is answered: kFailedPrecondition
// is not_paused, kAborted is stale_digest (the digest is not the current
// proposal's, or another decision was recorded first; the message never
// carries the current digest: a client that could copy it would decide
// without reading the proposal), kInvalidArgument keeps the engine's
// message and names from_phase or decision. nullopt for any other code
// (answer it as every engine error is, by ErrorCode).
std::optional<Refusal> DecideRefusal(const absl::Status& s, absl::string_view run_id,
                                     std::optional<Decision> decision);

}  // namespace runloom::wire
