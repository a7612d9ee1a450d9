// Workflow: a named, versioned graph of steps, as a plain value.
//
// A Workflow is loaded from YAML (LoadWorkflowFile / LoadWorkflowYaml) or built
// in C++. It carries no execution state: the engine runs it. Its canonical
// JSON form (CanonicalWorkflow) is what the catalog stores and digests, so two
// files that differ only in formatting or key order have the same digest.
//
// Thread-safety: a Workflow is an immutable value once loaded; share it freely
// through std::shared_ptr<const Workflow>.
#pragma once

#include "runloom/limits.h"
#include "runloom/run.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace runloom {

// When a step with `needs:` runs, given the final states of what it needs.
enum class TriggerRule {
  kAllSuccess,               // default: every need succeeded
  kAllDone,                  // every need finished, whatever the result
  kNoneFailedMinOneSuccess,  // no need failed, at least one succeeded (skips allowed)
  kOneSuccess,               // at least one need succeeded
};

struct RetryPolicy {
  int max_attempts = 1;  // 1 = no retry (the default for every step)
  absl::Duration initial_delay = absl::Seconds(1);
  double multiplier = 2.0;
  absl::Duration max_delay = absl::Minutes(5);
  // Classes that are retried (ErrorClass, runloom/run.h); default: error,
  // timeout, unavailable, rate_limited. invalid is retried only when listed
  // (for a model reply that does not match the step's response_schema).
  std::vector<ErrorClass> retry_on = {ErrorClass::kError, ErrorClass::kTimeout,
                                      ErrorClass::kUnavailable, ErrorClass::kRateLimited};
};

// A condition on recorded outputs, e.g. `steps.edit.output.approved == true`.
// Grammar: <ref> [ (== | !=) <JSON literal> ]; a bare <ref> tests truthiness
// (not null, not false, not 0, not "").
struct Condition {
  std::string text;      // as written, for messages and canonical form
  std::string ref;       // e.g. "steps.edit.output.approved"
  std::string op;        // "", "==" or "!="
  nlohmann::json value;  // the literal, when op is not empty
};

struct StepDef;
struct ToolDef;

// One branch of a `parallel` step: its own sequence of steps.
struct Branch {
  std::string name;  // defaults to "b<index>"
  std::vector<StepDef> steps;
};

struct StepDef {
  std::string id;     // unique among its siblings; [a-z][a-z0-9_]*
  std::string kind;   // exec, noop, sleep, fail, llm, loop, parallel, or a registered kind
  std::string phase;  // optional label; rerun-from-phase starts at the first step of a phase
  // Optional stage this leaf step reports when it starts (stage events, see
  // StageEventsDef): "", or one of kStepStages. Needs Workflow::stage_events.
  std::string stage;
  // Optional stage it reports when it succeeds (`stage: [pending,
  // processing]`: reference 004's save_metadata enters `processing` once
  // its upsert is done): "", or one of kStepStages. Needs `stage`.
  std::string success_stage;
  std::vector<std::string> needs;  // sibling step ids; empty = after the previous step
  bool explicit_needs = false;     // `needs:` was written (even as []), so no implicit edge
  TriggerRule trigger = TriggerRule::kAllSuccess;
  RetryPolicy retry;
  // One attempt's bound. nullopt = the kind's default (StepKind::
  // DefaultTimeout, or EngineOptions::step_timeouts); InfiniteDuration() =
  // `timeout: none`, unbounded. Leaf steps (and a wait's signal) only.
  std::optional<absl::Duration> timeout;
  bool allow_failure = false;  // a failure does not make the run fail by default
  // `when:` condition; false -> the step is skipped (and skips propagate to
  // steps whose trigger rule needs it to succeed).
  std::optional<Condition> when;
  // Kind-specific settings, with templates still unresolved (strings holding
  // "{{ ... }}"). For exec: command (string or list), input (any JSON).
  nlohmann::json config = nlohmann::json::object();

  // kind == "loop": body runs in order each iteration, up to max_iterations,
  // stopping after the first iteration where `until` holds.
  std::vector<StepDef> body;
  int max_iterations = 0;
  std::optional<Condition> until;

