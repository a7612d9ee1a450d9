// YAML -> Workflow. The loader checks the shape of each node as it reads it
// (types, known keys, durations, condition syntax) and reports the node's own
// line; cross-references (ids, needs, templates) are left to the validator,
// which it runs with a line lookup into the same YAML tree. The format is
// described in docs/formats/workflow-yaml.md.
#include "runloom/budget_ledger.h"
#include "runloom/workflow.h"

#include "core/bounded_json.h"
#include "core/duration.h"
#include "core/status_macros.h"
#include "workflow/internal/names.h"
#include "workflow/internal/schedules.h"
#include "workflow/internal/stage_events.h"
#include "workflow/internal/validate.h"
#include "workflow/internal/yaml_bounds.h"
#include "workflow/internal/yaml_json.h"
#include "workflow/template.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "yaml-cpp/yaml.h"

#include <climits>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

namespace runloom {
namespace {

using workflow_internal::kAgent;
using workflow_internal::kLoop;
using workflow_internal::kParallel;
using workflow_internal::kWait;
using workflow_internal::LineAtPath;
using workflow_internal::LineOf;
using workflow_internal::ScalarToJson;
using workflow_internal::YamlToJson;

const std::vector<std::string> kTopKeys = {"name",     "description",  "inputs",       "outcome",
                                           "defaults", "steps",        "stage_events", "budget",
                                           "tenant",   "max_attempts", "concurrency",  "priority",
                                           "schedules"};
const std::vector<std::string> kConcurrencyKeys = {"key", "limit"};
const std::set<std::string> kCommonStepKeys = {
    "id",   "kind",  "phase",   "needs",         "trigger",
    "when", "retry", "timeout", "allow_failure", "stage"};
const std::vector<std::string> kLoopKeys = {"max_iterations", "until", "body"};
const std::vector<std::string> kParallelKeys = {"deadline", "branches"};
const std::vector<std::string> kInputKeys = {"type", "required", "default",
                                             "enum", "secret",   "description"};
const std::vector<std::string> kRetryKeys = {"max_attempts", "initial_delay", "multiplier",
                                             "max_delay", "on"};
const std::vector<std::string> kDefaultsKeys = {"timeout", "retry"};
const std::vector<std::string> kBranchKeys = {"name", "steps"};
const std::vector<std::string> kToolKeys = {"name", "description", "parameters", "step"};

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Const lookup: operator[] on a non-const node would insert the key. A missing
// key yields a node whose IsDefined() is false and whose other accessors throw,
// so every use checks IsDefined() first.
YAML::Node Get(const YAML::Node& map, const std::string& key) {
  const YAML::Node& c = map;
  return c[key];
}

std::string StepPrefix(const StepDef& s) {
  return s.id.empty() ? "" : absl::StrCat("step '", s.id, "': ");
}

class Loader {
 public:
  Loader(std::string source, const LoadLimits& limits)
      : source_(std::move(source)), limits_(limits) {}

