// Typed run and step events: one factory per event type, the JSON envelope
// they travel in, and the check every stored event passes.
//
// An Event (runloom/run.h) is built only by the factories below, never by
// hand: each sets run_id, type, schema_version (a constant per type) and the
// type's data fields; the store assigns seq and at on append. The wire and
// storage form is the envelope
//   {"run_id", "seq", "type", "schema_version", "at", "data"}
// with `at` in RFC 3339 UTC with microseconds ("2026-11-29T21:45:00.123456Z").
// The same contract is written as JSON Schema (draft 2020-12) in
// schemas/events/<type>.schema.json, with one fixture per type in
// schemas/events/fixtures/; events_test checks that the field table behind
// ValidateEvent and those schemas agree, and tests/events/validate.mjs checks
// real events against the schemas.
//
// Optional string fields are plain std::string: "" means absent, and the
// field is then left out of `data` (never written as null or "").
//
// To add an event type: add a factory here, its row in src/events/specs.cc,
// schemas/events/<type>.schema.json, its fixture, the type in the envelope
// schema's enum, and a sample in src/events/samples.cc. To change a type's
// data incompatibly, bump its schema_version in specs.cc and the schema.
//
// Example:
//   Event e = StepFailedEvent(run.id, {.path = "refine[2]/write",
//                                      .step_id = "write",
//                                      .attempt = 1,
//                                      .error = "exit status 3",
//                                      .error_class = ErrorClass::kError,
//                                      .will_retry = true,
//                                      .retry_in_ms = 2000});
//   RUNLOOM_RETURN_IF_ERROR(ValidateEvent(e));
//
// Thread-safety: every function here is thread-safe; nothing holds state.
#pragma once

#include "runloom/run.h"
#include "runloom/status.h"
#include "runloom/workflow.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace runloom {

// The event type names, as written in Event::type.
namespace event_types {
inline constexpr std::string_view kRunCreated = "run.created";
inline constexpr std::string_view kRunStarted = "run.started";
inline constexpr std::string_view kRunLeaseExpired = "run.lease_expired";
inline constexpr std::string_view kRunDeadLettered = "run.dead_lettered";
inline constexpr std::string_view kRunReleased = "run.released";
inline constexpr std::string_view kRunPaused = "run.paused";
inline constexpr std::string_view kRunWaiting = "run.waiting";
inline constexpr std::string_view kRunDecided = "run.decided";
inline constexpr std::string_view kRunResumed = "run.resumed";
inline constexpr std::string_view kRunCancelRequested = "run.cancel_requested";
inline constexpr std::string_view kRunRerunRequested = "run.rerun_requested";
inline constexpr std::string_view kRunFinished = "run.finished";
inline constexpr std::string_view kStepStarted = "step.started";
inline constexpr std::string_view kStepSucceeded = "step.succeeded";
inline constexpr std::string_view kStepFailed = "step.failed";
inline constexpr std::string_view kStepSkipped = "step.skipped";
inline constexpr std::string_view kStepReused = "step.reused";
inline constexpr std::string_view kLlmCall = "llm.call";
inline constexpr std::string_view kSignalReceived = "signal.received";
}  // namespace event_types

// ---------------------------------------------------------------------------
// Data of each event type. Every member has a default ("" / 0 / nullopt), so
// designated initializers may leave any out under -Wextra; required ones
// left at their default fail ValidateEvent.

// run.created: written once, by admission, with the run row. data.entry is
// always "fresh".
struct RunCreatedData {
  std::string workflow{};
  int64_t workflow_version = 0;   // >= 1
  std::string workflow_digest{};  // "sha256:<hex>"
  std::string inputs_digest{};    // "sha256:<hex>"
  std::string idempotency_key{};  // optional: "" = none
  std::string parent_run_id{};    // optional: a child run's parent (issue 23)
};

// run.started: an executor took the lease: the attempt it takes it for
// (the run's attempts as read, plus one; the lease refuses another:
// LeaseRequest::expected_attempt) and who holds it. A stored event has
// attempt >= 1 and a non-empty owner.
struct RunStartedData {
  int attempt = 1;
  std::string lease_owner{};
  int64_t revision = 1;  // >= 1
  RunEntry entry = RunEntry::kFresh;
};

// run.lease_expired: the sweeper re-enqueued a run whose lease expired.
struct RunLeaseExpiredData {
  int attempt = 0;            // the attempt whose lease expired, >= 1
  std::string lease_owner{};  // its holder
};

// run.dead_lettered: the transport stopped delivering the run's message
// after its delivery cap; the run stays queued, is not re-enqueued by the
// sweeper, and runs again only after a redrive.
struct RunDeadLetteredData {
  std::string message_id{};  // the transport's id of the message
  int deliveries = 0;        // deliveries without an ack, >= 1
  std::string reason{};
};

