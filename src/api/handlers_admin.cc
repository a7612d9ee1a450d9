// Health, metrics, workflows, dead letters and the admin reset.
#include "runloom/mutex.h"

#include "api/api.h"
#include "api/body.h"
#include "api/errors.h"
#include "api/query.h"
#include "auth/operations.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "wire/wire.h"

#include <algorithm>
#include <initializer_list>

namespace runloom::api {
namespace {

HandlerResult Healthz(Engine*, const Call&) { return {JsonResponse(R"({"status":"ok"})")}; }

// Ready when the store answers a read.
HandlerResult Readyz(Engine* engine, const Call&) {
  absl::StatusOr<RunPage> page = engine->ListRuns({.limit = 1});
  if (!page.ok()) {
    return {ErrorResponse(503, "unavailable",
                          absl::StrCat("store unreachable: ", page.status().message()))};
  }
  return {JsonResponse(R"({"status":"ready"})")};
}

HandlerResult Metrics(prometheus::Registry* registry) {
  HttpResponse r{.content_type = "text/plain; version=0.0.4"};
  if (registry != nullptr) r.body = prometheus::TextSerializer().Serialize(registry->Collect());
  return {r};
}

HandlerResult Reset(Engine* engine, const Call& c) {
  ParsedBody b = ParseBody(c.request.body, {});
  if (b.error) return {*b.error};
  absl::StatusOr<int> n = engine->ResetAll(c.principal.name);
  if (!n.ok()) return {StatusResponse(n.status())};
  return {JsonResponse(nlohmann::json{{"cancelled", *n}}.dump())};
}

HandlerResult ListWorkflows(Engine* engine, const Call&) {
  absl::StatusOr<std::vector<WorkflowVersion>> all = engine->ListWorkflows();
  if (!all.ok()) return {StatusResponse(all.status())};
  nlohmann::json out = nlohmann::json::array();
  for (const WorkflowVersion& v : *all) out.push_back(wire::WorkflowVersionToJson(v, false));
  return {JsonResponse(nlohmann::json{{"workflows", std::move(out)}}.dump())};
}

HandlerResult GetWorkflow(Engine* engine, const Call& c) {
  QueryInt version = ReadQueryInt(c.request, "version", 0, INT64_MAX);
  if (version.error) return {*version.error};
  absl::StatusOr<WorkflowVersion> v = engine->GetWorkflow(c.params[0], version.value.value_or(0));
  if (!v.ok()) return {StatusResponse(v.status())};
  return {JsonResponse(wire::WorkflowVersionToJson(*v, true).dump())};
}

// True when some version of `wf.name` has `wf`'s definition already.
absl::StatusOr<bool> IsRegistered(Engine* engine, const Workflow& wf) {
  absl::StatusOr<std::vector<WorkflowVersion>> all = engine->ListWorkflows();
  if (!all.ok()) return all.status();
  const std::string digest = WorkflowDigest(wf);
  for (const WorkflowVersion& v : *all) {
    if (v.name == wf.name && v.digest == digest) return true;
  }
  return false;
}

// The first step (depth first) whose kind is not in `allowed`; loop and
// parallel only group steps, an agent's tools are steps.
const StepDef* FirstDisallowed(const std::vector<StepDef>& steps,
                               const std::set<std::string>& allowed) {
  for (const StepDef& s : steps) {
    if (s.kind != "loop" && s.kind != "parallel" && !allowed.contains(s.kind)) return &s;
    if (const StepDef* in = FirstDisallowed(s.body, allowed)) return in;
    for (const Branch& b : s.branches) {
      if (const StepDef* in = FirstDisallowed(b.steps, allowed)) return in;
    }
    for (const ToolDef& t : s.tools) {
      if (const StepDef* in = FirstDisallowed({t.step}, allowed)) return in;
    }
  }
  return nullptr;
}

// {"yaml": "..."} through the loader and its limits (runloom/limits.h), then
// the kinds this server allows (403 step_kind_not_allowed), then the step
// kinds. 201 with a new version; 200 with the existing one when this
// definition is registered already (nothing written). Registrations through
// this server are serialized, so the answer is exact here; two servers on one
// database registering the same new YAML at the same moment may both say 201.
HandlerResult RegisterWorkflow(Engine* engine, const std::optional<std::set<std::string>>& allow,
                               const Call& c) {
  ParsedBody b = ParseBody(c.request.body, {{"yaml", FieldType::kString, true}});
  if (b.error) return {*b.error};
  absl::StatusOr<Workflow> wf = LoadWorkflowYaml(b.value["yaml"].get<std::string>(), "yaml");
  if (!wf.ok()) {
    return {ErrorResponse(400, "invalid_workflow", std::string(wf.status().message()), "yaml")};
  }
  if (allow.has_value()) {
    if (const StepDef* s = FirstDisallowed(wf->steps, *allow)) {
      return {ErrorResponse(
          403, "step_kind_not_allowed",
          absl::StrCat("yaml:", s->line, ": step '", s->id, "' is of kind '", s->kind,
                       "', which this server does not take in a workflow registered over HTTP "
                       "(it allows: ",
                       allow->empty() ? std::string("none") : absl::StrJoin(*allow, ", "),
                       "); register it with the runloom command on the server, or ask its "
                       "operator to add the kind to `runloom serve --allow-kinds`"),
          "yaml")};
    }
  }
  static runloom::Mutex* const registering = new runloom::Mutex();
  runloom::MutexLock l(registering);
  absl::StatusOr<bool> existed = IsRegistered(engine, *wf);
  if (!existed.ok()) return {StatusResponse(existed.status())};
  absl::StatusOr<WorkflowVersion> v = engine->RegisterWorkflow(*wf);
  if (absl::IsInvalidArgument(v.status())) {
    return {ErrorResponse(400, "invalid_workflow", std::string(v.status().message()), "yaml")};
  }
  if (!v.ok()) return {StatusResponse(v.status())};
  return {JsonResponse(wire::WorkflowVersionToJson(*v, false).dump(), *existed ? 200 : 201)};
}

HandlerResult ListDeadLetters(Engine* engine, const Call& c) {
  QueryInt limit = ReadQueryInt(c.request, "limit", 1, kMaxReadLimit);
  if (limit.error) return {*limit.error};
  absl::StatusOr<std::vector<DeadLetter>> all =
      engine->ListDeadLetters(static_cast<int>(limit.value.value_or(100)));
  if (!all.ok()) return {StatusResponse(all.status())};
  nlohmann::json out = nlohmann::json::array();
  for (const DeadLetter& d : *all) out.push_back(wire::DeadLetterToJson(d));
  return {JsonResponse(nlohmann::json{{"dead_letters", std::move(out)}}.dump())};
}

HandlerResult Redrive(Engine* engine, const Call& c) {
  ParsedBody b = ParseBody(c.request.body, {});
  if (b.error) return {*b.error};
  absl::Status s = engine->RedriveDeadLetter(c.params[0]);
  if (!s.ok()) return {StatusResponse(s)};
  return {JsonResponse(nlohmann::json{{"redriven", c.params[0]}}.dump())};
}

// A 400 naming the first query parameter not in `known`: these read-only
// routes take few parameters, and a misspelt filter must not silently show
// everything.
std::optional<HttpResponse> UnknownQueryParameter(const HttpRequest& request,
                                                  std::initializer_list<const char*> known) {
  constexpr size_t kShownNameBytes = 64;
  for (const auto& [name, value] : request.query) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    std::string allowed = known.size() == 0 ? std::string("none") : absl::StrJoin(known, ", ");
    return ErrorResponse(
        400, "invalid_argument",
        absl::StrCat("unknown query parameter '", absl::CHexEscape(name.substr(0, kShownNameBytes)),
                     "'; this route takes: ", allowed),
        name.substr(0, kShownNameBytes));
  }
  return std::nullopt;
}

// A name filter: 1 to kMaxFilterBytes bytes (else a 400 naming it).
std::optional<HttpResponse> CheckFilter(const HttpRequest& request, const char* name) {
  constexpr size_t kMaxFilterBytes = 256;
  auto it = request.query.find(name);
  if (it == request.query.end()) return std::nullopt;
  if (it->second.empty() || it->second.size() > kMaxFilterBytes) {
    return ErrorResponse(400, "invalid_argument",
                         absl::StrCat(name, " must be 1 to ", kMaxFilterBytes, " bytes long"),
                         name);
  }
  return std::nullopt;
}

// Issue 25: every tenant's budget (limit, spent, reserved, left), or the one
// ?tenant= names (an empty list when it has no row).
HandlerResult ListBudgets(Engine* engine, const Call& c) {
  if (auto bad = UnknownQueryParameter(c.request, {"tenant"})) return {*bad};
  if (auto bad = CheckFilter(c.request, "tenant")) return {*bad};
  absl::StatusOr<std::vector<TenantBudget>> all = engine->ListTenantBudgets();
  if (!all.ok()) return {StatusResponse(all.status())};
  auto only = c.request.query.find("tenant");
  nlohmann::json out = nlohmann::json::array();
  for (const TenantBudget& t : *all) {
    if (only != c.request.query.end() && t.tenant != only->second) continue;
    out.push_back(wire::TenantBudgetToJson(t));
  }
  return {JsonResponse(nlohmann::json{{"budgets", std::move(out)}}.dump())};
}

// Issue 25: the llm concurrency caps this process runs, each with its
// recent changes (per process, in memory, at most kMaxLlmCapHistory;
// ?history=N keeps the newest N, ?provider= one cap).
HandlerResult ListLlmCaps(Engine* engine, const Call& c) {
  if (auto bad = UnknownQueryParameter(c.request, {"provider", "history"})) return {*bad};
  if (auto bad = CheckFilter(c.request, "provider")) return {*bad};
  QueryInt history = ReadQueryInt(c.request, "history", 0, kMaxLlmCapHistory);
  if (history.error) return {*history.error};
  auto only = c.request.query.find("provider");
  nlohmann::json out = nlohmann::json::array();
  for (const LlmCapInfo& cap : engine->ListLlmCaps()) {
    if (only != c.request.query.end() && cap.provider != only->second) continue;
    out.push_back(
        wire::LlmCapToJson(cap, static_cast<size_t>(history.value.value_or(kMaxLlmCapHistory))));
  }
  return {JsonResponse(
      nlohmann::json{{"caps", std::move(out)}, {"history_limit", kMaxLlmCapHistory}}.dump())};
}

}  // namespace

