// The workflow side of declared schedules (ScheduleDef, `schedules:`):
// reading the list and checking each entry. Storing them is the engine's
// business (src/engine/schedules.h, DeclaredSchedules).
#pragma once

#include "runloom/workflow.h"

#include "workflow/internal/validate.h"

#include "absl/status/statusor.h"
#include "yaml-cpp/yaml.h"

#include <string>
#include <vector>

namespace runloom::workflow_internal {

// Reads the top-level `schedules:` node of `source` (undefined or null: no
// schedules): a list of at most kMaxWorkflowSchedules mappings of name, cron
// (required), timezone, inputs (a mapping), overlap and catch_up. Each
// timezone is loaded here (LoadScheduleTimeZone), so a file naming a zone
// this machine does not know is refused where it is loaded, while a
// workflow read back from the catalog (ValidateWorkflow) is not refused by
// a worker without that zone. kInvalidArgument "<source>:<line>:
// schedules[<i>]...: <what>; <how to fix it>".
absl::StatusOr<std::vector<ScheduleDef>> ParseSchedules(const YAML::Node& n,
                                                        const std::string& source);

// Checks wf.schedules: at most kMaxWorkflowSchedules, each name well formed
// and distinct (an unnamed entry is named by its index), its id at most 128
// characters, the cron expression parsed, the policies known, the inputs
// accepted by the workflow's inputs (secret ones as references). The first
// problem goes to `fail`, at {"schedules", "<i>", "<field>"}.
absl::Status CheckSchedules(const Workflow& wf, const FailAt& fail);

}  // namespace runloom::workflow_internal
