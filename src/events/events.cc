#include "runloom/events.h"

#include "events/specs.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <set>

namespace runloom {
namespace {

using events_internal::EventSpec;
using events_internal::FieldKind;
using events_internal::FieldSpec;
using events_internal::FindEventSpec;

constexpr char kEventTimeFormat[] = "%Y-%m-%d%ET%H:%M:%E6SZ";
constexpr std::string_view kDigestPrefix = "sha256:";
constexpr size_t kDigestHexChars = 64;

// The envelope keys, in the order messages list them.
constexpr const char* kEnvelopeKeys[] = {"run_id", "seq", "type", "schema_version", "at", "data"};

// A new event of `type`, with the type's current schema_version.
Event NewEvent(const std::string& run_id, std::string_view type) {
  Event e;
  e.run_id = run_id;
  e.type = std::string(type);
  e.schema_version = EventSchemaVersion(type);
  e.data = nlohmann::json::object();
  return e;
}

// Optional string fields: "" means absent.
void SetIfNotEmpty(nlohmann::json& data, const char* key, const std::string& value) {
  if (!value.empty()) {
    data[key] = value;
  }
}

bool IsDigest(const std::string& s) {
  if (s.size() != kDigestPrefix.size() + kDigestHexChars || s.rfind(kDigestPrefix, 0) != 0) {
    return false;
  }
  for (size_t i = kDigestPrefix.size(); i < s.size(); ++i) {
    char c = s[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

// The JSON integer in `j` as int64, or nullopt for non-integers (1.0 included)
// and values past int64.
std::optional<int64_t> AsInt64(const nlohmann::json& j) {
  if (j.is_number_unsigned()) {
    uint64_t u = j.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return std::nullopt;
    }
    return static_cast<int64_t>(u);
  }
  if (j.is_number_integer()) {
    return j.get<int64_t>();
  }
  return std::nullopt;
}

// Checks one present field; "" when it is fine, else what is wrong with it.
std::string CheckField(const FieldSpec& f, const nlohmann::json& v) {
  switch (f.kind) {
    case FieldKind::kString: {
      if (!v.is_string()) {
        return absl::StrCat("must be a string, got ", v.dump());
      }
      const std::string& s = v.get_ref<const std::string&>();
      if (s.size() < f.min_length) {
        return "must not be empty (leave an optional field out instead)";
      }
      if (!f.one_of.empty()) {
        for (const std::string& allowed : f.one_of) {
          if (s == allowed) {
            return "";
          }
        }
        return absl::StrCat("must be one of ", absl::StrJoin(f.one_of, "|"), ", got \"", s, "\"");
      }
      return "";
    }
    case FieldKind::kDigest:
      if (!v.is_string() || !IsDigest(v.get_ref<const std::string&>())) {
        return absl::StrCat("must be \"sha256:\" + 64 lower-case hex digits, got ", v.dump());
      }
      return "";
    case FieldKind::kInteger: {
      std::optional<int64_t> n = AsInt64(v);
      if (!n.has_value()) {
        return absl::StrCat("must be an integer, got ", v.dump());
      }
      if (f.minimum.has_value() && *n < *f.minimum) {
        return absl::StrCat("must be >= ", *f.minimum, ", got ", *n);
      }
      return "";
    }
    case FieldKind::kBoolean:
      if (!v.is_boolean()) {
        return absl::StrCat("must be true or false, got ", v.dump());
      }
      return "";
  }
  return "has an unknown field kind";
}

absl::Status ValidateData(const EventSpec& spec, const nlohmann::json& data) {
  if (!data.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data must be a JSON object, got ", data.dump()));
  }
  std::set<std::string> known;
  for (const FieldSpec& f : spec.fields) {
    known.insert(f.name);
    auto it = data.find(std::string(f.name));
    if (it == data.end()) {
      if (f.required) {
        return absl::InvalidArgumentError(absl::StrCat("data.", f.name, " is required"));
      }
      continue;
    }
    std::string problem = CheckField(f, *it);
    if (!problem.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("data.", f.name, " ", problem));
    }
  }
  for (const auto& [key, value] : data.items()) {
    if (known.count(key) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("data.", key, " is not a field of ", spec.type,
                                                     " (its fields: ", absl::StrJoin(known, ", "),
                                                     ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

Event RunCreatedEvent(const std::string& run_id, const RunCreatedData& d) {
  Event e = NewEvent(run_id, event_types::kRunCreated);
  e.data["workflow"] = d.workflow;
  e.data["workflow_version"] = d.workflow_version;
  e.data["workflow_digest"] = d.workflow_digest;
  e.data["inputs_digest"] = d.inputs_digest;
  SetIfNotEmpty(e.data, "idempotency_key", d.idempotency_key);
  SetIfNotEmpty(e.data, "parent_run_id", d.parent_run_id);
  e.data["entry"] = ToString(RunEntry::kFresh);
  return e;
}

Event RunStartedEvent(const std::string& run_id, const RunStartedData& d) {
  Event e = NewEvent(run_id, event_types::kRunStarted);
  e.data["attempt"] = d.attempt;
  e.data["lease_owner"] = d.lease_owner;
  e.data["revision"] = d.revision;
  e.data["entry"] = ToString(d.entry);
  return e;
}

Event RunLeaseExpiredEvent(const std::string& run_id, const RunLeaseExpiredData& d) {
  Event e = NewEvent(run_id, event_types::kRunLeaseExpired);
  e.data["attempt"] = d.attempt;
  e.data["lease_owner"] = d.lease_owner;
  return e;
}

Event RunDeadLetteredEvent(const std::string& run_id, const RunDeadLetteredData& d) {
  Event e = NewEvent(run_id, event_types::kRunDeadLettered);
  e.data["message_id"] = d.message_id;
  e.data["deliveries"] = d.deliveries;
  e.data["reason"] = d.reason;
  return e;
}

Event RunReleasedEvent(const std::string& run_id, const RunReleasedData& d) {
  Event e = NewEvent(run_id, event_types::kRunReleased);
  e.data["reason"] = d.reason;
  return e;
}

Event RunPausedEvent(const std::string& run_id, const RunPausedData& d) {
  Event e = NewEvent(run_id, event_types::kRunPaused);
  e.data["step_path"] = d.step_path;
  SetIfNotEmpty(e.data, "proposal_digest", d.proposal_digest);
  return e;
}

Event RunWaitingEvent(const std::string& run_id, const RunWaitingData& d) {
  Event e = NewEvent(run_id, event_types::kRunWaiting);
  e.data["step_path"] = d.step_path;
  e.data["for"] = d.for_what;
  if (!d.until.empty()) e.data["until"] = d.until;
  if (!d.signal.empty()) e.data["signal"] = d.signal;
  SetIfNotEmpty(e.data, "child_run_id", d.child_run_id);
  return e;
}

Event SignalReceivedEvent(const std::string& run_id, const SignalReceivedData& d) {
  Event e = NewEvent(run_id, event_types::kSignalReceived);
  e.data["name"] = d.name;
  if (!d.idempotency_key.empty()) e.data["idempotency_key"] = d.idempotency_key;
  if (!d.by.empty()) e.data["by"] = d.by;
  return e;
}

Event RunDecidedEvent(const std::string& run_id, const RunDecidedData& d) {
  Event e = NewEvent(run_id, event_types::kRunDecided);
  e.data["step_path"] = d.step_path;
  e.data["decision"] = d.decision;
  e.data["reviewer"] = d.reviewer;
  e.data["proposal_digest"] = d.proposal_digest;
  SetIfNotEmpty(e.data, "feedback", d.feedback);
  SetIfNotEmpty(e.data, "rerun_from", d.rerun_from);
  e.data["revision"] = d.revision;
  return e;
}

Event RunResumedEvent(const std::string& run_id, const RunResumedData& d) {
  Event e = NewEvent(run_id, event_types::kRunResumed);
  e.data["reason"] = d.reason;
  return e;
}

Event RunCancelRequestedEvent(const std::string& run_id, const RunCancelRequestedData& d) {
  Event e = NewEvent(run_id, event_types::kRunCancelRequested);
  e.data["by"] = d.by;
  return e;
}

Event RunRerunRequestedEvent(const std::string& run_id, const RunRerunRequestedData& d) {
  Event e = NewEvent(run_id, event_types::kRunRerunRequested);
  e.data["from_phase"] = d.from_phase;
  e.data["revision"] = d.revision;
  e.data["by"] = d.by;
  SetIfNotEmpty(e.data, "feedback", d.feedback);
  return e;
}

Event RunFinishedEvent(const std::string& run_id, const RunFinishedData& d) {
  Event e = NewEvent(run_id, event_types::kRunFinished);
  e.data["status"] = ToString(d.status);
  SetIfNotEmpty(e.data, "outcome", d.outcome);
  SetIfNotEmpty(e.data, "error", d.error);
  if (d.budget.has_value()) {
    e.data["budget_refused_by"] = d.budget->refused_by;
    e.data["budget_amount_micros"] = d.budget->amount_micros;
    if (d.budget->limit_micros.has_value()) e.data["budget_limit_micros"] = *d.budget->limit_micros;
    e.data["budget_spent_micros"] = d.budget->spent_micros;
    e.data["budget_reserved_micros"] = d.budget->reserved_micros;
  }
  return e;
}

Event StepStartedEvent(const std::string& run_id, const StepStartedData& d) {
  Event e = NewEvent(run_id, event_types::kStepStarted);
  e.data["path"] = d.path;
  e.data["step_id"] = d.step_id;
  e.data["kind"] = d.kind;
  e.data["attempt"] = d.attempt;
  SetIfNotEmpty(e.data, "phase", d.phase);
  if (d.revision != 0) {
    e.data["revision"] = d.revision;
  }
  if (d.entry.has_value()) {
    e.data["entry"] = ToString(*d.entry);
  }
  return e;
}

Event StepSucceededEvent(const std::string& run_id, const StepSucceededData& d) {
  Event e = NewEvent(run_id, event_types::kStepSucceeded);
  e.data["path"] = d.path;
  e.data["step_id"] = d.step_id;
  e.data["attempt"] = d.attempt;
  e.data["duration_ms"] = d.duration_ms;
  return e;
}

Event StepFailedEvent(const std::string& run_id, const StepFailedData& d) {
  Event e = NewEvent(run_id, event_types::kStepFailed);
  e.data["path"] = d.path;
  e.data["step_id"] = d.step_id;
  e.data["attempt"] = d.attempt;
  e.data["error"] = d.error;
  e.data["error_class"] = ToString(d.error_class);
  e.data["will_retry"] = d.will_retry;
  if (d.retry_in_ms.has_value()) {
    e.data["retry_in_ms"] = *d.retry_in_ms;
  }
  return e;
}

Event StepSkippedEvent(const std::string& run_id, const StepSkippedData& d) {
  Event e = NewEvent(run_id, event_types::kStepSkipped);
  e.data["path"] = d.path;
  e.data["step_id"] = d.step_id;
  e.data["reason"] = d.reason;
  return e;
}

Event StepReusedEvent(const std::string& run_id, const StepReusedData& d) {
  Event e = NewEvent(run_id, event_types::kStepReused);
  e.data["path"] = d.path;
  e.data["step_id"] = d.step_id;
  return e;
}

Event LlmCallEvent(const std::string& run_id, const LlmCallData& d) {
  Event e = NewEvent(run_id, event_types::kLlmCall);
  e.data["path"] = d.path;
  e.data["attempt"] = d.attempt;
  e.data["model"] = d.model;
  e.data["provider"] = d.provider;
  if (!d.provider_model.empty()) {
    e.data["provider_model"] = d.provider_model;
  }
  e.data["outcome"] = d.outcome;
  if (d.error_class.has_value()) {
    e.data["error_class"] = ToString(*d.error_class);
  }
  e.data["input_tokens"] = d.input_tokens;
  e.data["output_tokens"] = d.output_tokens;
  e.data["cost_micros"] = d.cost_micros;
  e.data["latency_ms"] = d.latency_ms;
  e.data["requests"] = d.requests;
  return e;
}

std::vector<std::string> AllEventTypes() {
  std::vector<std::string> out;
  for (const EventSpec& spec : events_internal::EventSpecs()) {
    out.emplace_back(spec.type);
  }
  return out;
}

int EventSchemaVersion(std::string_view type) {
  const EventSpec* spec = FindEventSpec(type);
  return spec == nullptr ? 0 : spec->schema_version;
}

absl::Status ValidateEvent(const Event& e) {
  const std::string where =
      absl::StrCat("event ", e.run_id.empty() ? "(no run_id)" : e.run_id, " #", e.seq, " ", e.type);
  if (e.run_id.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": run_id is empty"));
  }
  const EventSpec* spec = FindEventSpec(e.type);
  if (spec == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": unknown event type \"", e.type,
                     "\"; known types: ", absl::StrJoin(AllEventTypes(), ", ")));
  }
  if (e.schema_version != spec->schema_version) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": schema_version ", e.schema_version, " is not the supported ",
                     spec->schema_version, "; build events with the factories in runloom/events.h"));
  }
  absl::Status s = ValidateData(*spec, e.data);
  if (!s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", s.message()));
  }
  return absl::OkStatus();
}

