// The workflow side of declared schedules: `schedules:` read from YAML, each
// entry checked (every error names the file, line, entry and field), and the
// canonical form (absent = the digest a workflow had before the key existed).
#include "runloom/workflow.h"

#include "testing/status_matchers.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <string>

namespace runloom {
namespace {

using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kHead[] = R"(name: report
inputs:
  region: {type: string, enum: [eu, us]}
  pages: {type: integer, default: 1}
  token: {type: string, secret: true}
steps:
  - {id: build, kind: noop}
)";

absl::StatusOr<Workflow> LoadWithSchedules(const std::string& schedules) {
  return LoadWorkflowYaml(absl::StrCat(kHead, schedules), "report.yaml");
}

TEST(DeclaredSchedules, LoadsEntriesWithTheDefaultsOfScheduleCreate) {
  auto wf = LoadWithSchedules(R"(schedules:
  - cron: "*/5 * * * *"
    timezone: Europe/Paris
    inputs: {region: eu, pages: 3}
    overlap: allow
    catch_up: all
  - {name: nightly, cron: "0 2 * * *", inputs: {token: "secret://REPORT_TOKEN"}}
)");
  ASSERT_OK(wf);
  ASSERT_EQ(wf->schedules.size(), 2u);
  const ScheduleDef& a = wf->schedules[0];
  EXPECT_EQ(a.name, "");
  EXPECT_EQ(a.cron, "*/5 * * * *");
  EXPECT_EQ(a.timezone, "Europe/Paris");
  EXPECT_EQ(a.inputs, (nlohmann::json{{"region", "eu"}, {"pages", 3}}));
  EXPECT_EQ(a.overlap, "allow");
  EXPECT_EQ(a.catch_up, "all");
  const ScheduleDef& b = wf->schedules[1];
  EXPECT_EQ(b.timezone, "UTC");
  EXPECT_EQ(b.overlap, "skip");
  EXPECT_EQ(b.catch_up, "latest");
  EXPECT_EQ(DeclaredScheduleId(wf->name, DeclaredScheduleName(a, 0)), "workflow:report:0");
  EXPECT_EQ(DeclaredScheduleId(wf->name, DeclaredScheduleName(b, 1)), "workflow:report:nightly");
}

// Each bad entry is refused at its own line, naming the entry and field.
TEST(DeclaredSchedules, EachErrorNamesTheLineTheEntryAndTheField) {
  struct Case {
    std::string schedules;
    std::string want;
  };
  // kHead has 7 lines: `schedules:` is line 8, the first entry line 9.
  const Case cases[] = {
      {"schedules: {cron: \"@daily\"}\n", "report.yaml:8: schedules must be a list"},
      {"schedules:\n  - \"@daily\"\n", "report.yaml:9: schedules[0] must be a mapping"},
      {"schedules:\n  - {timezone: UTC}\n", "report.yaml:9: schedules[0]: cron is missing"},
      {"schedules:\n  - {cron: \"@daily\", every: 5}\n",
       "report.yaml:9: schedules[0] does not take 'every'"},
      {"schedules:\n  - {cron: [1, 2]}\n", "report.yaml:9: schedules[0]: cron must be text"},
      {"schedules:\n  - {cron: \"@daily\"}\n  - name: x\n    cron: \"61 * * * *\"\n",
       "report.yaml:11: schedules[1] 'x': cron: "},
      {"schedules:\n  - cron: \"@daily\"\n    timezone: Europe/Pariss\n",
       "report.yaml:10: schedules[0]: timezone: time zone 'Europe/Pariss' is unknown"},
      {"schedules:\n  - cron: \"@daily\"\n    timezone: ../etc/passwd\n",
       "report.yaml:10: schedules[0]: timezone: "},
      {"schedules:\n  - cron: \"@daily\"\n    overlap: often\n",
       "report.yaml:10: schedules[0]: overlap: 'often'; allowed: skip, allow, cancel"},
      {"schedules:\n  - cron: \"@daily\"\n    catch_up: some\n",
       "report.yaml:10: schedules[0]: catch_up: 'some'; allowed: none, latest, all"},
      {"schedules:\n  - cron: \"@daily\"\n    inputs: {colour: red}\n",
       "report.yaml:10: schedules[0]: inputs: input 'colour'"},
      {"schedules:\n  - cron: \"@daily\"\n    inputs: {region: mars}\n",
       "report.yaml:10: schedules[0]: inputs: input 'region'"},
      {"schedules:\n  - cron: \"@daily\"\n    inputs: [a]\n",
       "report.yaml:10: schedules[0]: inputs must be a mapping"},
      {"schedules:\n  - cron: \"@daily\"\n    inputs: {token: hunter2}\n",
       "report.yaml:10: schedules[0]: inputs.token: is secret"},
      {"schedules:\n  - {name: Nightly, cron: \"@daily\"}\n",
       "report.yaml:9: schedules[0] 'Nightly': bad name"},
      {"schedules:\n  - {cron: \"@daily\"}\n  - {name: \"0\", cron: \"@hourly\"}\n",
       "report.yaml:10: schedules[1] '0': the name '0' is taken by schedules[0]"},
      {absl::StrCat("schedules:\n  - {name: ", std::string(64, 'n'), ", cron: \"@daily\"}\n"),
       ""},  // a 64-character name fits: workflow:report:<64> is 80
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.schedules);
    absl::StatusOr<Workflow> wf = LoadWithSchedules(c.schedules);
    if (c.want.empty()) {
      EXPECT_OK(wf);
      continue;
    }
    EXPECT_THAT(wf, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.want)));
  }
}

