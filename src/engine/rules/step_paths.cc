#include "engine/rules/step_paths.h"

#include "absl/strings/str_cat.h"

namespace runloom::engine_internal {

std::string TopLevelId(const std::string& path) { return path.substr(0, path.find_first_of("[/")); }

int FirstStepOfPhase(const Workflow& wf, const std::string& phase) {
  for (size_t i = 0; i < wf.steps.size(); ++i) {
    if (wf.steps[i].phase == phase) return static_cast<int>(i);
  }
  return -1;
}

std::string ChildPath(const std::string& prefix, const std::string& id) {
  return prefix.empty() ? id : absl::StrCat(prefix, "/", id);
}

std::string StepLocation(const Workflow& wf, const StepDef& step) {
  std::string file = wf.source_path.empty() ? wf.name : wf.source_path;
  return step.line > 0 ? absl::StrCat(file, ":", step.line, ": ") : absl::StrCat(file, ": ");
}

}  // namespace runloom::engine_internal
