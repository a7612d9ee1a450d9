// JSON forms of runs, steps and workflow versions for `--json` output.
#pragma once

#include "runloom/run.h"

#include "nlohmann/json.hpp"

namespace runloom::cli {

nlohmann::json RunToJson(const RunRecord& run);
nlohmann::json StepToJson(const StepRecord& step);
nlohmann::json WorkflowVersionToJson(const WorkflowVersion& v, bool with_definition);

}  // namespace runloom::cli