TEST(DeclaredSchedules, AtMostTwentyEntries) {
  std::string list = "schedules:\n";
  for (size_t i = 0; i <= kMaxWorkflowSchedules; ++i) list += "  - {cron: \"@daily\"}\n";
  EXPECT_THAT(LoadWithSchedules(list),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("report.yaml:9: schedules lists 21 entries; a "
                                 "workflow declares at most 20")));
  list.resize(list.rfind("  - "));
  EXPECT_OK(LoadWithSchedules(list));
}

TEST(DeclaredSchedules, AnIdTooLongForTheStoreIsRefused) {
  const std::string name(120, 'w');
  auto wf =
      LoadWorkflowYaml(absl::StrCat("name: ", name, "\nsteps: [{id: a, kind: noop}]\nschedules:\n",
                                    "  - {name: nightly, cron: \"@daily\"}\n"),
                       "long.yaml");
  EXPECT_THAT(wf, StatusIs(absl::StatusCode::kInvalidArgument,
                           HasSubstr("long.yaml:4: schedules[0] 'nightly': its schedule id")));
}

TEST(DeclaredSchedules, CxxBuiltWorkflowsAreCheckedToo) {
  auto wf = LoadWithSchedules("");
  ASSERT_OK(wf);
  wf->source_path.clear();
  wf->schedules.push_back(ScheduleDef{.cron = "@daily", .catch_up = "sometimes"});
  EXPECT_THAT(ValidateWorkflow(*wf),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("report: schedules[0]: catch_up: 'sometimes'")));
  wf->schedules.back().catch_up = "none";
  EXPECT_OK(ValidateWorkflow(*wf));
}

TEST(DeclaredSchedules, CanonicalFormRoundTripsAndChangesTheDigest) {
  auto without = LoadWithSchedules("");
  auto with = LoadWithSchedules("schedules:\n  - {cron: \"@daily\", inputs: {region: us}}\n");
  ASSERT_OK(without);
  ASSERT_OK(with);
  EXPECT_FALSE(CanonicalWorkflow(*without).contains("schedules"));
  EXPECT_NE(WorkflowDigest(*without), WorkflowDigest(*with));
  const nlohmann::json canonical = CanonicalWorkflow(*with);
  EXPECT_EQ(canonical["schedules"][0]["name"], "0");  // the index, written out
  EXPECT_EQ(canonical["schedules"][0]["timezone"], "UTC");
  auto rebuilt = WorkflowFromCanonical(canonical);
  ASSERT_OK(rebuilt);
  ASSERT_EQ(rebuilt->schedules.size(), 1u);
  EXPECT_EQ(rebuilt->schedules[0].inputs, (nlohmann::json{{"region", "us"}}));
  EXPECT_EQ(WorkflowDigest(*rebuilt), WorkflowDigest(*with));
  // Naming an unnamed entry by its index is the same definition.
  auto named =
      LoadWithSchedules("schedules:\n  - {name: \"0\", cron: \"@daily\", inputs: {region: us}}\n");
  ASSERT_OK(named);
  EXPECT_EQ(WorkflowDigest(*named), WorkflowDigest(*with));
}

}  // namespace
}  // namespace runloom
