#include "workflow/internal/validate.h"

#include "core/status_macros.h"
#include "workflow/internal/names.h"
#include "workflow/internal/schedules.h"
#include "workflow/internal/stage_events.h"
#include "workflow/internal/template_scan.h"
#include "workflow/template.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <utility>

namespace runloom {
namespace workflow_internal {
namespace {

constexpr double kMinMultiplier = 1.0;
// The longest `concurrency.key` template (the rendered key has its own
// bound, kMaxConcurrencyKeyBytes, checked at admission).
constexpr size_t kMaxTemplateBytes = 1024;

// A C++-built step may list needs without setting explicit_needs; a
// non-empty list is explicit either way.
bool HasExplicitNeeds(const StepDef& s) { return s.explicit_needs || !s.needs.empty(); }

bool WholeMillis(absl::Duration d) { return d % absl::Milliseconds(1) == absl::ZeroDuration(); }

// Problems are found in document order; the first one ends validation, so
// every Check* returns a Status and callers propagate it with RETURN_IF_ERROR.
class Validator {
 public:
  Validator(const Workflow& wf, const LineLookup& line_of) : wf_(wf), line_of_(line_of) {}

  absl::Status Run() {
    if (!IsWorkflowName(wf_.name)) {
      return Fail({nullptr, {"name"}},
                  wf_.name.empty() ? "missing workflow name; add name: <name> at the top"
                                   : absl::StrCat("bad workflow name '", wf_.name,
                                                  "'; use lower-case letters, digits, '_' and "
                                                  "'-', starting with a letter"));
    }
    RUNLOOM_RETURN_IF_ERROR(CheckInputs());
    if (wf_.steps.empty()) {
      return Fail({nullptr, {"steps"}}, "the workflow has no steps; add a list under steps:");
    }
    RUNLOOM_RETURN_IF_ERROR(CollectIds(wf_.steps));
    RUNLOOM_RETURN_IF_ERROR(CheckOutcome());
    RUNLOOM_RETURN_IF_ERROR(CheckSteps(wf_.steps, /*in_loop=*/false));
    if (wf_.budget_micros.has_value() && *wf_.budget_micros < 0) {
      return Fail({nullptr, {"budget"}}, "budget must be 0 or more");
    }
    if (wf_.max_attempts < 1 || wf_.max_attempts > kMaxRunMaxAttempts) {
      return Fail({nullptr, {"max_attempts"}},
                  absl::StrCat("max_attempts is ", wf_.max_attempts, "; it must be from 1 to ",
                               kMaxRunMaxAttempts));
    }
    RUNLOOM_RETURN_IF_ERROR(CheckTenant());
    RUNLOOM_RETURN_IF_ERROR(CheckConcurrency());
    const FailAt fail = [this](const Location& at, const std::string& what) {
      return Fail(at, what);
    };
    RUNLOOM_RETURN_IF_ERROR(CheckStageEvents(wf_, fail));
    return CheckSchedules(wf_, fail);
  }

