// The canonical JSON form of a workflow (docs/formats/workflow-yaml.md,
// "Canonical form"): every field that changes what a run does, with defaults
// written out, durations as integer milliseconds, and nothing that depends on
// how the file was written (lines, source path, key order, condition spacing).
#include "runloom/workflow.h"

#include "core/digest.h"
#include "core/status_macros.h"
#include "workflow/internal/names.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace runloom {
namespace {

using nlohmann::json;
using workflow_internal::kAgent;
using workflow_internal::kLoop;
using workflow_internal::kParallel;

constexpr int kCanonicalVersion = 1;

json Millis(absl::Duration d) { return absl::ToInt64Milliseconds(d); }

json OptionalMillis(const std::optional<absl::Duration>& d) {
  return d ? Millis(*d) : json(nullptr);
}

// A step's timeout: null = the kind's default, "none" = `timeout: none`.
constexpr char kNoTimeout[] = "none";
json TimeoutMillis(const std::optional<absl::Duration>& d) {
  if (d && *d == absl::InfiniteDuration()) return kNoTimeout;
  return OptionalMillis(d);
}

json CanonicalCondition(const std::optional<Condition>& c) {
  if (!c) {
    return nullptr;
  }
  return json{{"ref", c->ref}, {"op", c->op}, {"value", c->op.empty() ? json(nullptr) : c->value}};
}

json CanonicalRetry(const RetryPolicy& r) {
  std::vector<ErrorClass> on = r.retry_on;
  std::sort(on.begin(), on.end());
  on.erase(std::unique(on.begin(), on.end()), on.end());
  json names = json::array();
  for (ErrorClass c : on) {
    names.push_back(std::string(ToString(c)));
  }
  return json{{"max_attempts", r.max_attempts},
              {"initial_delay_ms", Millis(r.initial_delay)},
              {"multiplier", r.multiplier},
              {"max_delay_ms", Millis(r.max_delay)},
              {"on", std::move(names)}};
}

json CanonicalSteps(const std::vector<StepDef>& steps);

json CanonicalStep(const StepDef& s) {
  std::vector<std::string> needs = s.needs;
  std::sort(needs.begin(), needs.end());
  json out = {{"id", s.id},
              {"kind", s.kind},
              {"phase", s.phase},
              {"needs", needs},
              {"explicit_needs", s.explicit_needs || !s.needs.empty()},
              {"trigger", std::string(ToString(s.trigger))},
              {"retry", CanonicalRetry(s.retry)},
              {"timeout_ms", TimeoutMillis(s.timeout)},
              {"allow_failure", s.allow_failure},
              {"when", CanonicalCondition(s.when)},
              {"config", s.config}};
  // Written only when set, so workflows without stage events keep the
  // digests they had before stage events existed.
  if (!s.stage.empty()) out["stage"] = s.stage;
  if (!s.success_stage.empty()) out["success_stage"] = s.success_stage;
  if (s.kind == kLoop) {
    out["max_iterations"] = s.max_iterations;
    out["until"] = CanonicalCondition(s.until);
    out["body"] = CanonicalSteps(s.body);
  }
  if (s.kind == kAgent) {
    json tools = json::array();
    for (const ToolDef& t : s.tools) {
      tools.push_back({{"name", t.name},
                       {"description", t.description},
                       {"parameters", t.parameters},
                       {"step", CanonicalStep(t.step)}});
    }
    out["tools"] = std::move(tools);
  }
  if (s.kind == kParallel) {
    out["deadline_ms"] = OptionalMillis(s.deadline);
    json branches = json::array();
    for (size_t i = 0; i < s.branches.size(); ++i) {
      branches.push_back({{"name", workflow_internal::BranchName(s.branches[i], i)},
                          {"steps", CanonicalSteps(s.branches[i].steps)}});
    }
    out["branches"] = std::move(branches);
  }
  return out;
}

json CanonicalSteps(const std::vector<StepDef>& steps) {
  json out = json::array();
  for (const StepDef& s : steps) {
    out.push_back(CanonicalStep(s));
  }
  return out;
}

// ---- Reading it back. nlohmann's at()/get<>() throw on a missing key or a
// wrong type; WorkflowFromCanonical catches and reports them.

absl::Duration FromMillis(const json& v) { return absl::Milliseconds(v.get<int64_t>()); }

std::optional<absl::Duration> OptionalFromMillis(const json& v) {
  if (v.is_null()) {
    return std::nullopt;
  }
  return FromMillis(v);
}

absl::StatusOr<std::optional<Condition>> ReadCondition(const json& v) {
  if (v.is_null()) {
    return std::optional<Condition>();
  }
  Condition c;
  c.ref = v.at("ref").get<std::string>();
  c.op = v.at("op").get<std::string>();
  c.value = v.at("value");
  c.text = c.op.empty() ? c.ref
                        : absl::StrCat(c.ref, " ", c.op, " ", workflow_internal::DumpJson(c.value));
  return std::optional<Condition>(std::move(c));
}

absl::StatusOr<RetryPolicy> ReadRetry(const json& v) {
  RetryPolicy r;
  r.max_attempts = v.at("max_attempts").get<int>();
  r.initial_delay = FromMillis(v.at("initial_delay_ms"));
  r.multiplier = v.at("multiplier").get<double>();
  r.max_delay = FromMillis(v.at("max_delay_ms"));
  r.retry_on.clear();
  for (const json& name : v.at("on")) {
    std::optional<ErrorClass> c = workflow_internal::ParseErrorClass(name.get<std::string>());
    if (!c) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown error class ", workflow_internal::DumpJson(name), " in retry.on"));
    }
    r.retry_on.push_back(*c);
  }
  return r;
}