std::string FormatEventTime(absl::Time t) {
  return absl::FormatTime(kEventTimeFormat, t, absl::UTCTimeZone());
}

absl::StatusOr<absl::Time> ParseEventTime(const std::string& s) {
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, s, &t, &err)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", s, "\" is not an RFC 3339 time like 2026-11-29T21:45:00.123456Z (", err, ")"));
  }
  return t;
}

nlohmann::json EventToJson(const Event& e) {
  return nlohmann::json{{"run_id", e.run_id},
                        {"seq", e.seq},
                        {"type", e.type},
                        {"schema_version", e.schema_version},
                        {"at", FormatEventTime(e.at)},
                        {"data", e.data}};
}

absl::StatusOr<Event> EventFromJson(const nlohmann::json& j) {
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("event envelope: ", what));
  };
  if (!j.is_object()) {
    return bad(absl::StrCat("must be a JSON object, got ", j.dump()));
  }
  for (const char* key : kEnvelopeKeys) {
    if (!j.contains(std::string(key))) {
      return bad(absl::StrCat("key \"", key, "\" is missing; an envelope has ",
                              absl::StrJoin(kEnvelopeKeys, ", ")));
    }
  }
  if (j.size() != std::size(kEnvelopeKeys)) {
    for (const auto& [key, value] : j.items()) {
      if (std::find(std::begin(kEnvelopeKeys), std::end(kEnvelopeKeys), key) ==
          std::end(kEnvelopeKeys)) {
        return bad(absl::StrCat("unexpected key \"", key, "\"; an envelope has only ",
                                absl::StrJoin(kEnvelopeKeys, ", ")));
      }
    }
  }
  Event e;
  if (!j["run_id"].is_string()) {
    return bad(absl::StrCat("run_id must be a string, got ", j["run_id"].dump()));
  }
  e.run_id = j["run_id"].get<std::string>();
  std::optional<int64_t> seq = AsInt64(j["seq"]);
  if (!seq.has_value() || *seq < 0) {
    return bad(absl::StrCat("seq must be an integer >= 0, got ", j["seq"].dump()));
  }
  e.seq = *seq;
  if (!j["type"].is_string()) {
    return bad(absl::StrCat("type must be a string, got ", j["type"].dump()));
  }
  e.type = j["type"].get<std::string>();
  std::optional<int64_t> version = AsInt64(j["schema_version"]);
  if (!version.has_value() || *version < 1 || *version > std::numeric_limits<int>::max()) {
    return bad(
        absl::StrCat("schema_version must be an integer >= 1, got ", j["schema_version"].dump()));
  }
  e.schema_version = static_cast<int>(*version);
  if (!j["at"].is_string()) {
    return bad(absl::StrCat("at must be an RFC 3339 string, got ", j["at"].dump()));
  }
  absl::StatusOr<absl::Time> at = ParseEventTime(j["at"].get<std::string>());
  if (!at.ok()) {
    return bad(absl::StrCat("at: ", at.status().message()));
  }
  e.at = *at;
  e.data = j["data"];
  absl::Status s = ValidateEvent(e);
  if (!s.ok()) {
    return s;
  }
  return e;
}

absl::StatusOr<Event> ParseEventJson(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& ex) {
    return absl::InvalidArgumentError(
        absl::StrCat("event envelope: not valid JSON (", ex.what(), ")"));
  }
  return EventFromJson(j);
}

}  // namespace runloom