  absl::StatusOr<Workflow> Load(const YAML::Node& root) {
    if (!root.IsDefined() || root.IsNull()) {
      return absl::InvalidArgumentError(absl::StrCat(
          source_, ": the workflow is empty; write name: and steps: at the top level"));
    }
    if (!root.IsMap()) {
      return Err(root, "the top level must be a mapping; write name: and steps: at the top level");
    }
    RUNLOOM_RETURN_IF_ERROR(workflow_internal::CheckMapKeys(root, source_));
    for (auto it = root.begin(); it != root.end(); ++it) {
      if (!Contains(kTopKeys, it->first.Scalar())) {
        return Err(it->first,
                   absl::StrCat("unknown top-level key '", it->first.Scalar(),
                                "'; the top level takes ", absl::StrJoin(kTopKeys, ", ")));
      }
    }
    Workflow wf;
    wf.source_path = source_;
    RUNLOOM_ASSIGN_OR_RETURN(wf.name, ReadText(Get(root, "name"), "name"));
    RUNLOOM_ASSIGN_OR_RETURN(wf.description, ReadText(Get(root, "description"), "description"));
    RUNLOOM_ASSIGN_OR_RETURN(wf.inputs, ParseInputs(Get(root, "inputs")));
    RUNLOOM_RETURN_IF_ERROR(ParseDefaults(Get(root, "defaults")));
    RUNLOOM_ASSIGN_OR_RETURN(wf.outcome, ReadText(Get(root, "outcome"), "outcome"));
    RUNLOOM_ASSIGN_OR_RETURN(wf.steps, ParseSteps(Get(root, "steps"), "steps"));
    RUNLOOM_ASSIGN_OR_RETURN(
        wf.stage_events, workflow_internal::ParseStageEvents(Get(root, "stage_events"), source_));
    RUNLOOM_ASSIGN_OR_RETURN(wf.budget_micros, ParseBudget(Get(root, "budget")));
    RUNLOOM_ASSIGN_OR_RETURN(wf.tenant_input, ReadText(Get(root, "tenant"), "tenant"));
    RUNLOOM_ASSIGN_OR_RETURN(wf.max_attempts, ParseMaxAttempts(Get(root, "max_attempts")));
    RUNLOOM_ASSIGN_OR_RETURN(wf.concurrency, ParseConcurrency(Get(root, "concurrency")));
    RUNLOOM_ASSIGN_OR_RETURN(wf.priority, ParsePriority(Get(root, "priority")));
    RUNLOOM_ASSIGN_OR_RETURN(wf.schedules,
                             workflow_internal::ParseSchedules(Get(root, "schedules"), source_));
    if (const int64_t n = CountSteps(wf.steps); n > limits_.max_steps) {
      return LimitError(source_, absl::StrCat("has ", n, " steps"), "max_steps", limits_.max_steps,
                        "split the workflow into smaller ones");
    }

    // The validator reports problems by (step, key path); map each StepDef
    // back to its YAML node so the message names the key's own line.
    std::map<const StepDef*, YAML::Node> nodes;
    MapNodes(wf.steps, Get(root, "steps"), nodes);
    RUNLOOM_RETURN_IF_ERROR(
        workflow_internal::Validate(wf, [&](const workflow_internal::Location& loc) {
          if (loc.step == nullptr) {
            return LineAtPath(root, loc.field);
          }
          auto it = nodes.find(loc.step);
          return it == nodes.end() ? loc.step->line : LineAtPath(it->second, loc.field);
        }));
    return wf;
  }

 private:
  absl::Status Err(const YAML::Node& at, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ":", LineOf(at), ": ", what));
  }

  // `budget: 2.50`: the YAML scalar's own text, read exactly.
  absl::StatusOr<std::optional<int64_t>> ParseBudget(const YAML::Node& n) const {
    if (!n.IsDefined() || n.IsNull()) return std::optional<int64_t>();
    std::optional<int64_t> micros;
    if (n.IsScalar()) micros = ParseAmountMicros(n.Scalar());
    if (!micros.has_value()) {
      return Err(n,
                 "budget must be an amount in price units with up to 6 decimals, e.g. "
                 "budget: 2.50");
    }
    return micros;
  }

  // `max_attempts: 10`: the run's attempt cap. One message for every way
  // it can be wrong (not a number, not whole, out of range).
  absl::StatusOr<int> ParseMaxAttempts(const YAML::Node& n) const {
    if (!n.IsDefined() || n.IsNull()) return kDefaultRunMaxAttempts;
    absl::StatusOr<int> v = ReadInt(n, "max_attempts");
    if (!v.ok() || *v < 1 || *v > kMaxRunMaxAttempts) {
      return Err(n,
                 absl::StrCat("max_attempts must be a whole number from 1 to ", kMaxRunMaxAttempts,
                              " (the leases a run may take before it ends failed; default ",
                              kDefaultRunMaxAttempts, "), e.g. max_attempts: 10"));
    }
    return *v;
  }