absl::StatusOr<std::vector<StepDef>> ReadSteps(const json& v);

absl::StatusOr<StepDef> ReadStep(const json& v) {
  StepDef s;
  s.id = v.at("id").get<std::string>();
  s.kind = v.at("kind").get<std::string>();
  s.phase = v.at("phase").get<std::string>();
  s.needs = v.at("needs").get<std::vector<std::string>>();
  s.explicit_needs = v.at("explicit_needs").get<bool>();
  const std::string trigger = v.at("trigger").get<std::string>();
  std::optional<TriggerRule> rule = workflow_internal::ParseTriggerRule(trigger);
  if (!rule) {
    return absl::InvalidArgumentError(
        absl::StrCat("step '", s.id, "': unknown trigger rule '", trigger, "'"));
  }
  s.trigger = *rule;
  RUNLOOM_ASSIGN_OR_RETURN(s.retry, ReadRetry(v.at("retry")));
  const json& timeout = v.at("timeout_ms");
  s.timeout = timeout == kNoTimeout ? absl::InfiniteDuration() : OptionalFromMillis(timeout);
  s.allow_failure = v.at("allow_failure").get<bool>();
  RUNLOOM_ASSIGN_OR_RETURN(s.when, ReadCondition(v.at("when")));
  s.config = v.at("config");
  if (v.contains("stage")) s.stage = v.at("stage").get<std::string>();
  if (v.contains("success_stage")) s.success_stage = v.at("success_stage").get<std::string>();
  if (s.kind == kLoop) {
    s.max_iterations = v.at("max_iterations").get<int>();
    RUNLOOM_ASSIGN_OR_RETURN(s.until, ReadCondition(v.at("until")));
    RUNLOOM_ASSIGN_OR_RETURN(s.body, ReadSteps(v.at("body")));
  }
  if (s.kind == kAgent) {
    for (const json& t : v.at("tools")) {
      ToolDef tool;
      tool.name = t.at("name").get<std::string>();
      tool.description = t.at("description").get<std::string>();
      tool.parameters = t.at("parameters");
      RUNLOOM_ASSIGN_OR_RETURN(tool.step, ReadStep(t.at("step")));
      s.tools.push_back(std::move(tool));
    }
  }
  if (s.kind == kParallel) {
    s.deadline = OptionalFromMillis(v.at("deadline_ms"));
    for (const json& b : v.at("branches")) {
      Branch branch;
      branch.name = b.at("name").get<std::string>();
      RUNLOOM_ASSIGN_OR_RETURN(branch.steps, ReadSteps(b.at("steps")));
      s.branches.push_back(std::move(branch));
    }
  }
  return s;
}

