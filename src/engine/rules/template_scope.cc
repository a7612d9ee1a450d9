#include "engine/rules/template_scope.h"

#include "core/status_macros.h"
#include "engine/rules/run_context.h"
#include "workflow/template.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace runloom::engine_internal {

const StepResult* Scope::Find(const std::string& id) const {
  for (const Scope* s = this; s != nullptr; s = s->parent) {
    auto it = s->results.find(id);
    if (it != s->results.end()) return &it->second;
  }
  return nullptr;
}

int Scope::LoopIteration() const {
  for (const Scope* s = this; s != nullptr; s = s->parent) {
    if (s->loop_iteration > 0) return s->loop_iteration;
  }
  return 0;
}

const nlohmann::json* Scope::Args() const {
  for (const Scope* s = this; s != nullptr; s = s->parent) {
    if (s->args != nullptr) return s->args;
  }
  return nullptr;
}

absl::StatusOr<nlohmann::json> ResolveRef(const std::string& ref, const Scope& scope,
                                          const RunRecord& run, const nlohmann::json& secrets) {
  RUNLOOM_ASSIGN_OR_RETURN(Ref r, ParseRef(ref));
  if (r.root == "inputs") {
    if (!r.path.empty() && secrets.contains(r.path[0])) {
      auto v = JsonAtPath(secrets, r.path);
      if (v) return *v;
    }
    auto v = JsonAtPath(run.inputs, r.path);
    if (!v) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", absl::StrJoin(r.path, "."), "' has no value in this run",
          " (a secret input given as a value exists only in the process that started the run;"
          " give it as secret://NAME and any worker resolves it)"));
    }
    return *v;
  }
  if (r.root == "run") {
    const RunContext context = ContextOf(run);
    nlohmann::json run_json = {{"id", run.id},
                               {"revision", run.revision},
                               {"entry", ToString(run.entry)},
                               {"feedback", context.feedback},
                               {"rerun_from", context.rerun_from}};
    auto v = JsonAtPath(run_json, r.path);
    if (!v) return absl::InvalidArgumentError(absl::StrCat("unknown reference '", ref, "'"));
    return *v;
  }
  if (r.root == "loop") {
    return nlohmann::json(scope.LoopIteration());
  }
  if (r.root == "args") {
    const nlohmann::json* args = scope.Args();
    if (args == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", ref, "' is only defined in the step of an agent's tool"));
    }
    auto v = JsonAtPath(*args, r.path);
    if (!v) return nlohmann::json(nullptr);  // an optional argument not given reads as null
    return *v;
  }
  if (r.root == "steps") {
    const StepResult* res = scope.Find(r.step_id);
    if (res == nullptr) {
      // Not run yet at this point (a loop's first round reading the editor's
      // notes, a step on another path): null, and status "pending".
      if (r.attr == "status") return nlohmann::json("pending");
      return nlohmann::json(nullptr);
    }
    if (r.attr == "status") {
      return nlohmann::json(std::string(ToString(res->state)));
    }
    if (r.attr == "error") return nlohmann::json(res->error);
    auto v = JsonAtPath(res->output, r.path);
    if (!v) return nlohmann::json(nullptr);  // a missing field reads as null
    return *v;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown reference '", ref, "'"));
}

}  // namespace runloom::engine_internal
