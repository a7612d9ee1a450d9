// The wire fixtures of the web UI's emulator (schemas/wire/fixtures, issue
// 22.7; schedules.json, issue 23; budgets.json and llm_caps.json, issue 25)
// have the shape the server answers with: for each fixture, the same
// route of a real server over HTTP (or, for a list a fresh server holds
// nothing of, the serializer that route uses) gives an object with exactly
// the same keys, all the way down, and values of the same JSON types. So
// the emulator shows the UI the exact wire format, and a change to it
// fails here until the fixture follows.
#include "testing/api_test_util.h"

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "wire/wire.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#ifndef RUNLOOM_SOURCE_DIR
#error "api_test needs RUNLOOM_SOURCE_DIR (src/api/CMakeLists.txt)"
#endif

namespace runloom::api::testing {
namespace {

using nlohmann::json;

// Values that hold a workflow's or a person's data, not the wire format:
// only their JSON type is compared.
const std::set<std::string>& FreeForm() {
  static const std::set<std::string> kFree = {"inputs", "output", "proposal", "response",
                                              "definition"};
  return kFree;
}

// null matches any type: a nullable field is null in one and set in the other.
void CompareShape(const json& fixture, const json& real, const std::string& where,
                  std::vector<std::string>* diffs) {
  if (fixture.is_null() || real.is_null()) return;
  if (fixture.type() != real.type() && !(fixture.is_number_integer() && real.is_number_integer())) {
    diffs->push_back(absl::StrCat(where, ": the fixture has ", fixture.type_name(), ", the server ",
                                  real.type_name()));
    return;
  }
  if (fixture.is_object()) {
    for (const auto& [k, v] : fixture.items()) {
      if (!real.contains(k)) {
        diffs->push_back(absl::StrCat(where, ".", k, ": in the fixture, not from the server"));
      } else if (!FreeForm().contains(k)) {
        CompareShape(v, real[k], absl::StrCat(where, ".", k), diffs);
      } else if (!v.is_null() && !real[k].is_null() && v.type() != real[k].type()) {
        diffs->push_back(absl::StrCat(where, ".", k, ": the fixture has ", v.type_name(),
                                      ", the server ", real[k].type_name()));
      }
    }
    for (const auto& [k, v] : real.items()) {
      if (!fixture.contains(k)) {
        diffs->push_back(absl::StrCat(where, ".", k, ": from the server, not in the fixture"));
      }
    }
  } else if (fixture.is_array() && !real.empty()) {
    for (size_t i = 0; i < fixture.size(); ++i) {
      CompareShape(fixture[i], real[0], absl::StrCat(where, "[", i, "]"), diffs);
    }
  }
}

json ReadFixture(const std::filesystem::path& file) {
  std::ifstream in(file);
  return json::parse(in, nullptr, /*allow_exceptions=*/false);
}

TEST_F(ApiTest, WireFixturesHaveTheShapeTheServerAnswersWith) {
  SseReader changes(port(), "/api/v1/events", "viewer-token");
  changes.ReadEvents(1, std::chrono::milliseconds(100));  // the headers are in
  RunRecord run = StartAndAwait("gated");
  ASSERT_EQ(run.status, RunStatus::kPaused);
  const std::string base = "/api/v1/runs/" + run.id;

  ASSERT_OK(engine()->store()->SetTenantBudget("acme", 50'000'000));
  std::map<std::string, json> real;
  for (const auto& [name, target] :
       std::map<std::string, std::string>{{"me", "/api/v1/me"},
                                          {"workflows", "/api/v1/workflows"},
                                          {"workflow", "/api/v1/workflows/gated?version=1"},
                                          {"runs", "/api/v1/runs"},
                                          {"run", base},
                                          {"steps", base + "/steps"},
                                          {"gate", base + "/gate"},
                                          {"writes", base + "/writes"},
                                          {"dead_letters", "/api/v1/dead-letters"},
                                          {"schedules", "/api/v1/schedules"},
                                          {"budgets", "/api/v1/budgets"},
                                          {"llm_caps", "/api/v1/llm/caps"}}) {
    ClientResponse r = Get(target);
    ASSERT_EQ(r.status, 200) << target << ": " << r.body;
    real[name] = r.json();
  }
  // A fresh server has no writes, dead letters or schedules: their elements
  // come from the serializers those routes use.
  WriteOperation op{.key = {run.id, "publish", "publish_summary", "approve@1:sha256:00"},
                    .state = WriteState::kDone,
                    .idempotency_key = "rl-00",
                    .request_digest = "sha256:00",
                    .result = WriteResult{.http_status = 200, .response = json::object()},
                    .created_at = absl::Now(),
                    .finished_at = absl::Now()};
  ASSERT_TRUE(real["writes"]["writes"].empty());
  real["writes"]["writes"].push_back(wire::WriteToJson(op));
  ASSERT_TRUE(real["dead_letters"]["dead_letters"].empty());
  real["dead_letters"]["dead_letters"].push_back(
      wire::DeadLetterToJson({.id = "1", .message_id = "1", .run_id = run.id, .at = absl::Now()}));
  ASSERT_TRUE(real["schedules"]["schedules"].empty());
  real["schedules"]["schedules"].push_back(
      wire::ScheduleToJson({.id = "s", .workflow = "gated", .cron = "@daily",
                            .next_fire_at = absl::Now(), .last_run_id = run.id,
                            .last_fired_at = absl::Now(), .created_at = absl::Now(),
                            .updated_at = absl::Now()}));
  // The test's engine's caps have seen no change yet: one with a history
  // comes first (the element the fixture's are compared with).
  ASSERT_TRUE(real["llm_caps"]["caps"].is_array());
  real["llm_caps"]["caps"].insert(
      real["llm_caps"]["caps"].begin(),
      wire::LlmCapToJson({.provider = "p",
                          .cap = 2,
                          .history = {{.at = absl::Now(),
                                       .cap = 2,
                                       .reason = "aimd 2, telemetry -, pool -, cpu -"}}},
                         kMaxLlmCapHistory));
  for (int i = 0; i < 50 && !real.contains("run_change"); ++i) {
    for (const SseEvent& e : changes.ReadEvents(1, std::chrono::milliseconds(100))) {
      if (e.event == "run") real["run_change"] = json::parse(e.data);
    }
  }
  ASSERT_TRUE(real.contains("run_change")) << "no change on /api/v1/events";

  const std::filesystem::path dir =
      std::filesystem::path(RUNLOOM_SOURCE_DIR) / "schemas/wire/fixtures";
  std::set<std::string> seen;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    const std::string name = entry.path().stem().string();
    seen.insert(name);
    json fixture = ReadFixture(entry.path());
    ASSERT_FALSE(fixture.is_discarded()) << entry.path() << " is not JSON";
    ASSERT_TRUE(real.contains(name)) << entry.path() << ": no route of the server answers it; "
                                     << "add it to this test";
    std::vector<std::string> diffs;
    CompareShape(fixture, real[name], name, &diffs);
    EXPECT_TRUE(diffs.empty()) << entry.path() << " differs from the server:\n  "
                               << absl::StrJoin(diffs, "\n  ");
  }
  for (const auto& [name, value] : real) {
    EXPECT_TRUE(seen.contains(name)) << "schemas/wire/fixtures/" << name << ".json is missing";
  }
}

}  // namespace
}  // namespace runloom::api::testing
