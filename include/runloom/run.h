// Records of runs, steps, events and leases, as the store keeps them.
//
// These are plain values copied out of the store; changing one changes
// nothing durable. Writes go through Store (store.h).
#pragma once

#include "runloom/status.h"

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace runloom {

// One version of a workflow in the catalog.
struct WorkflowVersion {
  std::string name;
  int64_t version = 0;       // 1, 2, ...: a changed definition gets the next number
  std::string digest;        // "sha256:<hex>" of `canonical`
  nlohmann::json canonical;  // CanonicalWorkflow() of the definition
  absl::Time created_at;
};

// A run's concurrency (issue 23; workflow.h `concurrency:`, `priority:`):
// the bounds a stored run's key, limit and priority keep.
inline constexpr int kMaxPriority = 9;
inline constexpr int kMaxConcurrencyLimit = 10000;
inline constexpr std::size_t kMaxConcurrencyKeyBytes = 256;

// The one row of a run.
struct RunRecord {
  std::string id;
  std::string workflow_name;
  int64_t workflow_version = 0;
  std::string workflow_digest;  // pinned: a resume checks the catalog still has it
  RunStatus status = RunStatus::kQueued;
  nlohmann::json inputs = nlohmann::json::object();  // frozen; secret inputs never stored
  std::string inputs_digest;
  std::string idempotency_key;  // "" when none was given
  std::string phase;            // the phase of the step running or last run
  int64_t revision = 1;         // a rerun from a phase starts the next revision
  RunEntry entry = RunEntry::kFresh;  // how its current revision began
  nlohmann::json context = nlohmann::json::object();  // rerun_from, feedback, ...
  std::string lease_owner;                            // "" when no lease
  std::string lease_token;
  std::optional<absl::Time> lease_expires_at;
  int attempts = 0;      // leases taken so far
  int max_attempts = 0;  // the attempt cap fixed at creation (its workflow's max_attempts)
  bool cancel_requested = false;
  std::string outcome;  // approved | rejected | unresolved | failed, once known
  std::string error;    // why it failed, once known
  int64_t last_event_seq = 0;
  absl::Time created_at;
  absl::Time updated_at;
  std::optional<absl::Time> finished_at;
  // A waiting run: when its timer is due (the store's clock); else empty.
  std::optional<absl::Time> wake_at;
  // A run waiting for a signal: its name; else "".
  std::string wait_signal;
  // The run whose `kind: run` step started this one; "" = none (issue 23).
  std::string parent_run_id;
  // Concurrency (issue 23), fixed at creation: the key rendered from its
  // workflow's `concurrency.key` ("" = none), the most runs of that key that
  // may be running at once (0 when no key), and its priority (0-9, higher
  // first within a key).
  std::string concurrency_key;
  int concurrency_limit = 0;
  int priority = 0;
};

enum class StepState { kSucceeded, kFailed, kSkipped };
std::string_view ToString(StepState s);
std::optional<StepState> ParseStepState(std::string_view s);

// Why a step attempt failed, or that a step did not run: the one error-class
// type. A retry policy's `retry_on` names classes to retry; step.failed
// reports one (data.error_class); a step record keeps one. The strings of
// ToString are what is persisted, printed and sent, and never change:
//   error        the step ran and failed (nonzero exit, a `fail` step, a provider error)
//   timeout      the step passed its `timeout` (kDeadlineExceeded)
//   unavailable  a dependency could not be reached (kUnavailable)
//   rate_limited the provider said slow down (kResourceExhausted)
//   invalid      bad input or output (kInvalidArgument): retried only when
//                the step's retry.on lists it
//   cancelled    the run was cancelled or its lease lost (kCancelled): never
//                retried, never in a step record
//   skipped      the step did not run (step records only, never in step.failed)
// Only the first five may appear in `retry_on`.
enum class ErrorClass {
  kError,
  kTimeout,
  kUnavailable,
  kRateLimited,
  kInvalid,
  kCancelled,
  kSkipped,
};

inline constexpr ErrorClass kAllErrorClasses[] = {
    ErrorClass::kError,       ErrorClass::kTimeout, ErrorClass::kUnavailable,
    ErrorClass::kRateLimited, ErrorClass::kInvalid, ErrorClass::kCancelled,
    ErrorClass::kSkipped,
};

// "error", "timeout", "unavailable", "rate_limited", "invalid", "cancelled", "skipped".
constexpr std::string_view ToString(ErrorClass c) {
  switch (c) {
    case ErrorClass::kError:
      return "error";
    case ErrorClass::kTimeout:
      return "timeout";
    case ErrorClass::kUnavailable:
      return "unavailable";
    case ErrorClass::kRateLimited:
      return "rate_limited";
    case ErrorClass::kInvalid:
      return "invalid";
    case ErrorClass::kCancelled:
      return "cancelled";
    case ErrorClass::kSkipped:
      return "skipped";
  }
  return "error";
}

// The inverse of ToString; nullopt for any other string (including "").
constexpr std::optional<ErrorClass> ParseErrorClass(std::string_view s) {
  for (ErrorClass c : kAllErrorClasses) {
    if (ToString(c) == s) {
      return c;
    }
  }
  return std::nullopt;
}

// The recorded result of a finished step, unique per (run, revision, path).
// `path` names loop iterations and branches: "refine[2]/write", "fanout[sec]/scan".
struct StepRecord {
  std::string run_id;
  int64_t revision = 1;
  std::string path;
  std::string step_id;
  std::string kind;
  std::string phase;
  int attempt = 1;  // attempts used
  StepState state = StepState::kSucceeded;
  nlohmann::json output;  // null unless succeeded
  std::string error;      // "" unless failed
  // Set when failed (error, timeout, unavailable, rate_limited, invalid) or
  // skipped (skipped); stored as "" when not set.
  std::optional<ErrorClass> error_class;
  std::string stderr_tail;  // exec: the last bytes of stderr (at most 4 KiB)
  absl::Time started_at;
  absl::Time finished_at;
};

// One typed, append-only event of a run. Build with the factories in
// runloom/events.h, never by hand.
struct Event {
  std::string run_id;
  int64_t seq = 0;   // per-run, 1, 2, ...; assigned by the store on append
  std::string type;  // e.g. "run.created", "step.succeeded"
  int schema_version = 1;
  absl::Time at;  // assigned by the store on append
  nlohmann::json data = nlohmann::json::object();
};

// Who executes a run now.
struct Lease {
  std::string run_id;
  std::string owner;
  std::string token;
  int attempt = 0;
  absl::Time expires_at;
  // What became of the first write offered to Store::AcquireLease: OK when
  // none was offered or it was applied with the lease; kFailedPrecondition
  // when this was not the run's first lease (nothing of it written); else the
  // refusal of Store::Commit (e.g. kCancelled; nothing of it written).
  absl::Status first_write;
  // True when the first write offered to AcquireLease was applied.
  bool first_write_applied = false;
};

}  // namespace runloom