  // `concurrency: {key: "{{ inputs.tenant }}", limit: 2}` (issue 23).
  absl::StatusOr<std::optional<ConcurrencyDef>> ParseConcurrency(const YAML::Node& n) const {
    if (!n.IsDefined() || n.IsNull()) return std::optional<ConcurrencyDef>();
    if (!n.IsMap()) {
      return Err(n, "concurrency must be a mapping, e.g. concurrency: {key: \"{{ inputs.tenant }}\", "
                    "limit: 2}");
    }
    RUNLOOM_RETURN_IF_ERROR(CheckKeys(n, kConcurrencyKeys, "concurrency"));
    ConcurrencyDef c;
    const YAML::Node key = Get(n, "key");
    if (!key.IsDefined() || !key.IsScalar() || key.Scalar().empty()) {
      return Err(key.IsDefined() ? key : n,
                 "concurrency.key must be a template over the run's inputs, e.g. key: \"{{ "
                 "inputs.tenant }}\"");
    }
    c.key = key.Scalar();
    const YAML::Node limit = Get(n, "limit");
    absl::StatusOr<int> v =
        limit.IsDefined() ? ReadInt(limit, "concurrency.limit") : absl::StatusOr<int>(0);
    if (!v.ok() || *v < 1 || *v > kMaxConcurrencyLimit) {
      return Err(limit.IsDefined() ? limit : n,
                 absl::StrCat("concurrency.limit must be a whole number from 1 to ",
                              kMaxConcurrencyLimit,
                              " (the most runs of one key running at once), e.g. limit: 2"));
    }
    c.limit = *v;
    return std::optional<ConcurrencyDef>(std::move(c));
  }

  // `priority: 5`: 0 (the default) to kMaxPriority, higher first.
  absl::StatusOr<int> ParsePriority(const YAML::Node& n) const {
    if (!n.IsDefined() || n.IsNull()) return 0;
    absl::StatusOr<int> v = ReadInt(n, "priority");
    if (!v.ok() || *v < 0 || *v > kMaxPriority) {
      return Err(n, absl::StrCat("priority must be a whole number from 0 to ", kMaxPriority,
                                 " (higher runs first among the queued runs of one concurrency "
                                 "key; default 0), e.g. priority: 5"));
    }
    return *v;
  }

  absl::StatusOr<std::string> ReadText(const YAML::Node& n, const std::string& what) const {
    if (!n.IsDefined() || n.IsNull()) {
      return std::string();
    }
    if (!n.IsScalar()) {
      return Err(n, absl::StrCat(what, " must be text, not a ", n.IsMap() ? "mapping" : "list",
                                 "; quote it if it is meant as text"));
    }
    return n.Scalar();
  }

  absl::StatusOr<bool> ReadBool(const YAML::Node& n, const std::string& what) const {
    const nlohmann::json v = n.IsScalar() ? ScalarToJson(n) : nlohmann::json();
    if (!v.is_boolean()) {
      return Err(n, absl::StrCat(what, " must be true or false"));
    }
    return v.get<bool>();
  }

