#include "engine/admission.h"

#include "runloom/events.h"
#include "runloom/trace.h"

#include "core/digest.h"
#include "core/ids.h"
#include "core/status_macros.h"
#include "engine/rules/run_context.h"
#include "engine/run/run_budget.h"
#include "workflow/inputs.h"
#include "workflow/template.h"

#include "absl/strings/str_cat.h"

#include <filesystem>

namespace runloom::engine_internal {
namespace {

// The directory exec steps run in: the request's, else the workflow file's,
// made absolute so a worker started from another directory finds the
// scripts. "" when neither is known.
std::string WorkingDir(const StartRunRequest& req) {
  std::string working_dir = req.working_dir;
  if (working_dir.empty() && req.workflow && !req.workflow->source_path.empty()) {
    std::string p = req.workflow->source_path;
    size_t slash = p.rfind('/');
    working_dir = slash == std::string::npos ? "." : p.substr(0, slash == 0 ? 1 : slash);
  }
  if (working_dir.empty()) return working_dir;
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(working_dir, ec);
  return ec ? working_dir : abs.lexically_normal().string();
}

// The run's concurrency key: the workflow's `concurrency.key` rendered over
// the frozen inputs. The inputs are the client's, so the key is bounded
// (kMaxConcurrencyKeyBytes) and must not render empty (a run with no key
// would escape the cap). kInvalidArgument names what is wrong.
absl::StatusOr<std::string> RenderConcurrencyKey(const ConcurrencyDef& c,
                                                 const nlohmann::json& inputs) {
  auto resolve = [&](const std::string& ref) -> absl::StatusOr<nlohmann::json> {
    RUNLOOM_ASSIGN_OR_RETURN(Ref r, ParseRef(ref));
    const nlohmann::json* v = &inputs;
    for (const std::string& field : r.path) {
      if (!v->is_object() || !v->contains(field)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "concurrency.key references '", ref, "', which this run's inputs do not have; give "
            "the input a value (or a default) so the run has a concurrency key"));
      }
      v = &(*v)[field];
    }
    return *v;
  };
  RUNLOOM_ASSIGN_OR_RETURN(nlohmann::json rendered,
                           ResolveTemplates(nlohmann::json(c.key), resolve));
  std::string key = rendered.is_string() ? rendered.get<std::string>() : rendered.dump();
  if (key.empty() || rendered.is_null()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "concurrency.key '", c.key, "' renders empty for this run; give it a non-empty value"));
  }
  if (key.size() > kMaxConcurrencyKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("concurrency.key renders ", key.size(), " bytes for this run; at most ",
                     kMaxConcurrencyKeyBytes, " are allowed"));
  }
  return key;
}

}  // namespace

absl::StatusOr<WorkflowVersion> Admission::RegisterWorkflow(const Workflow& wf) {
  RUNLOOM_RETURN_IF_ERROR(ValidateWorkflow(wf));
  RUNLOOM_RETURN_IF_ERROR(ValidateStepKinds(wf, *registry_));
  RUNLOOM_ASSIGN_OR_RETURN(WorkflowVersion v, store_->RegisterWorkflow(wf.name, WorkflowDigest(wf),
                                                                       CanonicalWorkflow(wf)));
  RUNLOOM_RETURN_IF_ERROR(declared_->Sync(wf.name));
  return v;
}

absl::StatusOr<std::pair<WorkflowVersion, std::shared_ptr<const Workflow>>>
Admission::ResolveWorkflow(const StartRunRequest& req) {
  if (req.workflow) {
    RUNLOOM_ASSIGN_OR_RETURN(WorkflowVersion version, RegisterWorkflow(*req.workflow));
    return std::make_pair(std::move(version), std::make_shared<const Workflow>(*req.workflow));
  }
  return catalog_->Resolve(req.workflow_name, req.workflow_version);
}

