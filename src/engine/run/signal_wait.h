// Signals on the executor's side (issue 23): which `wait` steps are valid,
// what a wait step's config says, the key a signal consumed by a wait is
// marked with, and the checks a signal passes before the store keeps it.
// RunExecution::RunWait (signal_wait.cc) parks the run at a wait step with
// no signal in its mailbox; SendRunSignal (decisions.cc) is what
// `POST /api/v1/runs/{id}/signals/{name}` and `runloom signal` call.
//
// Thread-safety: stateless functions.
#pragma once

#include "runloom/workflow.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace runloom::engine_internal {

// A wait step's config, as written: `signal:` a name, `schema:` the
// payload's JSON Schema (optional). `timeout:` is the step's common key
// (StepDef::timeout, checked by the loader; defaults.timeout does not apply
// to a wait): RunWait sets `timeout` from it.
struct WaitConfig {
  std::string signal;
  std::optional<absl::Duration> timeout;
  nlohmann::json schema;  // null = any payload
};

// kInvalidArgument naming the key: an unknown key, no signal, a name that is
// not 1-128 of [A-Za-z0-9_.-] starting with a letter or digit, a schema
// valijson refuses.
absl::StatusOr<WaitConfig> ParseWaitConfig(const nlohmann::json& config);

// kInvalidArgument "<file>:<line>: step '<id>': <what>".
absl::Status StepConfigError(const Workflow& wf, const StepDef& step, const std::string& what);

// For a step that parks the whole run (wait, run): kInvalidArgument when it
// sits inside a parallel branch, naming the step and its `kind`.
absl::Status CheckParksOutsideParallel(const Workflow& wf, const StepDef& step, bool in_parallel);

// ParseWaitConfig, and not inside a parallel branch (a wait parks the whole
// run). kInvalidArgument "<file>:<line>: step '<id>': ...".
absl::Status ValidateWaitStep(const Workflow& wf, const StepDef& step, bool in_parallel);

// Whether `name` is a valid signal name (see ParseWaitConfig).
bool IsSignalName(const std::string& name);

// The key a signal consumed by the wait at `path` of `revision` is marked
// with: one per wait a run reaches (a loop's iterations have their own paths).
std::string WaitKey(int64_t revision, const std::string& path);

// A wake time as events carry it: RFC 3339, UTC, microseconds (timer.cc).
std::string WakeTimeText(absl::Time t);

// The wait steps of `wf` (loops included) that wait for `signal`.
std::vector<const StepDef*> WaitStepsFor(const Workflow& wf, const std::string& signal);

// Checks a signal for a run of `wf` before anything is kept: kInvalidArgument
// naming the field ("name", "payload", "idempotency_key"): a bad name, a
// workflow with no wait step for it, a payload over 64 KiB or not matching
// the schema of a wait step for it.
absl::Status CheckSignal(const Workflow& wf, const std::string& name,
                         const nlohmann::json& payload, const std::string& idempotency_key);

}  // namespace runloom::engine_internal