// run.released: the lease holder gave the run back (e.g. worker shutdown).
struct RunReleasedData {
  std::string reason{};
};

// run.paused: the run waits for a decision at `step_path`.
struct RunPausedData {
  std::string step_path{};
  std::string proposal_digest{};  // optional: "" = none; else "sha256:<hex>"
};

// run.waiting: the run rests without a worker at `step_path`: a sleep step
// until `until` (`for` = "timer"), a wait step for the signal `signal`
// (`for` = "signal"), until `until` when it has a timeout, or a run step
// for its child run `child_run_id` (`for` = "child"). `until`: RFC 3339,
// UTC, the store's clock; "" = no timeout.
struct RunWaitingData {
  std::string step_path{};
  std::string for_what = "timer";
  std::string until{};
  std::string signal{};
  std::string child_run_id{};
};

// signal.received: a signal named `name` was kept in the run's mailbox.
// The store adds `seq` (its number in the mailbox) and `resolved` (whether
// it resolved the wait the run rested at, queueing the run).
struct SignalReceivedData {
  std::string name{};
  std::string idempotency_key{};  // optional: "" = none
  std::string by{};               // optional: the sender's identity
};

// run.decided: a human decision on a paused run was recorded. `decision` is
// one of approve, edit, reject, request_revision (kDecisions, runloom/gate.h);
// ValidateEvent rejects any other value.
struct RunDecidedData {
  std::string step_path{};  // the step the run paused at
  std::string decision{};
  std::string reviewer{};         // who decided (from the server, not the client)
  std::string proposal_digest{};  // "sha256:<hex>" of the proposal decided on
  std::string feedback{};         // optional: "" = none
  std::string rerun_from{};       // optional: "" = none; else the phase to rerun from
  int64_t revision = 1;           // >= 1: the revision the run continues in
};

// run.resumed: a paused run was let go on.
struct RunResumedData {
  std::string reason{};
};

// run.cancel_requested: someone asked to cancel the run.
struct RunCancelRequestedData {
  std::string by{};
};

// run.rerun_requested: an operator asked to rerun the run from a phase,
// starting a new revision.
struct RunRerunRequestedData {
  std::string from_phase{};
  int64_t revision = 1;  // >= 1: the new revision
  std::string by{};
  std::string feedback{};  // optional: "" = none
};

// run.finished: the run reached a terminal status (IsTerminal(status) must
// hold; ValidateEvent rejects any other).
// The figures of a refused budget reservation (status budget_stopped).
struct BudgetStopData {
  std::string refused_by{};               // "tenant" or "run"
  int64_t amount_micros = 0;              // the call's worst case, not reserved
  std::optional<int64_t> limit_micros{};  // the refusing budget's limit
  int64_t spent_micros = 0;               // its spent and reserved figures then
  int64_t reserved_micros = 0;
};

struct RunFinishedData {
  RunStatus status = RunStatus::kCompleted;
  std::string outcome{};  // optional: "" = none
  std::string error{};    // optional: "" = none
  // optional: set with status budget_stopped (data budget_refused_by,
  // budget_amount_micros, budget_limit_micros, budget_spent_micros,
  // budget_reserved_micros)
  std::optional<BudgetStopData> budget{};
};

// step.started: one attempt of one step began.
struct StepStartedData {
  std::string path{};  // e.g. "refine[2]/write"
  std::string step_id{};
  std::string kind{};
  int attempt = 1;       // >= 1
  std::string phase{};   // optional: "" = none
  int64_t revision = 0;  // optional: 0 = none; else >= 1, the run revision the step runs in
  std::optional<RunEntry> entry{};  // optional: how the current pass over the graph began
};

// step.succeeded: the attempt finished and its output was recorded.
struct StepSucceededData {
  std::string path{};
  std::string step_id{};
  int attempt = 1;
  int64_t duration_ms = 0;  // >= 0
};

// step.failed: the attempt failed; `will_retry` says whether another follows.
struct StepFailedData {
  std::string path{};
  std::string step_id{};
  int attempt = 1;
  std::string error{};
  // Any ErrorClass but kSkipped (ValidateEvent rejects "skipped").
  ErrorClass error_class = ErrorClass::kError;
  bool will_retry = false;
  std::optional<int64_t> retry_in_ms{};  // optional, >= 0: the backoff before the retry
};

// step.skipped: the step did not run (trigger rule, `when:` false, ...).
struct StepSkippedData {
  std::string path{};
  std::string step_id{};
  std::string reason{};
};

