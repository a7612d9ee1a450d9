// Runs, their steps, gate and events, and the operations on one run:
// start, decide, cancel, rerun, signals. Each handler: parse, call the engine, encode.
#include "api/api.h"
#include "api/body.h"
#include "api/errors.h"
#include "api/query.h"
#include "auth/operations.h"
#include "runloom/run.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "wire/wire.h"

namespace runloom::api {
namespace {

HttpResponse RunResponse(const absl::StatusOr<RunRecord>& run, int status = 200) {
  if (!run.ok()) return StatusResponse(run.status());
  return JsonResponse(wire::RunToJson(*run).dump(), status);
}

HandlerResult StartRun(Engine* engine, const Call& c) {
  ParsedBody b = ParseBody(c.request.body, {{"workflow", FieldType::kString, true},
                                            {"version", FieldType::kInteger},
                                            {"inputs", FieldType::kObject},
                                            {"idempotency_key", FieldType::kString},
                                            {"budget_micros", FieldType::kInteger},
                                            {"priority", FieldType::kInteger}});
  if (b.error) return {*b.error};
  StartRunRequest req;
  req.workflow_name = b.value["workflow"].get<std::string>();
  req.workflow_version = b.value.value("version", int64_t{0});
  if (req.workflow_version < 0) {
    return {
        ErrorResponse(400, "invalid_argument", "version must be 0 (latest) or more", "version")};
  }
  if (b.value.contains("inputs")) req.inputs = b.value["inputs"];
  req.idempotency_key = b.value.value("idempotency_key", std::string());
  if (b.value.contains("budget_micros")) {
    req.budget_micros = b.value["budget_micros"].get<int64_t>();
    if (*req.budget_micros < 0) {
      return {ErrorResponse(400, "invalid_argument", "budget_micros must be 0 or more",
                            "budget_micros")};
    }
  }
  if (b.value.contains("priority")) {
    const int64_t priority = b.value["priority"].get<int64_t>();
    if (priority < 0 || priority > kMaxPriority) {
      return {ErrorResponse(400, "invalid_argument",
                            absl::StrCat("priority must be from 0 to ", kMaxPriority), "priority")};
    }
    req.priority = static_cast<int>(priority);
  }
  req.traceparent = c.request.traceparent;  // a malformed one is ignored (W3C)
  absl::StatusOr<CreateRunResult> started = engine->StartRun(req);
  if (!started.ok()) {
    if (absl::IsInvalidArgument(started.status())) {
      return {ErrorResponse(400, "invalid_argument", std::string(started.status().message()),
                            "inputs")};
    }
    return {StatusResponse(started.status())};
  }
  return {JsonResponse(wire::RunToJson(started->run).dump(), started->created ? 201 : 200)};
}

// The longest tenant or input id a search takes (the engine's bound on names).
constexpr size_t kMaxSearchBytes = 256;

// Filters: status, workflow, parent; tenant, input_id, created_after,
// created_before (issue 25). The store's statement checks them all.
HandlerResult ListRuns(Engine* engine, const Call& c) {
  RunQuery q;
  if (auto it = c.request.query.find("status"); it != c.request.query.end()) {
    q.status = ParseRunStatus(it->second);
    if (!q.status) {
      return {ErrorResponse(400, "invalid_argument",
                            absl::StrCat("unknown status '", it->second.substr(0, 64), "'"),
                            "status")};
    }
  }
  if (auto it = c.request.query.find("workflow"); it != c.request.query.end()) {
    q.workflow = it->second;
  }
  if (auto it = c.request.query.find("parent"); it != c.request.query.end()) {
    q.parent_run_id = it->second;
  }
  if (auto it = c.request.query.find("cursor"); it != c.request.query.end()) {
    q.cursor = it->second;
  }
  for (const auto& [name, field] :
       {std::pair{"tenant", &q.tenant}, std::pair{"input_id", &q.input_id}}) {
    auto it = c.request.query.find(name);
    if (it == c.request.query.end()) continue;
    if (it->second.size() > kMaxSearchBytes) {
      return {ErrorResponse(400, "invalid_argument",
                            absl::StrCat(name, " is at most ", kMaxSearchBytes, " bytes long"),
                            name)};
    }
    *field = it->second;
  }
  for (const auto& [name, field] : {std::pair{"created_after", &q.created_after},
                                    std::pair{"created_before", &q.created_before}}) {
    QueryTime t = ReadQueryTime(c.request, name);
    if (t.error) return {*t.error};
    *field = t.value;
  }
  QueryInt limit = ReadQueryInt(c.request, "limit", 1, kMaxReadLimit);
  if (limit.error) return {*limit.error};
  if (limit.value) q.limit = static_cast<int>(*limit.value);
  absl::StatusOr<RunPage> page = engine->ListRuns(q);
  if (!page.ok()) return {StatusResponse(page.status())};
  return {JsonResponse(wire::RunPageToJson(*page).dump())};
}

// The run with its `step_counts` (of the revision it is in, read after it).
HandlerResult GetRun(Engine* engine, const Call& c) {
  absl::StatusOr<RunRecord> run = engine->GetRun(c.params[0]);
  if (!run.ok()) return {StatusResponse(run.status())};
  absl::StatusOr<std::vector<StepRecord>> steps = engine->ListSteps(run->id, run->revision);
  if (!steps.ok()) return {StatusResponse(steps.status())};
  nlohmann::json j = wire::RunToJson(*run);
  j["step_counts"] = wire::StepCountsToJson(*steps, run->revision);
  return {JsonResponse(j.dump())};
}

HandlerResult ListSteps(Engine* engine, const Call& c) {
  QueryInt revision = ReadQueryInt(c.request, "revision", 1, INT64_MAX);
  if (revision.error) return {*revision.error};
  absl::StatusOr<std::vector<StepRecord>> steps = engine->ListSteps(c.params[0], revision.value);
  if (!steps.ok()) return {StatusResponse(steps.status())};
  nlohmann::json out = nlohmann::json::array();
  for (const StepRecord& s : *steps) out.push_back(wire::StepToJson(s));
  return {JsonResponse(nlohmann::json{{"steps", std::move(out)}}.dump())};
}

// The run's external writes, each with the decision it carried out: the
// evidence reference 003 asks the decision records to hold.
HandlerResult ListWrites(Engine* engine, const Call& c) {
  absl::StatusOr<std::vector<WriteOperation>> writes = engine->ListWrites(c.params[0]);
  if (!writes.ok()) return {StatusResponse(writes.status())};
  nlohmann::json out = nlohmann::json::array();
  for (const WriteOperation& op : *writes) out.push_back(wire::WriteToJson(op));
  return {JsonResponse(nlohmann::json{{"writes", std::move(out)}}.dump())};
}

HandlerResult GetGate(Engine* engine, const Call& c) {
  absl::StatusOr<std::optional<PendingGate>> gate = engine->GetPendingGate(c.params[0]);
  if (!gate.ok()) return {StatusResponse(gate.status())};
  if (!gate->has_value()) {
    return {ErrorResponse(404, "no_pending_gate",
                          absl::StrCat("run ", c.params[0], " is not paused at an approval gate"))};
  }
  return {JsonResponse(wire::GateToJson(**gate).dump())};
}

// Where a stream resumes: ?after=N, or the Last-Event-ID header (a
// reconnect), which wins; both a non-negative integer (else 400).
QueryInt StreamResumePoint(const HttpRequest& request, bool sse) {
  QueryInt after = ReadQueryInt(request, "after", 0, INT64_MAX);
  if (after.error || !sse || !request.has_last_event_id) return after;
  return ParseInt(request.last_event_id, "Last-Event-ID", 0, INT64_MAX);
}

// JSON with ?after=N (and ?limit), or Server-Sent Events when the client
// accepts text/event-stream; Last-Event-ID (a reconnect) wins over ?after.
HandlerResult ListEvents(Engine* engine, const Call& c) {
  const bool sse = absl::StrContains(c.request.accept, "text/event-stream");
  QueryInt after = StreamResumePoint(c.request, sse);
  if (after.error) return {*after.error};
  const int64_t after_seq = after.value.value_or(0);
  if (sse) {
    absl::StatusOr<RunRecord> run = engine->GetRun(c.params[0]);
    if (!run.ok()) return {StatusResponse(run.status())};
    return {{}, StreamRequest{.run_id = c.params[0], .after_seq = after_seq}};
  }
  QueryInt limit = ReadQueryInt(c.request, "limit", 1, kMaxReadLimit);
  if (limit.error) return {*limit.error};
  absl::StatusOr<std::vector<Event>> events = engine->ListEvents(
      c.params[0], after_seq, static_cast<int>(limit.value.value_or(kMaxReadLimit)));
  if (!events.ok()) return {StatusResponse(events.status())};
  nlohmann::json out = nlohmann::json::array();
  for (const Event& e : *events) out.push_back(wire::EventToJson(e));
  return {JsonResponse(nlohmann::json{{"events", std::move(out)}}.dump())};
}

// Every run's status changes; resumed (Last-Event-ID or ?after) by the
// current state of the runs that changed since, within kChangesResumeWindow
// (sse.h).
HandlerResult WatchAllRuns(Engine*, const Call& c) {
  if (!absl::StrContains(c.request.accept, "text/event-stream")) {
    return {ErrorResponse(406, "not_acceptable",
                          "this route streams Server-Sent Events: send Accept: text/event-stream")};
  }
  // An id of this stream is a time of the store (unix microseconds).
  QueryInt after = StreamResumePoint(c.request, true);
  if (after.error) return {*after.error};
  StreamRequest stream{.all_runs = true};
  if (after.value) stream.changes_after = absl::FromUnixMicros(*after.value);
  return {{}, std::move(stream)};
}

// The reviewer is the caller's principal, never a body field. Refusals are
// wire::DecideRefusal's, the same `runloom mcp` sends.
HandlerResult Decide(Engine* engine, const Call& c) {
  ParsedBody b = ParseBody(c.request.body, {{"digest", FieldType::kString, true},
                                            {"decision", FieldType::kString, true},
                                            {"edited", FieldType::kAny},
                                            {"feedback", FieldType::kString},
                                            {"from_phase", FieldType::kString}});
  if (b.error) return {*b.error};
  DecisionRequest d;
  d.proposal_digest = b.value["digest"].get<std::string>();
  const std::string decision = b.value["decision"].get<std::string>();
  d.decision = ParseDecision(decision);
  if (!d.decision.has_value()) return {RefusalResponse(wire::UnknownDecisionRefusal(decision))};
  if (b.value.contains("edited")) d.edited_proposal = b.value["edited"];
  d.feedback = b.value.value("feedback", std::string());
  d.from_phase = b.value.value("from_phase", std::string());
  absl::StatusOr<RunRecord> run = engine->Decide(c.params[0], d, c.principal.name);
  if (std::optional<wire::Refusal> refused =
          wire::DecideRefusal(run.status(), c.params[0], d.decision)) {
    return {RefusalResponse(*refused)};
  }
  return {RunResponse(run)};
}

HandlerResult Cancel(Engine* engine, const Call& c) {
  ParsedBody b = ParseBody(c.request.body, {});
  if (b.error) return {*b.error};
  return {RunResponse(engine->Cancel(c.params[0], c.principal.name))};
}

HandlerResult Rerun(Engine* engine, const Call& c) {
  ParsedBody b = ParseBody(
      c.request.body, {{"from_phase", FieldType::kString, true}, {"feedback", FieldType::kString}});
  if (b.error) return {*b.error};
  const std::string phase = b.value["from_phase"].get<std::string>();
  if (phase.empty()) {
    return {ErrorResponse(400, "invalid_argument", "from_phase must name a phase", "from_phase")};
  }
  absl::StatusOr<RunRecord> run =
      engine->Rerun(c.params[0], phase, b.value.value("feedback", std::string()), c.principal.name);
  if (absl::IsInvalidArgument(run.status())) {
    return {
        ErrorResponse(400, "invalid_argument", std::string(run.status().message()), "from_phase")};
  }
  return {RunResponse(run)};
}

// Issue 23: a signal for the run's wait steps. The field a refusal names is
// the one the engine's message starts with ("name: ...", "payload: ...").
HandlerResult SendSignal(Engine* engine, const Call& c) {
  ParsedBody b = ParseBody(c.request.body,
                           {{"payload", FieldType::kAny}, {"idempotency_key", FieldType::kString}});
  if (b.error) return {*b.error};
  SignalRequest req;
  req.name = c.params[1];
  if (b.value.contains("payload")) req.payload = b.value["payload"];
  req.idempotency_key = b.value.value("idempotency_key", std::string());
  absl::StatusOr<SendSignalResult> sent = engine->Signal(c.params[0], req, c.principal.name);
  if (!sent.ok()) {
    const absl::Status& s = sent.status();
    if (absl::IsInvalidArgument(s)) {
      std::string field = "payload";
      for (const char* f : {"name", "idempotency_key", "payload"}) {
        if (absl::StartsWith(s.message(), absl::StrCat(f, ":"))) field = f;
      }
      return {ErrorResponse(400, "invalid_argument", std::string(s.message()), field)};
    }
    if (absl::IsFailedPrecondition(s)) {
      return {ErrorResponse(409, "finished", std::string(s.message()))};
    }
    return {StatusResponse(s)};
  }
  nlohmann::json out = wire::SignalToJson(sent->signal);
  out["created"] = sent->created;
  out["resolved"] = sent->resolved;
  return {JsonResponse(out.dump(), sent->created ? 201 : 200)};
}

HandlerResult ListSignals(Engine* engine, const Call& c) {
  absl::StatusOr<std::vector<SignalRecord>> signals = engine->ListSignals(c.params[0]);
  if (!signals.ok()) return {StatusResponse(signals.status())};
  nlohmann::json list = nlohmann::json::array();
  for (const SignalRecord& s : *signals) list.push_back(wire::SignalToJson(s));
  return {JsonResponse(nlohmann::json{{"signals", std::move(list)}}.dump())};
}

}  // namespace

std::vector<Route> RunRoutes(Engine* engine) {
  auto bind = [engine](HandlerResult (*fn)(Engine*, const Call&)) {
    return [engine, fn](const Call& c) { return fn(engine, c); };
  };
  constexpr const char* kRun = "/api/v1/runs/{id}";
  const Role read = RequiredRole(Operation::kRead);
  return {
      {"POST", "/api/v1/runs", RequiredRole(Operation::kStartRun), bind(StartRun)},
      {"GET", "/api/v1/runs", read, bind(ListRuns)},
      {"GET", kRun, read, bind(GetRun)},
      {"GET", absl::StrCat(kRun, "/steps"), read, bind(ListSteps)},
      {"GET", absl::StrCat(kRun, "/writes"), read, bind(ListWrites)},
      {"GET", absl::StrCat(kRun, "/gate"), read, bind(GetGate)},
      {"GET", absl::StrCat(kRun, "/events"), read, bind(ListEvents)},
      {"POST", absl::StrCat(kRun, "/decisions"), RequiredRole(Operation::kDecide), bind(Decide)},
      {"POST", absl::StrCat(kRun, "/cancel"), RequiredRole(Operation::kCancelRun), bind(Cancel)},
      {"POST", absl::StrCat(kRun, "/rerun"), RequiredRole(Operation::kRerunRun), bind(Rerun)},
      {"GET", absl::StrCat(kRun, "/signals"), read, bind(ListSignals)},
      {"POST", absl::StrCat(kRun, "/signals/{name}"), RequiredRole(Operation::kSignalRun), bind(SendSignal)},
      {"GET", "/api/v1/events", read, bind(WatchAllRuns)},
  };
}

}  // namespace runloom::api