  // kind == "parallel": branches start together; a branch still running at
  // `deadline` is recorded failed and the join fires.
  std::vector<Branch> branches;
  std::optional<absl::Duration> deadline;

  // kind == "agent": the tools the model may call (`tools:`); the agent's
  // other settings (model, system, prompt, max_turns, ...) are in config.
  std::vector<ToolDef> tools;

  int line = 0;  // source line in the YAML file, for messages
};

// One tool of an `agent` step (issue 24): what the model is told (name,
// description, the JSON Schema of its arguments) and the step that carries
// a call out. The step sees the call's validated arguments as `{{ args }}`
// (`{{ args.query }}`); its id is the tool's name. Tool calls are recorded
// under the agent's path: "triage/turn[2]/tool[search#0]".
struct ToolDef {
  std::string name;  // [a-z][a-z0-9_]*, unique in the agent
  std::string description;
  nlohmann::json parameters = nlohmann::json::object();  // a JSON Schema of type object
  StepDef step;
};

// Bounds on an agent step (workflow-yaml.md "agent").
inline constexpr int kMaxAgentTurns = 100;      // max_turns: 1..kMaxAgentTurns (default 10)
inline constexpr int kDefaultAgentTurns = 10;
inline constexpr size_t kMaxAgentTools = 32;

struct InputDef {
  std::string name;
  std::string type = "string";  // string, integer, number, boolean, object, array
  bool required = false;
  std::optional<nlohmann::json> default_value;
  bool secret = false;                  // never stored; excluded from the frozen inputs and digest
  std::vector<nlohmann::json> allowed;  // `enum:` when not empty
  std::string description;
};

// A run's attempt cap (`max_attempts:`, issue 28): the leases one run may
// take before it ends failed. A lease after the first follows an executor
// that died, hung or lost its lease; this is not a step's
// RetryPolicy::max_attempts, which counts tries within one lease.
inline constexpr int kDefaultRunMaxAttempts = 5;
inline constexpr int kMaxRunMaxAttempts = 100;

// Concurrency keys and priority (issue 23). `concurrency: {key, limit}`
// caps the runs of one key that are running at once, across every process
// sharing the store; `priority:` orders the queued runs of one key (higher
// first). The key is a template over the run's inputs, rendered once at
// admission; a rendered key longer than kMaxConcurrencyKeyBytes, or empty,
// refuses the run. The bounds are in run.h.

struct ConcurrencyDef {
  std::string key;  // a template, e.g. "{{ inputs.tenant }}"; only inputs.* references
  int limit = 1;    // 1..kMaxConcurrencyLimit
};

// The stages a step may report (reference 004's vocabulary; `completed` and
// `failed` are the run's terminal stages, reported by the engine itself).
inline constexpr const char* kStepStages[] = {"pending", "processing", "parsing", "chunking",
                                              "indexing"};

// Stage events (EngineOptions::stage_events): which inputs of a run identify
// it to subscribers. Each field names a declared input that is not secret,
// of type string or integer. The values of these three inputs, and no other
// input, appear in the published events; a run whose tenant or node input is
// missing or empty publishes nothing (a warning is logged).
struct StageEventsDef {
  std::string document_id;  // the run's subject, e.g. "doc_id"
  std::string tenant_id;    // routes the event: channel {prefix}:{tenant}:{node}
  std::string node_id;
};

// A schedule declared in the workflow (`schedules:`, issue 23): runs of the
// workflow started at the times `cron` names in `timezone`, with the same
// fields, defaults and checks as `runloom schedule create` (engine.h
// ScheduleRequest). When a version of the workflow becomes the catalog's
// latest, the engine keeps one stored schedule per entry, with the id
// DeclaredScheduleId(workflow name, DeclaredScheduleName(entry, index)), and
// deletes the declared schedules the latest version no longer lists
// (docs/workflow-yaml.md "schedules").
struct ScheduleDef {
  std::string name;  // [a-z0-9][a-z0-9_-]*, at most 64; "" = the entry's index
  std::string cron;  // 5 fields, or 6 with seconds first (src/schedule/cron.h)
  std::string timezone = "UTC";                      // an IANA name
  nlohmann::json inputs = nlohmann::json::object();  // checked against the inputs
  std::string overlap = "skip";                      // skip | allow | cancel
  std::string catch_up = "latest";                   // none | latest | all
};

