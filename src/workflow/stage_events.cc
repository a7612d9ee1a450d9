#include "workflow/internal/stage_events.h"

#include "core/status_macros.h"
#include "workflow/internal/names.h"
#include "workflow/internal/yaml_json.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <array>
#include <utility>

namespace runloom::workflow_internal {
namespace {

constexpr char kExample[] =
    "e.g. stage_events: {document_id: doc_id, tenant_id: tenant, node_id: node}";

// The three keys, and where each goes.
std::array<std::pair<const char*, std::string StageEventsDef::*>, 3> Fields() {
  return {{{"document_id", &StageEventsDef::document_id},
           {"tenant_id", &StageEventsDef::tenant_id},
           {"node_id", &StageEventsDef::node_id}}};
}

bool IsStepStage(const std::string& stage) {
  return std::find_if(std::begin(kStepStages), std::end(kStepStages),
                      [&](const char* s) { return stage == s; }) != std::end(kStepStages);
}

absl::Status CheckStepStages(const Workflow& wf, const std::vector<StepDef>& steps,
                             const FailAt& fail) {
  for (const StepDef& s : steps) {
    if (s.stage.empty() && !s.success_stage.empty()) {
      return fail(Location{&s, {"stage"}},
                  absl::StrCat("success stage '", s.success_stage,
                               "' without a stage: a second stage needs a first (stage: "
                               "[pending, processing])"));
    }
    if (!s.stage.empty()) {
      const Location at{&s, {"stage"}};
      for (const std::string& stage : {s.stage, s.success_stage}) {
        if (!stage.empty() && !IsStepStage(stage)) {
          return fail(at, absl::StrCat("unknown stage '", stage, "'; a step reports one of ",
                                       absl::StrJoin(kStepStages, ", "),
                                       " (completed and failed are the run's own)"));
        }
      }
      if (s.kind == kLoop || s.kind == kParallel) {
        return fail(at, absl::StrCat("a ", s.kind,
                                     " step does not report a stage; put stage: on a step "
                                     "inside it"));
      }
      if (!wf.stage_events) {
        return fail(at, absl::StrCat("stage: needs a top-level stage_events: block naming the "
                                     "inputs that identify the run (",
                                     kExample, ")"));
      }
    }
    RUNLOOM_RETURN_IF_ERROR(CheckStepStages(wf, s.body, fail));
    for (const Branch& b : s.branches) RUNLOOM_RETURN_IF_ERROR(CheckStepStages(wf, b.steps, fail));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::optional<StageEventsDef>> ParseStageEvents(const YAML::Node& n,
                                                               const std::string& source) {
  if (!n.IsDefined() || n.IsNull()) return std::optional<StageEventsDef>();
  if (!n.IsMap()) {
    return ErrorAt(source, n, absl::StrCat("stage_events must be a mapping; ", kExample));
  }
  StageEventsDef def;
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string key = it->first.Scalar();
    bool known = false;
    for (const auto& [name, field] : Fields()) {
      if (key != name) continue;
      known = true;
      if (!it->second.IsScalar() || it->second.Scalar().empty()) {
        return ErrorAt(source, it->second,
                       absl::StrCat("stage_events.", key, " must name an input; ", kExample));
      }
      def.*field = it->second.Scalar();
    }
    if (!known) {
      return ErrorAt(source, it->first,
                     absl::StrCat("stage_events does not take '", key,
                                  "'; it takes document_id, tenant_id and node_id"));
    }
  }
  return std::optional<StageEventsDef>(std::move(def));
}

absl::Status CheckStageEvents(const Workflow& wf, const FailAt& fail) {
  if (wf.stage_events) {
    for (const auto& [key, field] : Fields()) {
      const std::string& name = (*wf.stage_events).*field;
      const Location at{nullptr, {"stage_events", key}};
      if (name.empty()) {
        return fail(at, absl::StrCat("stage_events.", key, " is missing; ", kExample));
      }
      auto in = std::find_if(wf.inputs.begin(), wf.inputs.end(),
                             [&](const InputDef& d) { return d.name == name; });
      if (in == wf.inputs.end()) {
        return fail(at, absl::StrCat("stage_events.", key, " names '", name,
                                     "', which is not a declared input; declare it under "
                                     "inputs:"));
      }
      if (in->secret) {
        return fail(at, absl::StrCat("stage_events.", key, " names the secret input '", name,
                                     "'; events are published in clear, so name an input that "
                                     "is not secret"));
      }
      if (in->type != "string" && in->type != "integer") {
        return fail(at, absl::StrCat("stage_events.", key, " names '", name, "' of type ", in->type,
                                     "; an id input must be a string or an integer"));
      }
    }
  }
  return CheckStepStages(wf, wf.steps, fail);
}

}  // namespace runloom::workflow_internal
