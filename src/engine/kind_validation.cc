// Kind validation (ValidateStepKinds, runloom/engine.h): every leaf step's
// kind is registered and accepts its config; approval steps are checked by
// the approval gate's rules; loops and parallel branches are walked.
#include "runloom/engine.h"

#include "core/status_macros.h"
#include "engine/run/agent_step.h"
#include "engine/run/approval_gate.h"
#include "engine/run/child_run.h"
#include "engine/run/signal_wait.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <string>
#include <vector>

namespace runloom {
namespace {

// "file:line: " for messages about a step.
std::string Where(const Workflow& wf, const StepDef& step) {
  std::string file = wf.source_path.empty() ? wf.name : wf.source_path;
  return step.line > 0 ? absl::StrCat(file, ":", step.line, ": ") : absl::StrCat(file, ": ");
}

std::string KindList(const StepRegistry& registry) {
  return absl::StrJoin(KnownStepKinds(registry), ", ");
}

}  // namespace

std::vector<std::string> KnownStepKinds(const StepRegistry& registry) {
  std::vector<std::string> names = registry.Names();
  names.insert(names.end(), {"agent", "approval", "loop", "parallel", "run", "wait"});
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

absl::Status ValidateStepList(const Workflow& wf, const std::vector<StepDef>& steps,
                              const StepRegistry& registry, bool in_parallel = false) {
  for (const StepDef& step : steps) {
    if (step.kind == "loop") {
      RUNLOOM_RETURN_IF_ERROR(ValidateStepList(wf, step.body, registry, in_parallel));
      continue;
    }
    if (step.kind == "parallel") {
      for (const Branch& b : step.branches) {
        RUNLOOM_RETURN_IF_ERROR(ValidateStepList(wf, b.steps, registry, true));
      }
      continue;
    }
    if (step.kind == "agent") {
      if (absl::Status s = engine_internal::ValidateAgentStep(step, registry); !s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(Where(wf, step), "step '", step.id, "': ", s.message()));
      }
      for (const ToolDef& tool : step.tools) {
        RUNLOOM_RETURN_IF_ERROR(ValidateStepList(wf, {tool.step}, registry, in_parallel));
      }
      continue;
    }
    if (step.kind == "approval") {
      RUNLOOM_RETURN_IF_ERROR(engine_internal::ValidateApprovalStep(wf, step, in_parallel));
      continue;
    }
    if (step.kind == "wait") {
      RUNLOOM_RETURN_IF_ERROR(engine_internal::ValidateWaitStep(wf, step, in_parallel));
      continue;
    }
    if (step.kind == "run") {
      RUNLOOM_RETURN_IF_ERROR(engine_internal::ValidateChildStep(wf, step, in_parallel));
      continue;
    }
    std::shared_ptr<StepKind> kind = registry.Find(step.kind);
    if (kind == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(Where(wf, step), "step '", step.id,
                                                     "' has unknown kind '", step.kind,
                                                     "'; use one of ", KindList(registry)));
    }
    absl::Status s = kind->Validate(step);
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(wf, step), "step '", step.id, "': ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateStepKinds(const Workflow& wf, const StepRegistry& registry) {
  return ValidateStepList(wf, wf.steps, registry);
}

}  // namespace runloom