absl::StatusOr<CreateRunResult> Admission::StartRun(const StartRunRequest& req,
                                                    const ChildLink* child) {
  RUNLOOM_ASSIGN_OR_RETURN(auto resolved, ResolveWorkflow(req));
  const WorkflowVersion& version = resolved.first;
  const Workflow& wf = *resolved.second;
  RUNLOOM_ASSIGN_OR_RETURN(nlohmann::json frozen, FreezeInputs(wf, req.inputs));
  NewRun run;
  const absl::Time now = clock_->Now();
  run.id = random_->Draw([&](absl::BitGenRef gen) { return NewRunId(now, gen); });
  run.workflow_name = version.name;
  run.workflow_version = version.version;
  run.workflow_digest = version.digest;
  run.inputs_digest = JsonDigest(frozen);
  run.inputs = std::move(frozen);
  run.idempotency_key = req.idempotency_key;
  // The workflow's cap, not this process's: whoever admits the run, every
  // executor and sweeper that judges it later reads the same value (issue 28).
  run.max_attempts = wf.max_attempts;
  // Concurrency (issue 23): fixed on the run, so every claimer and lease
  // applies the same key, cap and order whatever version it reads later.
  if (wf.concurrency.has_value()) {
    RUNLOOM_ASSIGN_OR_RETURN(run.concurrency_key,
                             RenderConcurrencyKey(*wf.concurrency, run.inputs));
    run.concurrency_limit = wf.concurrency->limit;
  }
  run.priority = req.priority.value_or(wf.priority);
  if (run.priority < 0 || run.priority > kMaxPriority) {
    return absl::InvalidArgumentError(
        absl::StrCat("priority is ", run.priority, "; it must be from 0 to ", kMaxPriority));
  }
  RunContext context;
  context.working_dir = WorkingDir(req);
  if (std::optional<TraceContext> caller = ParseTraceParent(req.traceparent)) {
    context.trace = StoredTrace{.trace_id = caller->trace_id, .parent_span_id = caller->span_id};
  }
  // Preflight: a run its tenant cannot pay for is refused, nothing written.
  RunBudgetSpec budget = NewRunBudget(wf, run.inputs, req.budget_micros);
  if (child != nullptr) {
    // Carved from the parent's: never more than the parent had left.
    if (child->budget_cap_micros.has_value() &&
        (!budget.limit_micros.has_value() || *budget.limit_micros > *child->budget_cap_micros)) {
      budget.limit_micros = std::max<int64_t>(0, *child->budget_cap_micros);
    }
    run.parent_run_id = child->parent_run_id;
    context.parent = StoredParent{.run_id = child->parent_run_id,
                                  .step_path = child->step_path,
                                  .revision = child->revision,
                                  .depth = child->depth};
  }
  if (budget.limit_micros.has_value() && *budget.limit_micros < 0) {
    return absl::InvalidArgumentError("a run's budget must be 0 or more");
  }
  if (absl::Status refused = Preflight(*store_, budget); !refused.ok()) {
    // A start repeated under its idempotency key gets the run the key names,
    // as CreateRun would answer, whatever the tenant has left now: it spends
    // nothing new (a resumed parent finds its child so, too).
    if (!req.idempotency_key.empty()) {
      RUNLOOM_ASSIGN_OR_RETURN(std::vector<RunRecord> existing,
                               store_->ListRuns(RunFilter{.workflow_name = version.name,
                                                          .limit = 1,
                                                          .idempotency_key = req.idempotency_key}));
      if (!existing.empty()) return CreateRunResult{.run = existing.front(), .created = false};
    }
    return refused;
  }
  PutBudgetSpec(budget, context);
  run.context = EncodeRunContext(context);
  std::vector<Event> ev = {RunCreatedEvent(run.id, {.workflow = version.name,
                                                    .workflow_version = version.version,
                                                    .workflow_digest = version.digest,
                                                    .inputs_digest = run.inputs_digest,
                                                    .idempotency_key = req.idempotency_key,
                                                    .parent_run_id = run.parent_run_id})};
  // Secret inputs live only in this process's memory, for its own executions.
  // They are in place before the run commits: an executor of this process may
  // claim the run as soon as it is queued.
  nlohmann::json secrets = nlohmann::json::object();
  for (const InputDef& in : wf.inputs) {
    if (in.secret && req.inputs.contains(in.name)) secrets[in.name] = req.inputs[in.name];
  }
  const bool has_secrets = !secrets.empty();
  const std::string run_id = run.id;
  if (has_secrets) secrets_->Put(run_id, std::move(secrets));
  absl::StatusOr<CreateRunResult> created = store_->CreateRun(run, std::move(ev));
  // Not admitted, or the idempotency key named an earlier run (which keeps
  // the secrets of its own admission): nobody will execute `run_id`.
  if (has_secrets && (!created.ok() || !created->created)) secrets_->Erase(run_id);
  if (!created.ok()) return created.status();
  if (created->created) metrics_->RunStarted();
  return created;
}

}  // namespace runloom::engine_internal