// The most entries `schedules:` takes.
inline constexpr size_t kMaxWorkflowSchedules = 20;

// Ids of declared schedules start with this; `schedule create` and the API
// refuse it, so a stored schedule is either declared in a file or not.
inline constexpr char kDeclaredSchedulePrefix[] = "workflow:";

// The entry's name: its `name:`, or else its index in `schedules:` ("0").
std::string DeclaredScheduleName(const ScheduleDef& def, size_t index);
// "workflow:<workflow>:<entry name>", e.g. "workflow:report:nightly".
std::string DeclaredScheduleId(const std::string& workflow, const std::string& entry_name);

struct Workflow {
  std::string name;  // [a-z][a-z0-9_-]*
  std::string description;
  std::vector<InputDef> inputs;
  std::vector<StepDef> steps;
  // Template evaluated after the graph ends; must yield approved, completed,
  // rejected, unresolved or failed. Empty: failed if any step that was not
  // allowed to fail failed, else completed.
  std::string outcome;
  // `stage_events:`; nullopt = the workflow publishes no stage events.
  std::optional<StageEventsDef> stage_events;
  // `budget:` in price units, kept in micro-units: each run's own budget
  // unless its start request gives one (runloom/budget_ledger.h);
  // nullopt = runs have no budget of their own.
  std::optional<int64_t> budget_micros;
  // `tenant:` names the input whose value is a run's tenant (budgets are
  // kept per tenant); "" = the stage_events tenant_id input, if declared.
  std::string tenant_input;
  // `max_attempts:` the run's attempt cap, 1..kMaxRunMaxAttempts. Admission
  // stores it on each run (RunRecord::max_attempts), so every process that
  // judges the run (the executor taking a lease, the sweeper) applies the
  // same cap. In the canonical form (and digest) only when it is not the
  // default, so workflows without it keep their earlier digests.
  int max_attempts = kDefaultRunMaxAttempts;
  // `concurrency:`; nullopt = its runs have no key and no cap. `priority:`
  // each run's priority unless its start request gives one, 0..kMaxPriority.
  // Both appear in the canonical form (and digest) only when set (priority:
  // when not 0), so workflows without them keep their earlier digests.
  std::optional<ConcurrencyDef> concurrency;
  int priority = 0;
  // `schedules:` at most kMaxWorkflowSchedules. In the canonical form (and
  // digest) only when not empty, so workflows without it keep their
  // earlier digests; a change of schedules is a new version.
  std::vector<ScheduleDef> schedules;
  std::string source_path;  // where it was loaded from ("" when built in C++)
};

// Loads and validates a workflow. Errors are kInvalidArgument with the text
// "<file>:<line>: <what is wrong>; <how to fix it>"; a missing file is kNotFound.
// The text is untrusted: it is refused, after bounded work, past `limits`
// (size, values with YAML aliases expanded, nesting, steps).
absl::StatusOr<Workflow> LoadWorkflowFile(const std::string& path, const LoadLimits& limits = {});
absl::StatusOr<Workflow> LoadWorkflowYaml(const std::string& yaml_text,
                                          const std::string& source_name,
                                          const LoadLimits& limits = {});

// Validates a workflow built in C++ (the loader calls it too): unique ids,
// needs that exist and form no cycle, loop/parallel shapes, templates whose
// references can exist, known step kinds (see StepRegistry::Default()).
absl::Status ValidateWorkflow(const Workflow& wf);

// The canonical JSON form (what is stored and digested) and its digest.
nlohmann::json CanonicalWorkflow(const Workflow& wf);
std::string WorkflowDigest(const Workflow& wf);  // "sha256:<hex>"

// Rebuilds a workflow from its canonical form (what the catalog stores).
absl::StatusOr<Workflow> WorkflowFromCanonical(const nlohmann::json& canonical);

std::string_view ToString(TriggerRule r);

}  // namespace runloom