std::vector<Route> AdminRoutes(Engine* engine, prometheus::Registry* metrics,
                               std::optional<std::set<std::string>> allow_kinds) {
  auto bind = [engine](HandlerResult (*fn)(Engine*, const Call&)) {
    return [engine, fn](const Call& c) { return fn(engine, c); };
  };
  const Role read = RequiredRole(Operation::kRead);
  return {
      {"GET", "/healthz", std::nullopt, bind(Healthz)},
      {"GET", "/readyz", std::nullopt, bind(Readyz)},
      {"GET", "/metrics", read, [metrics](const Call&) { return Metrics(metrics); }},
      {"POST", "/api/v1/admin/reset", RequiredRole(Operation::kResetAll), bind(Reset)},
      {"GET", "/api/v1/workflows", read, bind(ListWorkflows)},
      {"POST", "/api/v1/workflows", RequiredRole(Operation::kRegisterWorkflow),
       [engine, allow = std::move(allow_kinds)](const Call& c) {
         return RegisterWorkflow(engine, allow, c);
       }},
      {"GET", "/api/v1/workflows/{name}", read, bind(GetWorkflow)},
      {"GET", "/api/v1/dead-letters", read, bind(ListDeadLetters)},
      {"POST", "/api/v1/dead-letters/{id}/redrive", RequiredRole(Operation::kRedriveDeadLetter), bind(Redrive)},
      {"GET", "/api/v1/budgets", read, bind(ListBudgets)},
      {"GET", "/api/v1/llm/caps", read, bind(ListLlmCaps)},
  };
}

}  // namespace runloom::api