absl::StatusOr<std::vector<StepDef>> ReadSteps(const json& v) {
  if (!v.is_array()) {
    return absl::InvalidArgumentError("steps must be an array");
  }
  std::vector<StepDef> out;
  for (const json& item : v) {
    RUNLOOM_ASSIGN_OR_RETURN(StepDef s, ReadStep(item));
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<Workflow> ReadWorkflow(const json& c) {
  const int version = c.at("canonical_version").get<int>();
  if (version != kCanonicalVersion) {
    return absl::InvalidArgumentError(absl::StrCat("canonical_version ", version,
                                                   " is not supported (this build reads ",
                                                   kCanonicalVersion, "); upgrade runloom"));
  }
  Workflow wf;
  wf.name = c.at("name").get<std::string>();
  wf.description = c.at("description").get<std::string>();
  wf.outcome = c.at("outcome").get<std::string>();
  const json& inputs = c.at("inputs");
  if (!inputs.is_object()) {
    return absl::InvalidArgumentError("inputs must be an object");
  }
  for (auto it = inputs.begin(); it != inputs.end(); ++it) {
    const json& spec = it.value();
    InputDef in;
    in.name = it.key();
    in.type = spec.at("type").get<std::string>();
    in.required = spec.at("required").get<bool>();
    if (spec.at("has_default").get<bool>()) {
      in.default_value = spec.at("default");
    }
    in.secret = spec.at("secret").get<bool>();
    in.allowed = spec.at("enum").get<std::vector<json>>();
    in.description = spec.at("description").get<std::string>();
    wf.inputs.push_back(std::move(in));
  }
  RUNLOOM_ASSIGN_OR_RETURN(wf.steps, ReadSteps(c.at("steps")));
  if (c.contains("stage_events")) {
    const json& se = c.at("stage_events");
    wf.stage_events = StageEventsDef{.document_id = se.at("document_id").get<std::string>(),
                                     .tenant_id = se.at("tenant_id").get<std::string>(),
                                     .node_id = se.at("node_id").get<std::string>()};
  }
  if (c.contains("budget_micros")) wf.budget_micros = c.at("budget_micros").get<int64_t>();
  if (c.contains("tenant")) wf.tenant_input = c.at("tenant").get<std::string>();
  if (c.contains("max_attempts")) wf.max_attempts = c.at("max_attempts").get<int>();
  if (c.contains("concurrency")) {
    const json& cc = c.at("concurrency");
    wf.concurrency = ConcurrencyDef{.key = cc.at("key").get<std::string>(),
                                    .limit = cc.at("limit").get<int>()};
  }
  if (c.contains("priority")) wf.priority = c.at("priority").get<int>();
  if (c.contains("schedules")) {
    for (const json& d : c.at("schedules")) {
      wf.schedules.push_back(ScheduleDef{.name = d.at("name").get<std::string>(),
                                         .cron = d.at("cron").get<std::string>(),
                                         .timezone = d.at("timezone").get<std::string>(),
                                         .inputs = d.at("inputs"),
                                         .overlap = d.at("overlap").get<std::string>(),
                                         .catch_up = d.at("catch_up").get<std::string>()});
    }
  }
  return wf;
}

}  // namespace

json CanonicalWorkflow(const Workflow& wf) {
  // Inputs are keyed by name so reordering them in the file keeps the digest.
  json inputs = json::object();
  for (const InputDef& in : wf.inputs) {
    inputs[in.name] = {{"type", in.type},
                       {"required", in.required},
                       {"has_default", in.default_value.has_value()},
                       {"default", in.default_value.value_or(json(nullptr))},
                       {"secret", in.secret},
                       {"enum", in.allowed},
                       {"description", in.description}};
  }
  json out = {{"canonical_version", kCanonicalVersion},
              {"name", wf.name},
              {"description", wf.description},
              {"inputs", std::move(inputs)},
              {"outcome", wf.outcome},
              {"steps", CanonicalSteps(wf.steps)}};
  // Only when declared: a workflow without it keeps its earlier digest.
  if (wf.stage_events) {
    out["stage_events"] = {{"document_id", wf.stage_events->document_id},
                           {"tenant_id", wf.stage_events->tenant_id},
                           {"node_id", wf.stage_events->node_id}};
  }
  if (wf.budget_micros) out["budget_micros"] = *wf.budget_micros;
  if (!wf.tenant_input.empty()) out["tenant"] = wf.tenant_input;
  // Unlike the defaults written out above, the attempt cap appears only when
  // it is not the default: workflows stored before the key existed keep
  // their digests, and `max_attempts: 5` written out means (and digests)
  // the same as leaving it out. A reader that finds none uses the default.
  if (wf.max_attempts != kDefaultRunMaxAttempts) out["max_attempts"] = wf.max_attempts;
  // The same for issue 23's keys: absent, or the default priority 0, they
  // leave the canonical form (and digest) as it was.
  if (wf.concurrency.has_value()) {
    out["concurrency"] = {{"key", wf.concurrency->key}, {"limit", wf.concurrency->limit}};
  }
  if (wf.priority != 0) out["priority"] = wf.priority;
  // Only when declared, like stage_events; in file order (the order names
  // unnamed entries), with each entry's name and defaults written out.
  if (!wf.schedules.empty()) {
    json schedules = json::array();
    for (size_t i = 0; i < wf.schedules.size(); ++i) {
      const ScheduleDef& d = wf.schedules[i];
      schedules.push_back({{"name", DeclaredScheduleName(d, i)},
                           {"cron", d.cron},
                           {"timezone", d.timezone},
                           {"inputs", d.inputs},
                           {"overlap", d.overlap},
                           {"catch_up", d.catch_up}});
    }
    out["schedules"] = std::move(schedules);
  }
  return out;
}

std::string WorkflowDigest(const Workflow& wf) { return JsonDigest(CanonicalWorkflow(wf)); }

absl::StatusOr<Workflow> WorkflowFromCanonical(const json& canonical) {
  absl::StatusOr<Workflow> wf;
  try {
    if (!canonical.is_object()) {
      return absl::InvalidArgumentError("canonical workflow: expected a JSON object");
    }
    wf = ReadWorkflow(canonical);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("canonical workflow is malformed: ", e.what(),
                     "; store the output of CanonicalWorkflow unchanged"));
  }
  if (!wf.ok()) {
    return Annotate(wf.status(), "canonical workflow");
  }
  RUNLOOM_RETURN_IF_ERROR(ValidateWorkflow(*wf));
  return wf;
}

}  // namespace runloom
