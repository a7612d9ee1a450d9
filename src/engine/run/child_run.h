// Child runs on the executor's side (issue 23): which `kind: run` steps are
// valid, what their config says, the idempotency key a child is admitted
// under, and the signal its end sends to the parent.
// RunExecution::RunChild (child_run.cc) starts the child and parks the
// parent until it ends; NotifyParentOfEnd is what the engine calls once a
// child run is finished, whoever finished it.
//
// Thread-safety: stateless functions.
#pragma once

#include "runloom/store.h"
#include "runloom/workflow.h"

#include "engine/rules/child_signal.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace runloom::engine_internal {

// What admits a run as the child of a `kind: run` step: the
// parent, the step, how deep the child is, and the most it may spend (the
// parent's budget left; nullopt = the parent has no budget).
struct ChildLink {
  std::string parent_run_id;
  std::string step_path;
  int64_t revision = 1;
  int depth = 1;
  std::optional<int64_t> budget_cap_micros;
};

// What admits a child: the run of `workflow` (`version`, 0 = latest) with
// `inputs` under `idempotency_key`, as `link` says.
struct ChildStart {
  std::string workflow;
  int64_t version = 0;
  nlohmann::json inputs = nlohmann::json::object();
  std::string idempotency_key;
  std::string working_dir;  // the parent's
  ChildLink link;
  // The parent run's span as a W3C traceparent: the child's run span joins
  // the parent's trace under it (runloom/trace.h); "" = untraced.
  std::string traceparent;
};
// The engine's admission of a child (Admission::StartRun with a ChildLink).
using StartChildFn = std::function<absl::StatusOr<CreateRunResult>(const ChildStart&)>;

// How deep children may nest: a run step of a run at this depth fails
// (class invalid) instead of starting a child.
inline constexpr int kMaxChildDepth = 8;

// A run step's config, as written (templates not resolved): `workflow:` a
// catalog name, `version:` (0 or absent = the latest at the child's start),
// `inputs:` a mapping of templates.
struct ChildConfig {
  std::string workflow;
  int64_t version = 0;
  nlohmann::json inputs = nlohmann::json::object();
};

// kInvalidArgument naming the key: an unknown key, no workflow, a name that
// is not a workflow name, a version that is not a whole number >= 0,
// inputs that are not a mapping.
absl::StatusOr<ChildConfig> ParseChildConfig(const nlohmann::json& config);

// ParseChildConfig, and not inside a parallel branch (it parks the run), no
// `timeout:` (the child's own steps carry timeouts). kInvalidArgument
// "<file>:<line>: step '<id>': ...".
absl::Status ValidateChildStep(const Workflow& wf, const StepDef& step, bool in_parallel);

// The idempotency key of the child that attempt `attempt` of the run step at
// `path` of `revision` of `parent_run_id` starts: a resumed parent finds the
// same child instead of starting a second.
std::string ChildKey(const std::string& parent_run_id, int64_t revision, const std::string& path,
                     int attempt);

// Sends `child`'s parent the signal that `child` ended (a no-op for a run
// without a parent or not finished). Idempotent: one signal per child,
// however many processes call it. The parent that waits for the child
// wakes; one that has not parked yet finds it in its mailbox. Errors are
// returned for the caller to log: the parent's own poll (RunChild) finds
// the child's end anyway.
// What the parent is told of a finished child: the execution that finished
// it knows all three, so telling needs no read of the child.
struct ChildEnd {
  std::string run_id;
  std::string parent_run_id;  // "" = a run without a parent: nothing to tell
  RunStatus status = RunStatus::kQueued;
};
ChildEnd EndOf(const RunRecord& child);
absl::Status NotifyParentOfEnd(SignalStore& store, const ChildEnd& child);

}  // namespace runloom::engine_internal
