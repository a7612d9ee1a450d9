// /api/v1/schedules (issue 23): list and read (viewer), create, pause,
// resume and delete (operator). The engine checks every field
// (Engine::CreateSchedule); a refusal is a 400 naming it.
#include "api/api.h"
#include "api/body.h"
#include "api/errors.h"
#include "api/query.h"
#include "auth/operations.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "schedule/policy.h"
#include "wire/wire.h"

namespace runloom::api {
namespace {

HandlerResult ListSchedules(Engine* engine, const Call& c) {
  QueryInt limit = ReadQueryInt(c.request, "limit", 1, kMaxReadLimit);
  if (limit.error) return {*limit.error};
  auto after = c.request.query.find("after");
  const std::string after_id = after == c.request.query.end() ? "" : after->second;
  if (after_id.size() > kMaxScheduleIdBytes) {
    return {ErrorResponse(400, "invalid_argument", "after: not a schedule id", "after")};
  }
  absl::StatusOr<std::vector<ScheduleRecord>> page =
      engine->ListSchedules(after_id, static_cast<int>(limit.value.value_or(100)));
  if (!page.ok()) return {StatusResponse(page.status())};
  nlohmann::json out = nlohmann::json::array();
  for (const ScheduleRecord& s : *page) out.push_back(wire::ScheduleToJson(s));
  return {JsonResponse(nlohmann::json{{"schedules", std::move(out)}}.dump())};
}

HandlerResult GetSchedule(Engine* engine, const Call& c) {
  absl::StatusOr<ScheduleRecord> s = engine->GetSchedule(c.params[0]);
  if (!s.ok()) return {StatusResponse(s.status())};
  return {JsonResponse(wire::ScheduleToJson(*s).dump())};
}

HandlerResult CreateSchedule(Engine* engine, const Call& c) {
  ParsedBody b = ParseBody(c.request.body, {{"id", FieldType::kString, true},
                                            {"workflow", FieldType::kString, true},
                                            {"cron", FieldType::kString, true},
                                            {"timezone", FieldType::kString},
                                            {"inputs", FieldType::kObject},
                                            {"overlap", FieldType::kString},
                                            {"catch_up", FieldType::kString}});
  if (b.error) return {*b.error};
  ScheduleRequest req;
  req.id = b.value["id"];
  req.workflow = b.value["workflow"];
  req.cron = b.value["cron"];
  req.timezone = b.value.value("timezone", std::string("UTC"));
  if (b.value.contains("inputs")) req.inputs = b.value["inputs"];
  req.overlap = b.value.value("overlap", std::string("skip"));
  req.catch_up = b.value.value("catch_up", std::string("latest"));
  absl::StatusOr<ScheduleRecord> s = engine->CreateSchedule(req);
  if (!s.ok()) {
    const absl::Status& st = s.status();
    if (absl::IsInvalidArgument(st) || absl::IsNotFound(st)) {
      std::string field = "inputs";
      for (const char* f : {"id", "cron", "timezone", "overlap", "catch_up", "workflow"}) {
        if (absl::StartsWith(st.message(), absl::StrCat(f, ":"))) field = f;
      }
      return {ErrorResponse(400, "invalid_argument", std::string(st.message()), field)};
    }
    return {StatusResponse(st)};
  }
  return {JsonResponse(wire::ScheduleToJson(*s).dump(), 201)};
}

HandlerResult PauseSchedule(Engine* engine, const Call& c) {
  ParsedBody b = ParseBody(c.request.body, {});
  if (b.error) return {*b.error};
  absl::StatusOr<ScheduleRecord> s = engine->PauseSchedule(c.params[0]);
  if (!s.ok()) return {StatusResponse(s.status())};
  return {JsonResponse(wire::ScheduleToJson(*s).dump())};
}

HandlerResult ResumeSchedule(Engine* engine, const Call& c) {
  ParsedBody b = ParseBody(c.request.body, {});
  if (b.error) return {*b.error};
  absl::StatusOr<ScheduleRecord> s = engine->ResumeSchedule(c.params[0]);
  if (!s.ok()) return {StatusResponse(s.status())};
  return {JsonResponse(wire::ScheduleToJson(*s).dump())};
}

HandlerResult DeleteSchedule(Engine* engine, const Call& c) {
  absl::Status s = engine->DeleteSchedule(c.params[0]);
  if (!s.ok()) return {StatusResponse(s)};
  return {JsonResponse(nlohmann::json{{"deleted", c.params[0]}}.dump())};
}

}  // namespace

std::vector<Route> ScheduleRoutes(Engine* engine) {
  auto bind = [engine](HandlerResult (*fn)(Engine*, const Call&)) {
    return [engine, fn](const Call& c) { return fn(engine, c); };
  };
  const Role read = RequiredRole(Operation::kRead);
  const Role manage = RequiredRole(Operation::kManageSchedules);
  return {
      {"GET", "/api/v1/schedules", read, bind(ListSchedules)},
      {"POST", "/api/v1/schedules", manage, bind(CreateSchedule)},
      {"GET", "/api/v1/schedules/{id}", read, bind(GetSchedule)},
      {"DELETE", "/api/v1/schedules/{id}", manage, bind(DeleteSchedule)},
      {"POST", "/api/v1/schedules/{id}/pause", manage, bind(PauseSchedule)},
      {"POST", "/api/v1/schedules/{id}/resume", manage, bind(ResumeSchedule)},
  };
}

}  // namespace runloom::api
