// `runloom schedule create|list|pause|resume|delete`: runs of a catalog
// workflow at the times a cron expression names (docs/operations.md,
// "Schedules"). Every `serve` and `worker` on the database fires them.
#include "runloom/events.h"

#include "cli/cli_common.h"
#include "cli/commands.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "wire/wire.h"

#include <iostream>

namespace runloom::cli {
namespace {

void PrintSchedule(const ScheduleRecord& s, const char* what) {
  std::cout << "schedule " << s.id << " " << what << ": " << s.workflow << " at '" << s.cron
            << "' (" << s.timezone << ")"
            << (s.paused ? ", paused" : absl::StrCat(", next ", FormatEventTime(s.next_fire_at)))
            << "\n";
}

}  // namespace

int ScheduleCreateCommand(const ScheduleFlags& f) {
  absl::StatusOr<nlohmann::json> inputs = ParseInputFlags(f.inputs, f.input_file);
  if (!inputs.ok()) return BadInput(std::string(inputs.status().message()));
  auto engine = OpenEngine(f.common);
  if (!engine.ok()) return DbOpenFailure(f.common, engine.status());
  ScheduleRequest req{.id = f.id,
                      .workflow = f.workflow,
                      .cron = f.cron,
                      .timezone = f.timezone,
                      .inputs = *std::move(inputs),
                      .overlap = f.overlap,
                      .catch_up = f.catch_up};
  absl::StatusOr<ScheduleRecord> s = (*engine)->CreateSchedule(req);
  if (absl::IsAlreadyExists(s.status())) {
    return BadInput(absl::StrCat(s.status().message(), "; delete it first (runloom schedule delete ",
                                 ShellQuote(f.id), BackendArgs(f.common), ")"));
  }
  if (!s.ok()) return ExitForError(s.status());
  if (f.json) {
    std::cout << wire::ScheduleToJson(*s).dump() << "\n";
  } else {
    PrintSchedule(*s, "created");
  }
  return kExitCompleted;
}

int ScheduleListCommand(const ScheduleFlags& f) {
  auto engine = OpenEngine(f.common);
  if (!engine.ok()) return DbOpenFailure(f.common, engine.status());
  nlohmann::json out = {{"schedules", nlohmann::json::array()}};
  std::vector<ScheduleRecord> all;
  for (std::string after;;) {
    absl::StatusOr<std::vector<ScheduleRecord>> page = (*engine)->ListSchedules(after, 1000);
    if (!page.ok()) return ExitForError(page.status());
    if (page->empty()) break;
    after = page->back().id;
    all.insert(all.end(), page->begin(), page->end());
  }
  if (f.json) {
    for (const ScheduleRecord& s : all) out["schedules"].push_back(wire::ScheduleToJson(s));
    std::cout << out.dump(2) << "\n";
    return kExitCompleted;
  }
  if (all.empty()) {
    std::cout << "no schedules; create one with: runloom schedule create ID --workflow NAME "
                 "--cron EXPR"
              << BackendArgs(f.common) << "\n";
    return kExitCompleted;
  }
  constexpr char kRow[] = "%-24s  %-16s  %-16s  %-16s  %-6s  %-27s  %s\n";
  std::cout << absl::StrFormat(kRow, "ID", "WORKFLOW", "CRON", "TIMEZONE", "STATE", "NEXT",
                               "LAST RUN");
  for (const ScheduleRecord& s : all) {
    std::cout << absl::StrFormat(kRow, s.id, s.workflow, s.cron, s.timezone,
                                 s.paused ? "paused" : "active", FormatEventTime(s.next_fire_at),
                                 s.last_run_id.empty() ? "-" : s.last_run_id);
  }
  return kExitCompleted;
}

int ScheduleChangeCommand(const ScheduleFlags& f, const std::string& action) {
  auto engine = OpenEngine(f.common);
  if (!engine.ok()) return DbOpenFailure(f.common, engine.status());
  if (action == "delete") {
    absl::Status s = (*engine)->DeleteSchedule(f.id);
    if (!s.ok()) return ExitForError(s);
    std::cout << "schedule " << f.id << " deleted; the runs it started are left as they are\n";
    return kExitCompleted;
  }
  absl::StatusOr<ScheduleRecord> s = action == "pause" ? (*engine)->PauseSchedule(f.id)
                                                       : (*engine)->ResumeSchedule(f.id);
  if (!s.ok()) return ExitForError(s.status());
  if (f.json) {
    std::cout << wire::ScheduleToJson(*s).dump() << "\n";
  } else {
    PrintSchedule(*s, action == "pause" ? "paused" : "resumed");
  }
  return kExitCompleted;
}

}  // namespace runloom::cli