  absl::StatusOr<int> ReadInt(const YAML::Node& n, const std::string& what) const {
    const nlohmann::json v = n.IsScalar() ? ScalarToJson(n) : nlohmann::json();
    // Unsigned values above INT64_MAX would wrap in get<int64_t>(); reject them first.
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > INT_MAX) ||
        v.get<int64_t>() > INT_MAX || v.get<int64_t>() < INT_MIN) {
      return Err(n, absl::StrCat(what, " must be a whole number, e.g. 3"));
    }
    return static_cast<int>(v.get<int64_t>());
  }

  absl::StatusOr<double> ReadNumber(const YAML::Node& n, const std::string& what) const {
    const nlohmann::json v = n.IsScalar() ? ScalarToJson(n) : nlohmann::json();
    if (!v.is_number()) {
      return Err(n, absl::StrCat(what, " must be a number, e.g. 2"));
    }
    return v.get<double>();
  }

  absl::StatusOr<absl::Duration> ReadDuration(const YAML::Node& n, const std::string& what) const {
    if (!n.IsScalar()) {
      return Err(n, absl::StrCat(what, " must be a duration such as 30s"));
    }
    absl::StatusOr<absl::Duration> d = ParseDuration(n.Scalar());
    if (!d.ok()) {
      return Err(n, absl::StrCat(what, ": ", d.status().message()));
    }
    return *d;
  }

  // A step's timeout: a duration, or `none` written out for unbounded
  // (InfiniteDuration); left out, the step kind's default bounds it.
  absl::StatusOr<absl::Duration> ReadTimeout(const YAML::Node& n, const std::string& what) const {
    if (n.IsScalar() && n.Scalar() == "none") return absl::InfiniteDuration();
    absl::StatusOr<absl::Duration> d = ReadDuration(n, what);
    if (!d.ok()) {
      return absl::Status(d.status().code(),
                          absl::StrCat(d.status().message(), " (or none for no timeout)"));
    }
    return d;
  }

  absl::StatusOr<std::vector<std::string>> ReadTextList(const YAML::Node& n,
                                                        const std::string& what) const {
    std::vector<std::string> out;
    if (n.IsNull()) {
      return out;
    }
    if (!n.IsSequence()) {
      return Err(n, absl::StrCat(what, " must be a list; write ", what, ": [a, b]"));
    }
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (!it->IsScalar()) {
        return Err(*it, absl::StrCat(what, " must list plain names"));
      }
      out.push_back(it->Scalar());
    }
    return out;
  }

  absl::StatusOr<std::optional<Condition>> ReadCondition(const YAML::Node& n,
                                                         const std::string& what) const {
    RUNLOOM_ASSIGN_OR_RETURN(std::string text, ReadText(n, what));
    absl::StatusOr<Condition> c = ParseCondition(text);
    if (!c.ok()) {
      return Err(n, absl::StrCat(what, ": ", c.status().message()));
    }
    return std::optional<Condition>(*std::move(c));
  }

  absl::Status CheckKeys(const YAML::Node& map, const std::vector<std::string>& allowed,
                         const std::string& what) const {
    for (auto it = map.begin(); it != map.end(); ++it) {
      if (!Contains(allowed, it->first.Scalar())) {
        return Err(it->first, absl::StrCat(what, " does not take '", it->first.Scalar(), "'; use ",
                                           absl::StrJoin(allowed, ", ")));
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<InputDef>> ParseInputs(const YAML::Node& n) const {
    std::vector<InputDef> out;
    if (!n.IsDefined() || n.IsNull()) {
      return out;
    }
    if (!n.IsMap()) {
      return Err(n, "inputs must be a mapping of name -> {type: ..., ...}");
    }
    for (auto it = n.begin(); it != n.end(); ++it) {
      InputDef in;
      in.name = it->first.Scalar();
      const YAML::Node spec = it->second;
      const std::string what = absl::StrCat("input '", in.name, "'");
      if (spec.IsNull()) {
        out.push_back(std::move(in));
        continue;
      }
      if (!spec.IsMap()) {
        return Err(spec,
                   absl::StrCat(what, " must be a mapping, e.g. {type: string, required: true}"));
      }
      RUNLOOM_RETURN_IF_ERROR(CheckKeys(spec, kInputKeys, what));
      if (YAML::Node v = Get(spec, "type"); v.IsDefined()) {
        RUNLOOM_ASSIGN_OR_RETURN(in.type, ReadText(v, what + " type"));
      }
      if (YAML::Node v = Get(spec, "required"); v.IsDefined()) {
        RUNLOOM_ASSIGN_OR_RETURN(in.required, ReadBool(v, what + " required"));
      }
      if (YAML::Node v = Get(spec, "secret"); v.IsDefined()) {
        RUNLOOM_ASSIGN_OR_RETURN(in.secret, ReadBool(v, what + " secret"));
      }
      if (YAML::Node v = Get(spec, "default"); v.IsDefined()) {
        in.default_value = YamlToJson(v);
      }
      if (YAML::Node v = Get(spec, "enum"); v.IsDefined()) {
        if (!v.IsSequence()) {
          return Err(v, absl::StrCat(what, " enum must be a list, e.g. enum: [a, b]"));
        }
        for (auto e = v.begin(); e != v.end(); ++e) {
          in.allowed.push_back(YamlToJson(*e));
        }
      }
      RUNLOOM_ASSIGN_OR_RETURN(in.description,
                               ReadText(Get(spec, "description"), what + " description"));
      out.push_back(std::move(in));
    }
    return out;
  }

  absl::StatusOr<RetryPolicy> ParseRetry(const YAML::Node& n, const std::string& what) const {
    RetryPolicy r;
    if (n.IsNull()) {
      return r;
    }
    if (!n.IsMap()) {
      return Err(n, absl::StrCat(what, " must be a mapping, e.g. {max_attempts: 3}"));
    }
    RUNLOOM_RETURN_IF_ERROR(CheckKeys(n, kRetryKeys, what));
    if (YAML::Node v = Get(n, "max_attempts"); v.IsDefined()) {
      RUNLOOM_ASSIGN_OR_RETURN(r.max_attempts, ReadInt(v, what + ".max_attempts"));
      if (r.max_attempts < 1) {
        return Err(v, absl::StrCat(what, ".max_attempts counts the first try too; use 1 or more"));
      }
    }
    if (YAML::Node v = Get(n, "initial_delay"); v.IsDefined()) {
      RUNLOOM_ASSIGN_OR_RETURN(r.initial_delay, ReadDuration(v, what + ".initial_delay"));
    }
    if (YAML::Node v = Get(n, "multiplier"); v.IsDefined()) {
      RUNLOOM_ASSIGN_OR_RETURN(r.multiplier, ReadNumber(v, what + ".multiplier"));
      if (!(r.multiplier >= 1.0)) {
        return Err(v, absl::StrCat(what, ".multiplier must be 1 (constant delay) or more"));
      }
    }
    if (YAML::Node v = Get(n, "max_delay"); v.IsDefined()) {
      RUNLOOM_ASSIGN_OR_RETURN(r.max_delay, ReadDuration(v, what + ".max_delay"));
    }
    if (YAML::Node v = Get(n, "on"); v.IsDefined()) {
      RUNLOOM_ASSIGN_OR_RETURN(std::vector<std::string> names, ReadTextList(v, what + ".on"));
      r.retry_on.clear();
      for (const std::string& name : names) {
        std::optional<ErrorClass> c = workflow_internal::ParseErrorClass(name);
        if (!c) {
          return Err(v, absl::StrCat(what, ".on: unknown error class '", name, "'; use ",
                                     workflow_internal::ErrorClassNames()));
        }
        r.retry_on.push_back(*c);
      }
    }
    return r;
  }

  absl::Status ParseDefaults(const YAML::Node& n) {
    if (!n.IsDefined() || n.IsNull()) {
      return absl::OkStatus();
    }
    if (!n.IsMap()) {
      return Err(n, "defaults must be a mapping, e.g. {timeout: 30s}");
    }
    RUNLOOM_RETURN_IF_ERROR(CheckKeys(n, kDefaultsKeys, "defaults"));
    if (YAML::Node v = Get(n, "timeout"); v.IsDefined()) {
      RUNLOOM_ASSIGN_OR_RETURN(default_timeout_, ReadTimeout(v, "defaults.timeout"));
    }
    if (YAML::Node v = Get(n, "retry"); v.IsDefined()) {
      RUNLOOM_ASSIGN_OR_RETURN(default_retry_, ParseRetry(v, "defaults.retry"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<StepDef>> ParseSteps(const YAML::Node& n, const std::string& what) {
    std::vector<StepDef> out;
    if (!n.IsDefined() || n.IsNull()) {
      return out;
    }
    if (!n.IsSequence()) {
      return Err(n, absl::StrCat(what, " must be a list of steps, each starting with - id: ..."));
    }
    for (auto it = n.begin(); it != n.end(); ++it) {
      RUNLOOM_ASSIGN_OR_RETURN(StepDef s, ParseStep(*it));
      out.push_back(std::move(s));
    }
    return out;
  }

  absl::StatusOr<std::vector<Branch>> ParseBranches(const YAML::Node& n, const StepDef& s) {
    std::vector<Branch> out;
    if (n.IsNull()) {
      return out;
    }
    const std::string what = StepPrefix(s) + "branches";
    if (!n.IsSequence()) {
      return Err(n, absl::StrCat(what, " must be a list of {name: ..., steps: [...]}"));
    }
    for (auto it = n.begin(); it != n.end(); ++it) {
      const YAML::Node b = *it;
      if (!b.IsMap()) {
        return Err(b, absl::StrCat(what, ": each branch must be a mapping with steps:"));
      }
      RUNLOOM_RETURN_IF_ERROR(CheckKeys(b, kBranchKeys, "a branch"));
      Branch branch;
      RUNLOOM_ASSIGN_OR_RETURN(branch.name, ReadText(Get(b, "name"), "branch name"));
      if (branch.name.empty()) {
        branch.name = absl::StrCat("b", out.size());
      }
      RUNLOOM_ASSIGN_OR_RETURN(branch.steps, ParseSteps(Get(b, "steps"), "branch steps"));
      out.push_back(std::move(branch));
    }
    return out;
  }

  // An agent's `tools:`: a list of {name, description, parameters, step}.
  // The tool's step takes no id of its own: the tool's name is its id.
  absl::StatusOr<std::vector<ToolDef>> ParseTools(const YAML::Node& n, const StepDef& s) {
    std::vector<ToolDef> out;
    if (n.IsNull()) return out;
    const std::string what = StepPrefix(s) + "tools";
    if (!n.IsSequence()) {
      return Err(n, absl::StrCat(what, " must be a list of {name, description, parameters, step}"));
    }
    for (auto it = n.begin(); it != n.end(); ++it) {
      const YAML::Node t = *it;
      if (!t.IsMap()) {
        return Err(t, absl::StrCat(what, ": each tool must be a mapping with name, description, "
                                         "parameters and step"));
      }
      RUNLOOM_RETURN_IF_ERROR(CheckKeys(t, kToolKeys, "a tool"));
      ToolDef tool;
      RUNLOOM_ASSIGN_OR_RETURN(tool.name, ReadText(Get(t, "name"), what + " name"));
      RUNLOOM_ASSIGN_OR_RETURN(tool.description,
                               ReadText(Get(t, "description"), what + " description"));
      const YAML::Node params = Get(t, "parameters");
      if (params.IsDefined() && !params.IsNull()) tool.parameters = YamlToJson(params);
      const YAML::Node step = Get(t, "step");
      if (!step.IsDefined() || !step.IsMap()) {
        return Err(step.IsDefined() ? step : t,
                   absl::StrCat(what, ": tool '", tool.name,
                                "' needs step: the step that carries a call out, e.g. "
                                "step: {kind: exec, command: [./search], input: \"{{ args }}\"}"));
      }
      if (Get(step, "id").IsDefined()) {
        return Err(Get(step, "id"), absl::StrCat(what, ": tool '", tool.name,
                                                 "': its step takes no id; the tool's name is "
                                                 "its id, so remove id:"));
      }
      RUNLOOM_ASSIGN_OR_RETURN(tool.step, ParseStep(step));
      tool.step.id = tool.name;
      out.push_back(std::move(tool));
    }
    return out;
  }

  // Reads one key of step `s` (whose id and kind are already set).
  absl::Status ApplyStepKey(StepDef* s, const YAML::Node& key, const YAML::Node& v) {
    const std::string k = key.Scalar();
    const std::string what = StepPrefix(*s) + k;
    if (k == "id" || k == "kind") {
      return absl::OkStatus();
    }
    if (k == "phase") {
      RUNLOOM_ASSIGN_OR_RETURN(s->phase, ReadText(v, what));
    } else if (k == "stage") {
      // One stage (reported when the step starts) or two (the second when
      // it succeeds).
      if (v.IsSequence()) {
        RUNLOOM_ASSIGN_OR_RETURN(std::vector<std::string> stages, ReadTextList(v, what));
        if (stages.empty() || stages.size() > 2) {
          return Err(v, absl::StrCat(what, " lists ", stages.size(),
                                     " stages; give one (stage: parsing) or two, the first "
                                     "reported when the step starts and the second when it "
                                     "succeeds (stage: [pending, processing])"));
        }
        s->stage = stages[0];
        if (stages.size() == 2) s->success_stage = stages[1];
      } else {
        RUNLOOM_ASSIGN_OR_RETURN(s->stage, ReadText(v, what));
      }
    } else if (k == "needs") {
      RUNLOOM_ASSIGN_OR_RETURN(s->needs, ReadTextList(v, what));
      s->explicit_needs = true;
    } else if (k == "trigger") {
      RUNLOOM_ASSIGN_OR_RETURN(std::string name, ReadText(v, what));
      std::optional<TriggerRule> rule = workflow_internal::ParseTriggerRule(name);
      if (!rule) {
        return Err(v, absl::StrCat(what, ": unknown trigger rule '", name, "'; use ",
                                   workflow_internal::TriggerRuleNames()));
      }
      s->trigger = *rule;
    } else if (k == "when") {
      RUNLOOM_ASSIGN_OR_RETURN(s->when, ReadCondition(v, what));
    } else if (k == "retry") {
      RUNLOOM_ASSIGN_OR_RETURN(s->retry, ParseRetry(v, what));
    } else if (k == "timeout") {
      RUNLOOM_ASSIGN_OR_RETURN(s->timeout, ReadTimeout(v, what));
    } else if (k == "allow_failure") {
      RUNLOOM_ASSIGN_OR_RETURN(s->allow_failure, ReadBool(v, what));
    } else if (s->kind == kLoop && k == "max_iterations") {
      RUNLOOM_ASSIGN_OR_RETURN(s->max_iterations, ReadInt(v, what));
    } else if (s->kind == kLoop && k == "until") {
      RUNLOOM_ASSIGN_OR_RETURN(s->until, ReadCondition(v, what));
    } else if (s->kind == kLoop && k == "body") {
      RUNLOOM_ASSIGN_OR_RETURN(s->body, ParseSteps(v, what));
    } else if (s->kind == kParallel && k == "deadline") {
      RUNLOOM_ASSIGN_OR_RETURN(s->deadline, ReadDuration(v, what));
    } else if (s->kind == kParallel && k == "branches") {
      RUNLOOM_ASSIGN_OR_RETURN(s->branches, ParseBranches(v, *s));
    } else if (s->kind == kAgent && k == "tools") {
      RUNLOOM_ASSIGN_OR_RETURN(s->tools, ParseTools(v, *s));
    } else if (s->kind == kLoop || s->kind == kParallel) {
      return Err(
          key,
          absl::StrCat(StepPrefix(*s), "a ", s->kind, " step does not take '", k, "'; it takes ",
                       absl::StrJoin(s->kind == kLoop ? kLoopKeys : kParallelKeys, ", "),
                       " and the common step keys (", absl::StrJoin(kCommonStepKeys, ", "), ")"));
    } else {
      s->config[k] = YamlToJson(v);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<StepDef> ParseStep(const YAML::Node& n) {
    if (!n.IsMap()) {
      return Err(n, "a step must be a mapping, e.g. {id: parse, kind: exec}");
    }
    StepDef s;
    s.line = LineOf(n);
    RUNLOOM_ASSIGN_OR_RETURN(s.id, ReadText(Get(n, "id"), "step id"));
    RUNLOOM_ASSIGN_OR_RETURN(s.kind, ReadText(Get(n, "kind"), StepPrefix(s) + "kind"));
    for (auto it = n.begin(); it != n.end(); ++it) {
      RUNLOOM_RETURN_IF_ERROR(ApplyStepKey(&s, it->first, it->second));
    }
    // Defaults fill leaf steps only: a loop or parallel step's timeout bounds
    // all of its children, so a per-step default would cut them short.
    if (s.kind != kLoop && s.kind != kParallel) {
      if (!Get(n, "retry").IsDefined() && default_retry_) {
        s.retry = *default_retry_;
      }
      if (!s.timeout && default_timeout_ && s.kind != kWait) {
        s.timeout = default_timeout_;
      }
    }
    return s;
  }

  static void MapNodes(const std::vector<StepDef>& steps, const YAML::Node& seq,
                       std::map<const StepDef*, YAML::Node>& out) {
    if (!seq.IsDefined() || !seq.IsSequence() || seq.size() != steps.size()) {
      return;
    }
    for (size_t i = 0; i < steps.size(); ++i) {
      const YAML::Node& cseq = seq;
      const YAML::Node n = cseq[i];
      out.emplace(&steps[i], n);
      MapNodes(steps[i].body, Get(n, "body"), out);
      const YAML::Node tools = Get(n, "tools");
      if (tools.IsDefined() && tools.IsSequence() && tools.size() == steps[i].tools.size()) {
        for (size_t t = 0; t < steps[i].tools.size(); ++t) {
          const YAML::Node& ct = tools;
          const YAML::Node step = Get(ct[t], "step");
          if (step.IsDefined()) out.emplace(&steps[i].tools[t].step, step);
        }
      }
      const YAML::Node branches = Get(n, "branches");
      if (!branches.IsDefined() || !branches.IsSequence() ||
          branches.size() != steps[i].branches.size()) {
        continue;
      }
      for (size_t b = 0; b < steps[i].branches.size(); ++b) {
        const YAML::Node& cb = branches;
        MapNodes(steps[i].branches[b].steps, Get(cb[b], "steps"), out);
      }
    }
  }

  static int64_t CountSteps(const std::vector<StepDef>& steps) {
    int64_t n = 0;
    for (const StepDef& s : steps) {
      n += 1 + CountSteps(s.body) + static_cast<int64_t>(s.tools.size());
      for (const Branch& b : s.branches) n += CountSteps(b.steps);
    }
    return n;
  }

  const std::string source_;
  const LoadLimits limits_;
  std::optional<RetryPolicy> default_retry_;
  std::optional<absl::Duration> default_timeout_;
};

}  // namespace

absl::StatusOr<Workflow> LoadWorkflowYaml(const std::string& yaml_text,
                                          const std::string& source_name,
                                          const LoadLimits& limits) {
  // Bounded first: YAML::Load and every walk after it visit aliases expanded.
  RUNLOOM_RETURN_IF_ERROR(workflow_internal::CheckYamlBounds(yaml_text, source_name, limits));
  try {
    const YAML::Node root = YAML::Load(yaml_text);
    return Loader(source_name, limits).Load(root);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ":", e.mark.line + 1, ":",
                                                   e.mark.column + 1, ": invalid YAML: ", e.msg,
                                                   "; fix the syntax at that position"));
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat(source_name, ": unexpected error while loading the workflow: ", e.what()));
  }
}

absl::StatusOr<Workflow> LoadWorkflowFile(const std::string& path, const LoadLimits& limits) {
  absl::StatusOr<std::string> text = ReadFileBounded(path, "workflow file", limits);
  if (!text.ok()) {
    if (text.status().code() == absl::StatusCode::kNotFound) {
      return absl::NotFoundError(absl::StrCat("workflow file '", path, "' not found"));
    }
    return text.status();
  }
  return LoadWorkflowYaml(*text, path, limits);
}

}  // namespace runloom
