// The write-operations ledger: exactly-once external writes in effect.
//
// A step that changes something outside runloom (an `http` step with
// `write: true`) records its intent in the store's write_operations table
// before it sends anything, and the result after. The key is (run, step
// path, action, decision): the decision is the approval the write carries
// out (the nearest gate before the step, decided), so a new decision, in a
// later revision, may write again, and a retry or a resumed execution of
// the same decision never does (reference 003: "keyed by run, proposal and
// action"). When a retry or a resumed execution finds an intent with no
// result, the response was lost (or never sent): the step reconciles first
// (a lookup request, or the same Idempotency-Key the first send carried) and
// never sends the write blindly again.
//
// Rows are kept for as long as the run is (they are the evidence of what was
// done outside); they are never updated once they have a result, and the
// first result recorded wins.
//
// These are plain values; Store (store.h) reads and writes them.
// Thread-safety: values only.
#pragma once

#include "absl/time/time.h"
#include "nlohmann/json.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace runloom {

// The identity of one external write.
struct WriteKey {
  std::string run_id;
  std::string step_path;  // e.g. "apply" or "fixes[2]/apply"
  std::string action;     // chosen by the workflow (default: the step id)
  // The decision the write carries out: "<gate path>@<revision decided
  // in>:<digest of the approved proposal>" (WriteDecision), or "" when no
  // decided gate comes before the step.
  std::string decision;
};

// WriteKey::decision for the gate at `gate_path`, decided in `revision`
// (0 = unknown: a record from before decisions carried their revision) on
// the proposal whose digest is `proposal_digest`.
std::string WriteDecision(const std::string& gate_path, int64_t revision,
                          const std::string& proposal_digest);

// kIntent: recorded before the request was sent; the outcome is unknown
// until a result is recorded. kDone: the result is recorded.
enum class WriteState { kIntent, kDone };
std::string_view ToString(WriteState s);
std::optional<WriteState> ParseWriteState(std::string_view s);

// What BeginWrite records.
struct WriteIntent {
  WriteKey key;
  // The run's current lease token: an intent is recorded only by the
  // executor holding the run (status running, this token), so a stale
  // executor never sends a write.
  std::string lease_token;
  // Sent as the Idempotency-Key header of every send and lookup of this
  // write; derived from the key (DeriveIdempotencyKey in steps/http), so
  // every executor computes the same one.
  std::string idempotency_key;
  // "sha256:<hex>" of what is sent (method, URL, body; never headers, which
  // may hold secrets). A second BeginWrite of the key with another digest is
  // refused: the action names a different request.
  std::string request_digest;
};

// What FinishWrite records: the outcome seen from outside.
struct WriteResult {
  int http_status = 0;
  // The response body (JSON, or a JSON string), bounded by the step;
  // scrubbed of secrets by the engine before it is written.
  nlohmann::json response;
  // How the result was learned: "sent" (the response to a send), "lookup"
  // (a reconciliation lookup found the write applied) or "resent" (the
  // answer to a resend under the same Idempotency-Key after an unknown
  // outcome; a server that honours the key answers from its record).
  std::string source = "sent";
};

// One row of write_operations.
struct WriteOperation {
  WriteKey key;
  WriteState state = WriteState::kIntent;
  std::string idempotency_key;
  std::string request_digest;
  // BeginWrite calls that found this row (and did not create it): the
  // executions that had to reconcile it or reuse its result.
  int64_t begins = 0;
  std::optional<WriteResult> result;  // set when state is kDone
  absl::Time created_at;              // the intent (store time)
  std::optional<absl::Time> finished_at;
};

// The Idempotency-Key of the write `key`: "rl-" and the first 32 hex digits
// of SHA-256 over run id, step path, action and, when there is one, the
// decision (separated by a byte no part contains; a key without a decision
// is derived as before decisions were part of it). Stable across executors
// and processes; reveals nothing of the request.
std::string DeriveIdempotencyKey(const WriteKey& key);

struct BeginWriteResult {
  WriteOperation op;
  // True when this call recorded the intent; false when the key existed
  // (then `op` is the row as it was, with `begins` counted up).
  bool created = false;
};

}  // namespace runloom
