// The wire form: one JSON shape for runs, steps, events, workflow versions
// and dead letters, shared by the CLI's `--json` output and the HTTP API, so a script
// that reads one reads the other. Times are ISO-8601 UTC strings; absent
// optional times are null. Field names are part of the user-visible contract:
// add fields, never rename or remove one.
//
// Thread-safety: pure functions.
#pragma once

#include "runloom/engine.h"
#include "runloom/events.h"
#include "runloom/gate.h"
#include "runloom/run.h"
#include "runloom/store.h"
#include "runloom/write_ledger.h"

#include "nlohmann/json.hpp"

#include <cstdint>
#include <vector>

namespace runloom::wire {

nlohmann::json RunToJson(const RunRecord& run);
nlohmann::json StepToJson(const StepRecord& step);
// A signal of a run's mailbox (issue 23). The key of the wait that consumed
// it is the engine's, not the wire's: `consumed` says whether one did.
nlohmann::json SignalToJson(const SignalRecord& signal);
// `step_counts` of a run's `revision` (engine/rules/step_counts.h): {revision,
// succeeded, failed, skipped, total}, from distinct (revision, path) records.
nlohmann::json StepCountsToJson(const std::vector<StepRecord>& steps, int64_t revision);
// An external write (runloom/write_ledger.h): path, action, decision
// ("" = none), state (intent | done), idempotency_key, request_digest,
// begins, http_status / source / response (null while an intent),
// created_at, finished_at.
nlohmann::json WriteToJson(const WriteOperation& op);
// `with_definition`: include the canonical definition under "definition".
nlohmann::json WorkflowVersionToJson(const WorkflowVersion& v, bool with_definition);
// A paused run's approval gate: path, step_id, phase, proposal,
// proposal_digest, allow, revision_phase, title (the form gate.h documents,
// the same as in the run's context).
nlohmann::json GateToJson(const PendingGate& gate);
// A page of runs: {"runs": [RunToJson...], "next_cursor": "..."}, where
// next_cursor "" means there is no next page.
nlohmann::json RunPageToJson(const RunPage& page);
// A dead letter (runloom/transport.h): id, run_id, message_id, deliveries,
// reason, at.
nlohmann::json DeadLetterToJson(const DeadLetter& d);
// A tenant's budget row (runloom/budget_ledger.h), GET /api/v1/budgets:
// tenant, limit_micros, spent_micros, reserved_micros, left_micros (limit
// and left null when the tenant has no limit).
nlohmann::json TenantBudgetToJson(const TenantBudget& t);
// An llm concurrency cap, GET /api/v1/llm/caps: provider, cap, in_flight,
// and history, its newest `keep` changes, oldest first: {at, cap, reason}.
nlohmann::json LlmCapToJson(const LlmCapInfo& cap, size_t keep);
// An API token (runloom/store.h): id, name, role, created_at, revoked_at
// (null while active). Never the token or its hash: the record has neither.
nlohmann::json TokenToJson(const TokenRecord& t);
// A schedule: {id, workflow, cron, timezone, inputs, overlap, catch_up,
// paused, next_fire_at, last_run_id (null before the first), last_fired_at,
// created_at, updated_at}; times as RFC 3339.
nlohmann::json ScheduleToJson(const ScheduleRecord& s);
// A streamed frame (issue 24) as the SSE `llm.*` events and `runloom events
// --follow --json` carry it: LiveFrameType is `llm.delta`, `llm.reset` or
// `llm.end`; LiveFrameData is {path, attempt, offset, text}. Not events: no
// seq, never stored.
const char* LiveFrameType(LiveFrame::Kind kind);
nlohmann::json LiveFrameData(const std::string& path, int attempt, int64_t offset,
                             const std::string& text);
// The event envelope of docs/formats/events.md (what schemas/events/
// validate), defined beside the event types in runloom/events.h.
using ::runloom::EventToJson;

}  // namespace runloom::wire