 private:
  // `concurrency:` and `priority:` (issue 23): the key is rendered at
  // admission, before any step ran, so it may reference declared inputs
  // that are not secret (the key is stored and shown in clear) and nothing
  // else.
  absl::Status CheckConcurrency() const {
    if (wf_.priority < 0 || wf_.priority > kMaxPriority) {
      return Fail({nullptr, {"priority"}}, absl::StrCat("priority is ", wf_.priority,
                                                        "; it must be from 0 to ", kMaxPriority));
    }
    if (!wf_.concurrency.has_value()) return absl::OkStatus();
    const ConcurrencyDef& c = *wf_.concurrency;
    if (c.limit < 1 || c.limit > kMaxConcurrencyLimit) {
      return Fail({nullptr, {"concurrency", "limit"}},
                  absl::StrCat("concurrency.limit is ", c.limit, "; it must be from 1 to ",
                               kMaxConcurrencyLimit));
    }
    const Location at{nullptr, {"concurrency", "key"}};
    if (c.key.empty() || c.key.size() > kMaxTemplateBytes) {
      return Fail(at, absl::StrCat("concurrency.key must be a template of 1 to ", kMaxTemplateBytes,
                                   " bytes, e.g. \"{{ inputs.tenant }}\""));
    }
    for (const std::string& ref : TemplateRefs(nlohmann::json(c.key))) {
      absl::StatusOr<Ref> r = ParseRef(ref);
      const InputDef* in = nullptr;
      if (r.ok() && r->root == "inputs" && !r->path.empty()) {
        auto it = std::find_if(wf_.inputs.begin(), wf_.inputs.end(),
                               [&](const InputDef& d) { return d.name == r->path[0]; });
        if (it != wf_.inputs.end()) in = &*it;
      }
      if (in == nullptr || in->secret) {
        return Fail(at, absl::StrCat("concurrency.key references '", ref,
                                     "'; it may reference only declared inputs that are not "
                                     "secret, e.g. \"{{ inputs.tenant }}\""));
      }
    }
    return absl::OkStatus();
  }

  // `tenant:` names a declared input that is not secret (the tenant is
  // kept in the ledger and shown by `runloom budgets`), of an id's type.
  absl::Status CheckTenant() const {
    if (wf_.tenant_input.empty()) return absl::OkStatus();
    const Location at{nullptr, {"tenant"}};
    auto in = std::find_if(wf_.inputs.begin(), wf_.inputs.end(),
                           [&](const InputDef& d) { return d.name == wf_.tenant_input; });
    if (in == wf_.inputs.end()) {
      return Fail(at, absl::StrCat("tenant names '", wf_.tenant_input,
                                   "', which is not a declared input; declare it under inputs:, "
                                   "e.g. team: {type: string}"));
    }
    if (in->secret) {
      return Fail(at, absl::StrCat("tenant names the secret input '", in->name,
                                   "'; tenants are stored and listed in clear, so name an input "
                                   "that is not secret"));
    }
    if (in->type != "string" && in->type != "integer") {
      return Fail(at, absl::StrCat("tenant names '", in->name, "' of type ", in->type,
                                   "; a tenant input must be a string or an integer"));
    }
    return absl::OkStatus();
  }

  absl::Status Fail(const Location& loc, const std::string& what) const {
    std::string where;
    const int line = line_of_ ? line_of_(loc) : 0;
    if (!wf_.source_path.empty()) {
      where = line > 0 ? absl::StrCat(wf_.source_path, ":", line) : wf_.source_path;
    } else {
      where = wf_.name.empty() ? "workflow" : wf_.name;
    }
    const std::string step =
        loc.step && !loc.step->id.empty() ? absl::StrCat("step '", loc.step->id, "': ") : "";
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", step, what));
  }

  absl::Status CheckInputs() {
    std::set<std::string> names;
    for (const InputDef& in : wf_.inputs) {
      const Location at{nullptr, {"inputs", in.name}};
      if (!IsInputName(in.name)) {
        return Fail(at, absl::StrCat("bad input name '", in.name,
                                     "'; use letters, digits and '_', not starting with a digit"));
      }
      if (!names.insert(in.name).second) {
        return Fail(at, absl::StrCat("input '", in.name, "' is declared twice; keep one"));
      }
      if (!IsInputType(in.type)) {
        return Fail({nullptr, {"inputs", in.name, "type"}},
                    absl::StrCat("input '", in.name, "' has unknown type '", in.type,
                                 "'; use one of ", absl::StrJoin(InputTypes(), ", ")));
      }
      for (size_t i = 0; i < in.allowed.size(); ++i) {
        if (!MatchesInputType(in.type, in.allowed[i])) {
          return Fail({nullptr, {"inputs", in.name, "enum", absl::StrCat(i)}},
                      absl::StrCat("input '", in.name, "': enum value ", DumpJson(in.allowed[i]),
                                   " is not a ", in.type, "; list only ", in.type, " values"));
        }
      }
      if (!in.default_value) {
        continue;
      }
      const Location def_at{nullptr, {"inputs", in.name, "default"}};
      if (in.secret) {
        return Fail(def_at, absl::StrCat("secret input '", in.name,
                                         "' has a default; secrets are never stored, so drop the "
                                         "default and pass the value when starting a run"));
      }
      if (!MatchesInputType(in.type, *in.default_value)) {
        return Fail(def_at,
                    absl::StrCat("input '", in.name, "': default ", DumpJson(*in.default_value),
                                 " is not a ", in.type, "; change the default or the type"));
      }
      if (!in.allowed.empty() &&
          std::find(in.allowed.begin(), in.allowed.end(), *in.default_value) == in.allowed.end()) {
        return Fail(def_at,
                    absl::StrCat("input '", in.name, "': default ", DumpJson(*in.default_value),
                                 " is not in its enum; pick one of the enum values"));
      }
    }
    return absl::OkStatus();
  }

