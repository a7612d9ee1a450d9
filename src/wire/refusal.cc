#include "wire/refusal.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace runloom::wire {
namespace {

// How much of a caller's value a refusal quotes back.
constexpr size_t kQuotedBytes = 64;

}  // namespace

absl::string_view ErrorCode(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return "invalid_argument";
    case absl::StatusCode::kNotFound:
      return "not_found";
    case absl::StatusCode::kAlreadyExists:
      return "already_exists";
    case absl::StatusCode::kFailedPrecondition:
      return "failed_precondition";
    case absl::StatusCode::kAborted:
      return "conflict";
    case absl::StatusCode::kUnauthenticated:
      return "unauthenticated";
    case absl::StatusCode::kPermissionDenied:
      return "forbidden";
    case absl::StatusCode::kResourceExhausted:
      return "resource_exhausted";
    case absl::StatusCode::kUnavailable:
      return "unavailable";
    case absl::StatusCode::kDeadlineExceeded:
      return "deadline_exceeded";
    default:
      return "internal";
  }
}

Refusal UnknownDecisionRefusal(absl::string_view decision) {
  return {absl::StatusCode::kInvalidArgument, "invalid_argument",
          absl::StrCat("decision '", decision.substr(0, kQuotedBytes),
                       "' is not a decision: use approve, edit, reject or "
                       "request_revision; nothing was recorded"),
          "decision"};
}

std::optional<Refusal> DecideRefusal(const absl::Status& s, absl::string_view run_id,
                                     std::optional<Decision> decision) {
  if (absl::IsFailedPrecondition(s)) {
    return Refusal{
        s.code(), "not_paused",
        absl::StrCat("run ", run_id, " is not paused at an approval gate; nothing was recorded"),
        ""};
  }
  if (absl::IsAborted(s)) {
    return Refusal{s.code(), "stale_digest",
                   "the digest is not the current proposal's (or another decision was "
                   "recorded first); read the gate again; nothing was recorded",
                   "digest"};
  }
  if (absl::IsInvalidArgument(s)) {
    // A decision the gate does not allow, or (request_revision) a phase it
    // cannot rerun from.
    const bool phase =
        decision == Decision::kRequestRevision && absl::StrContains(s.message(), "phase");
    return Refusal{s.code(), "invalid_argument", std::string(s.message()),
                   phase ? "from_phase" : "decision"};
  }
  return std::nullopt;
}

}  // namespace runloom::wire