// step.reused: a resumed run found the step's recorded output and did not run it.
struct StepReusedData {
  std::string path{};
  std::string step_id{};
};

// llm.call: one model call of an llm step attempt (every HTTP request of it,
// retries included), written with the attempt's step.succeeded or
// step.failed. Never holds a prompt, a reply or an API key.
struct LlmCallData {
  std::string path{};            // the step's path
  int attempt = 1;               // the step attempt, >= 1
  std::string model{};           // the alias the step named
  std::string provider{};        // the configured provider's name ("fake" when unconfigured)
  std::string provider_model{};  // optional: the provider's name for the model
  // "ok" (a reply, accepted), "invalid" (a reply that is not the JSON the
  // step asked for: tokens were spent) or "error" (no reply).
  std::string outcome{};
  std::optional<ErrorClass> error_class{};  // optional: set unless outcome is "ok"
  int64_t input_tokens = 0;                 // >= 0, as the provider reported them
  int64_t output_tokens = 0;                // >= 0
  int64_t cost_micros = 0;  // >= 0: at the model's prices, millionths of the price unit
  int64_t latency_ms = 0;   // >= 0: from the first request to the end, waits included
  int64_t requests = 1;     // >= 0: requests sent (0: none, e.g. no API key)
};

// ---------------------------------------------------------------------------
// Factories. Each returns an Event with run_id, type, schema_version and data
// set; seq is 0 and at is the epoch until the store appends it. They do not
// validate (run.started is completed by the store); call ValidateEvent.

Event RunCreatedEvent(const std::string& run_id, const RunCreatedData& d);
Event RunStartedEvent(const std::string& run_id, const RunStartedData& d);
Event RunLeaseExpiredEvent(const std::string& run_id, const RunLeaseExpiredData& d);
Event RunDeadLetteredEvent(const std::string& run_id, const RunDeadLetteredData& d);
Event RunReleasedEvent(const std::string& run_id, const RunReleasedData& d);
Event RunPausedEvent(const std::string& run_id, const RunPausedData& d);
Event RunWaitingEvent(const std::string& run_id, const RunWaitingData& d);
Event RunDecidedEvent(const std::string& run_id, const RunDecidedData& d);
Event SignalReceivedEvent(const std::string& run_id, const SignalReceivedData& d);
Event RunResumedEvent(const std::string& run_id, const RunResumedData& d);
Event RunCancelRequestedEvent(const std::string& run_id, const RunCancelRequestedData& d);
Event RunRerunRequestedEvent(const std::string& run_id, const RunRerunRequestedData& d);
Event RunFinishedEvent(const std::string& run_id, const RunFinishedData& d);
Event StepStartedEvent(const std::string& run_id, const StepStartedData& d);
Event StepSucceededEvent(const std::string& run_id, const StepSucceededData& d);
Event StepFailedEvent(const std::string& run_id, const StepFailedData& d);
Event StepSkippedEvent(const std::string& run_id, const StepSkippedData& d);
Event StepReusedEvent(const std::string& run_id, const StepReusedData& d);
Event LlmCallEvent(const std::string& run_id, const LlmCallData& d);

// ---------------------------------------------------------------------------
// Types, validation and the JSON envelope.

// Every event type, in a fixed order (run.* first, then step.*, then llm.*).
std::vector<std::string> AllEventTypes();

// The current schema_version of `type`; 0 when the type is unknown.
int EventSchemaVersion(std::string_view type);

// Checks what a stored event must satisfy: non-empty run_id, a known type,
// its current schema_version, and `data` exactly as the type's schema says
// (required fields present, no others, JSON types, enums, minimums, digest
// shape). Does not look at seq or at. The store calls this before appending.
// Returns kInvalidArgument naming the run, the type and the offending field.
absl::Status ValidateEvent(const Event& e);

// The envelope of `e`. `at` is written with microsecond precision (anything
// finer is truncated), in UTC.
nlohmann::json EventToJson(const Event& e);

// Parses an envelope: exactly the six keys with the right JSON types, seq >= 0
// (0 = not yet appended), `at` in RFC 3339, then ValidateEvent.
// kInvalidArgument, saying which key is wrong, otherwise.
absl::StatusOr<Event> EventFromJson(const nlohmann::json& j);

// EventFromJson over JSON text; malformed JSON is kInvalidArgument too.
absl::StatusOr<Event> ParseEventJson(const std::string& text);

// "2026-11-29T21:45:00.123456Z": RFC 3339, UTC, microseconds.
std::string FormatEventTime(absl::Time t);
// Any RFC 3339 time ("...Z" or "...+01:00", any fraction digits).
// kInvalidArgument otherwise.
absl::StatusOr<absl::Time> ParseEventTime(const std::string& s);

}  // namespace runloom