  // Step ids are global so `steps.<id>` references are unambiguous.
  absl::Status CollectIds(const std::vector<StepDef>& steps) {
    for (const StepDef& s : steps) {
      if (!IsStepId(s.id)) {
        return Fail({&s, {"id"}}, s.id.empty()
                                      ? "a step has no id; add id: <name>"
                                      : absl::StrCat("bad step id '", s.id,
                                                     "'; use lower-case letters, digits and '_', "
                                                     "starting with a letter"));
      }
      auto [it, inserted] = ids_.emplace(s.id, &s);
      if (!inserted) {
        const int first = line_of_ ? line_of_({it->second, {"id"}}) : 0;
        return Fail({&s, {"id"}},
                    absl::StrCat("step id '", s.id, "' is already used",
                                 first > 0 ? absl::StrCat(" at line ", first) : "",
                                 "; step ids must be unique across the whole workflow, loop "
                                 "bodies and parallel branches included, so rename one"));
      }
      RUNLOOM_RETURN_IF_ERROR(CollectIds(s.body));
      for (const Branch& b : s.branches) {
        RUNLOOM_RETURN_IF_ERROR(CollectIds(b.steps));
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckOutcome() {
    const Location at{nullptr, {"outcome"}};
    absl::StatusOr<std::vector<TemplatePiece>> pieces = ScanTemplate(wf_.outcome);
    if (!pieces.ok()) {
      return Fail(at, absl::StrCat("outcome: ", pieces.status().message()));
    }
    bool has_ref = false;
    for (const TemplatePiece& p : *pieces) {
      if (p.is_ref) {
        has_ref = true;
        RUNLOOM_RETURN_IF_ERROR(CheckRef(p.text, at, /*in_loop=*/false, "outcome"));
      }
    }
    const std::string word(absl::StripAsciiWhitespace(absl::string_view(wf_.outcome)));
    if (!has_ref && !word.empty() && !IsOutcomeWord(word)) {
      return Fail(at, absl::StrCat("outcome '", word,
                                   "' is not approved, completed, rejected, unresolved or "
                                   "failed; write one of those or a template yielding one"));
    }
    return absl::OkStatus();
  }

  absl::Status CheckRef(const std::string& ref, const Location& at, bool in_loop,
                        const std::string& where) {
    absl::StatusOr<Ref> r = ParseRef(ref);
    if (!r.ok()) {
      return Fail(at, absl::StrCat(where, ": ", r.status().message()));
    }
    if (r->root == "inputs") {
      for (const InputDef& in : wf_.inputs) {
        if (in.name == r->path[0]) {
          return absl::OkStatus();
        }
      }
      std::vector<std::string> declared;
      for (const InputDef& in : wf_.inputs) {
        declared.push_back(in.name);
      }
      return Fail(
          at, absl::StrCat(where, ": '", ref, "' names undeclared input '", r->path[0],
                           "'; declare it under inputs:",
                           declared.empty()
                               ? " (none are declared)"
                               : absl::StrCat(" (declared: ", absl::StrJoin(declared, ", "), ")")));
    }
    if (r->root == "steps" && ids_.count(r->step_id) == 0) {
      return Fail(at, absl::StrCat(where, ": '", ref, "' names step '", r->step_id,
                                   "', which does not exist; use the id of a step in this "
                                   "workflow"));
    }
    if (r->root == "args" && tool_depth_ == 0) {
      return Fail(at, absl::StrCat(where, ": '", ref,
                                   "' is only defined in the step of an agent's tool (the "
                                   "arguments of the call); drop the reference here"));
    }
    if (r->root == "loop" && !in_loop) {
      return Fail(at, absl::StrCat(where, ": '", ref,
                                   "' is only defined inside a loop body; move the step into a "
                                   "loop or drop the reference"));
    }
    return absl::OkStatus();
  }

  absl::Status CheckTemplates(const nlohmann::json& v, Location at, bool in_loop) {
    if (v.is_string()) {
      absl::StatusOr<std::vector<TemplatePiece>> pieces = ScanTemplate(v.get<std::string>());
      const std::string where = at.field.empty() ? "config" : absl::StrJoin(at.field, ".");
      if (!pieces.ok()) {
        return Fail(at, absl::StrCat(where, ": ", pieces.status().message()));
      }
      for (const TemplatePiece& p : *pieces) {
        if (p.is_ref) {
          RUNLOOM_RETURN_IF_ERROR(CheckRef(p.text, at, in_loop, where));
        }
      }
      return absl::OkStatus();
    }
    if (v.is_object()) {
      for (auto it = v.begin(); it != v.end(); ++it) {
        Location child = at;
        child.field.push_back(it.key());
        RUNLOOM_RETURN_IF_ERROR(CheckTemplates(it.value(), std::move(child), in_loop));
      }
    } else if (v.is_array()) {
      for (size_t i = 0; i < v.size(); ++i) {
        Location child = at;
        child.field.push_back(absl::StrCat(i));
        RUNLOOM_RETURN_IF_ERROR(CheckTemplates(v[i], std::move(child), in_loop));
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckCondition(const StepDef& s, const Condition& c, const std::string& key,
                              bool in_loop) {
    const Location at{&s, {key}};
    if (c.op != "" && c.op != "==" && c.op != "!=") {
      return Fail(at, absl::StrCat(key, ": unknown operator '", c.op, "'; use == or !="));
    }
    return CheckRef(c.ref, at, in_loop, key);
  }

  absl::Status CheckDuration(const StepDef& s, absl::Duration d,
                             const std::vector<std::string>& key, bool allow_zero) {
    const std::string name = absl::StrJoin(key, ".");
    if (d < absl::ZeroDuration() || (!allow_zero && d == absl::ZeroDuration())) {
      return Fail({&s, key},
                  absl::StrCat(name, " must be ", allow_zero ? "zero or more" : "positive",
                               "; write e.g. 30s"));
    }
    if (!WholeMillis(d)) {
      return Fail({&s, key}, absl::StrCat(name, " is finer than a millisecond; round it to ms"));
    }
    return absl::OkStatus();
  }

  absl::Status CheckRetry(const StepDef& s) {
    const RetryPolicy& r = s.retry;
    if (r.max_attempts < 1) {
      return Fail({&s, {"retry", "max_attempts"}},
                  absl::StrCat("retry.max_attempts is ", r.max_attempts,
                               "; it counts the first try too, so use 1 (no retry) or more"));
    }
    if (!(r.multiplier >= kMinMultiplier)) {
      return Fail({&s, {"retry", "multiplier"}}, absl::StrCat("retry.multiplier is ", r.multiplier,
                                                              "; use 1 (constant delay) or more"));
    }
    RUNLOOM_RETURN_IF_ERROR(CheckDuration(s, r.initial_delay, {"retry", "initial_delay"}, true));
    RUNLOOM_RETURN_IF_ERROR(CheckDuration(s, r.max_delay, {"retry", "max_delay"}, true));
    if (r.max_delay < r.initial_delay) {
      return Fail({&s, {"retry", "max_delay"}},
                  "retry.max_delay is below retry.initial_delay; raise max_delay");
    }
    return absl::OkStatus();
  }

  absl::Status CheckNoStructure(const StepDef& s) {
    if (!s.body.empty() || s.max_iterations != 0 || s.until) {
      return Fail({&s, {"kind"}}, absl::StrCat("a ", s.kind,
                                               " step has a loop body, max_iterations or until; "
                                               "set kind: loop or drop them"));
    }
    if (!s.branches.empty() || s.deadline) {
      return Fail({&s, {"kind"}}, absl::StrCat("a ", s.kind,
                                               " step has branches or a deadline; set kind: "
                                               "parallel or drop them"));
    }
    return absl::OkStatus();
  }

  absl::Status CheckNoConfig(const StepDef& s, const std::string& allowed) {
    if (s.config.is_object() && s.config.empty()) {
      return absl::OkStatus();
    }
    const std::string key = s.config.is_object() ? s.config.begin().key() : "";
    return Fail({&s, {key}},
                absl::StrCat("a ", s.kind, " step does not take '", key, "'; it takes ", allowed,
                             " plus the common step keys, so remove it"));
  }

  absl::Status CheckLoop(const StepDef& s) {
    RUNLOOM_RETURN_IF_ERROR(CheckNoConfig(s, "max_iterations, until and body"));
    if (!s.branches.empty() || s.deadline) {
      return Fail({&s, {"branches"}},
                  "a loop step has branches or a deadline; those belong to kind: parallel");
    }
    if (s.max_iterations < 1) {
      return Fail({&s, {"max_iterations"}},
                  "a loop needs max_iterations of 1 or more; add e.g. max_iterations: 3");
    }
    if (s.body.empty()) {
      return Fail({&s, {"body"}}, "a loop needs a non-empty body; list its steps under body:");
    }
    if (s.until) {
      RUNLOOM_RETURN_IF_ERROR(CheckCondition(s, *s.until, "until", /*in_loop=*/true));
    }
    return CheckSteps(s.body, /*in_loop=*/true);
  }

  absl::Status CheckParallel(const StepDef& s, bool in_loop) {
    RUNLOOM_RETURN_IF_ERROR(CheckNoConfig(s, "branches and deadline"));
    if (!s.body.empty() || s.max_iterations != 0 || s.until) {
      return Fail(
          {&s, {"body"}},
          "a parallel step has a body, max_iterations or until; those belong to kind: loop");
    }
    if (s.deadline) {
      RUNLOOM_RETURN_IF_ERROR(CheckDuration(s, *s.deadline, {"deadline"}, false));
    }
    if (s.branches.empty()) {
      return Fail({&s, {"branches"}},
                  "a parallel step needs branches; list them under branches: with steps: each");
    }
    std::set<std::string> names;
    for (size_t i = 0; i < s.branches.size(); ++i) {
      const Branch& b = s.branches[i];
      const std::string name = BranchName(b, i);
      const Location at{&s, {"branches", absl::StrCat(i)}};
      if (!IsBranchName(name)) {
        return Fail(at, absl::StrCat("bad branch name '", name,
                                     "'; use lower-case letters, digits and '_'"));
      }
      if (!names.insert(name).second) {
        return Fail(at, absl::StrCat("branch name '", name, "' is used twice; rename one"));
      }
      if (b.steps.empty()) {
        return Fail(at, absl::StrCat("branch '", name,
                                     "' has no steps; list them under steps: or drop the branch"));
      }
      RUNLOOM_RETURN_IF_ERROR(CheckSteps(b.steps, in_loop));
    }
    return absl::OkStatus();
  }

  absl::Status CheckStep(const StepDef& s, bool in_loop) {
    if (s.kind.empty()) {
      return Fail({&s, {"id"}},
                  "missing kind; add kind: exec (or noop, sleep, fail, llm, loop, "
                  "parallel, or a registered kind)");
    }
    RUNLOOM_RETURN_IF_ERROR(CheckRetry(s));
    if (s.timeout && *s.timeout != absl::InfiniteDuration()) {  // `none`: unbounded
      RUNLOOM_RETURN_IF_ERROR(CheckDuration(s, *s.timeout, {"timeout"}, false));
    }
    if (s.when) {
      RUNLOOM_RETURN_IF_ERROR(CheckCondition(s, *s.when, "when", in_loop));
    }
    if (s.kind == kLoop) {
      return CheckLoop(s);
    }
    if (s.kind == kParallel) {
      return CheckParallel(s, in_loop);
    }
    if (s.kind == kAgent) {
      RUNLOOM_RETURN_IF_ERROR(CheckTools(s, in_loop));
    } else if (!s.tools.empty()) {
      return Fail({&s, {"tools"}}, absl::StrCat("a ", s.kind,
                                                " step has tools; only kind: agent takes tools:"));
    }
    if (!s.config.is_object()) {
      return Fail({&s, {}}, "config must be a JSON object of kind-specific keys");
    }
    RUNLOOM_RETURN_IF_ERROR(CheckNoStructure(s));
    return CheckTemplates(s.config, Location{&s, {}}, in_loop);
  }

  // An agent's tools: named once each, described, with an object schema,
  // each carried out by one leaf step (exec, http, llm, run, approval, ...)
  // that may read the call's arguments as `args`.
  absl::Status CheckTools(const StepDef& s, bool in_loop) {
    if (s.tools.size() > kMaxAgentTools) {
      return Fail({&s, {"tools"}}, absl::StrCat("an agent takes at most ", kMaxAgentTools,
                                                " tools; this one lists ", s.tools.size()));
    }
    std::set<std::string> names;
    for (size_t i = 0; i < s.tools.size(); ++i) {
      const ToolDef& t = s.tools[i];
      const Location at{&s, {"tools", absl::StrCat(i)}};
      if (!IsStepId(t.name)) {
        return Fail(at, absl::StrCat("bad tool name '", t.name,
                                     "'; use lower-case letters, digits and '_', starting with "
                                     "a letter"));
      }
      if (!names.insert(t.name).second) {
        return Fail(at, absl::StrCat("tool name '", t.name, "' is used twice; rename one"));
      }
      if (t.description.empty()) {
        return Fail(at, absl::StrCat("tool '", t.name,
                                     "' has no description; say what it does (the model reads "
                                     "it to choose)"));
      }
      if (!t.parameters.is_object() || t.parameters.value("type", "") != "object") {
        return Fail(at, absl::StrCat("tool '", t.name,
                                     "': parameters must be a JSON Schema of type object, e.g. "
                                     "{type: object, properties: {query: {type: string}}, "
                                     "required: [query]}"));
      }
      const StepDef& step = t.step;
      if (step.kind == kLoop || step.kind == kParallel || step.kind == kAgent ||
          step.kind == kWait) {
        return Fail({&step, {"kind"}},
                    absl::StrCat("tool '", t.name, "': a tool's step cannot be kind ", step.kind,
                                 "; use a step that carries one call out (exec, http, llm, run, "
                                 "approval, ...)"));
      }
      if (HasExplicitNeeds(step)) {
        return Fail({&step, {"needs"}}, absl::StrCat("tool '", t.name,
                                                     "': a tool's step has no siblings to need; "
                                                     "remove needs:"));
      }
      ++tool_depth_;
      absl::Status checked = CheckStep(step, in_loop);
      --tool_depth_;
      RUNLOOM_RETURN_IF_ERROR(checked);
    }
    return absl::OkStatus();
  }

  absl::Status CheckSteps(const std::vector<StepDef>& steps, bool in_loop) {
    for (const StepDef& s : steps) {
      RUNLOOM_RETURN_IF_ERROR(CheckStep(s, in_loop));
    }
    return CheckNeeds(steps);
  }

  absl::Status CheckNeeds(const std::vector<StepDef>& siblings) {
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < siblings.size(); ++i) {
      index[siblings[i].id] = i;
    }
    // deps[i]: indexes step i waits for, explicit or the implicit previous sibling.
    std::vector<std::vector<size_t>> deps(siblings.size());
    for (size_t i = 0; i < siblings.size(); ++i) {
      const StepDef& s = siblings[i];
      if (!HasExplicitNeeds(s)) {
        if (i > 0) {
          deps[i].push_back(i - 1);
        }
        continue;
      }
      std::set<std::string> seen;
      for (size_t n = 0; n < s.needs.size(); ++n) {
        const std::string& need = s.needs[n];
        const Location at{&s, {"needs", absl::StrCat(n)}};
        if (need == s.id) {
          return Fail(at, "a step cannot need itself; remove it from needs");
        }
        if (!seen.insert(need).second) {
          return Fail(at, absl::StrCat("needs lists '", need, "' twice; keep one"));
        }
        auto it = index.find(need);
        if (it == index.end()) {
          return Fail(at, ids_.count(need) != 0
                              ? absl::StrCat("needs '", need,
                                             "', which is not in the same step list; needs may "
                                             "only name sibling steps (the same loop body or "
                                             "branch)")
                              : absl::StrCat("needs '", need,
                                             "', which does not exist; use the id of a sibling "
                                             "step"));
        }
        deps[i].push_back(it->second);
      }
    }
    return CheckCycles(siblings, deps);
  }

  absl::Status CheckCycles(const std::vector<StepDef>& siblings,
                           const std::vector<std::vector<size_t>>& deps) {
    enum class Mark { kNew, kActive, kDone };
    std::vector<Mark> mark(siblings.size(), Mark::kNew);
    std::vector<size_t> stack;
    std::vector<size_t> cycle;
    std::function<bool(size_t)> visit = [&](size_t i) {
      mark[i] = Mark::kActive;
      stack.push_back(i);
      for (size_t d : deps[i]) {
        if (mark[d] == Mark::kActive) {
          auto from = std::find(stack.begin(), stack.end(), d);
          cycle.assign(from, stack.end());
          cycle.push_back(d);
          return true;
        }
        if (mark[d] == Mark::kNew && visit(d)) {
          return true;
        }
      }
      stack.pop_back();
      mark[i] = Mark::kDone;
      return false;
    };
    for (size_t i = 0; i < siblings.size(); ++i) {
      if (mark[i] == Mark::kNew && visit(i)) {
        std::vector<std::string> names;
        bool implicit = false;
        for (size_t k = 0; k < cycle.size(); ++k) {
          names.push_back(siblings[cycle[k]].id);
          implicit = implicit || (k + 1 < cycle.size() && !HasExplicitNeeds(siblings[cycle[k]]));
        }
        return Fail({&siblings[cycle[0]], {"needs"}},
                    absl::StrCat("needs form a cycle: ", absl::StrJoin(names, " -> "),
                                 "; remove one of these needs",
                                 implicit ? " (a step without needs: waits for the step listed "
                                            "before it; write needs: [] to lift that)"
                                          : ""));
      }
    }
    return absl::OkStatus();
  }

  const Workflow& wf_;
  const LineLookup& line_of_;
  std::map<std::string, const StepDef*> ids_;
  int tool_depth_ = 0;  // > 0 while checking the step of an agent's tool
};

}  // namespace

absl::Status Validate(const Workflow& wf, const LineLookup& line_of) {
  return Validator(wf, line_of).Run();
}

}  // namespace workflow_internal

absl::Status ValidateWorkflow(const Workflow& wf) {
  return workflow_internal::Validate(wf, [](const workflow_internal::Location& loc) {
    return loc.step != nullptr ? loc.step->line : 0;
  });
}

}  // namespace runloom
