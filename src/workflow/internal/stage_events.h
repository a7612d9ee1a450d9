// The workflow side of stage events (StageEventsDef, StepDef::stage): reading
// the `stage_events:` block and checking it and every step's `stage:`.
#pragma once

#include "runloom/workflow.h"

#include "workflow/internal/validate.h"

#include "absl/status/statusor.h"
#include "yaml-cpp/yaml.h"

#include <functional>
#include <optional>
#include <string>

namespace runloom::workflow_internal {

// Reads the top-level `stage_events:` node of `source` (undefined or null:
// nullopt). kInvalidArgument "<source>:<line>: ..." for a node that is not
// a mapping of document_id, tenant_id and node_id to text.
absl::StatusOr<std::optional<StageEventsDef>> ParseStageEvents(const YAML::Node& n,
                                                               const std::string& source);

// Checks the stage_events block (each id names a declared input, not secret,
// of type string or integer) and every step's stage (in kStepStages, on a
// leaf step, with a stage_events block). The first problem goes to `fail`.
absl::Status CheckStageEvents(const Workflow& wf, const FailAt& fail);

}  // namespace runloom::workflow_internal
