// RunContext: what a run carries besides its columns, as one typed value,
// and the one codec of its stored JSON form (RunRecord::context), as the gate
// codec (gate_codec.cc) is for the pending gate. Nothing else in the engine
// reads or writes a key of RunRecord::context; the wire form names the fields
// (wire.cc), so clients never see the stored JSON.
//
// Stored keys: "working_dir", "feedback", "rerun_from", "budget" {tenant,
// limit_micros}, "pending_gate" (PendingGateToJson, runloom/gate.h), "timer"
// {step_path, revision, until_micros} (a parked sleep, issue 23), "parent"
// {run_id, step_path, revision, depth} (a child run, issue 23), "trace"
// {trace_id, parent_span_id} (a traceparent given at admission, issue 25). A key
// this binary does not know (written by a newer one) is kept as it is on
// every write, so a rolling upgrade loses nothing.
//
// Thread-safety: plain values and stateless functions.
#pragma once

#include "runloom/run.h"
#include "runloom/trace.h"

#include "absl/time/time.h"
#include "nlohmann/json.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace runloom::engine_internal {

// The tenant and budget fixed at admission (run_budget.h).
struct StoredBudget {
  std::string tenant;                   // "" = none
  std::optional<int64_t> limit_micros;  // the run's own budget; nullopt = none
};

// The timer a waiting run waits at: the sleep step at `step_path` of
// `revision` is done at `until` (the store's clock).
struct StoredTimer {
  std::string step_path;
  int64_t revision = 0;
  absl::Time until;
};

// A child run's link to the `kind: run` step that started it: the parent's
// run id, the step's path and revision, and how deep the child is (1 for
// a child of a run without a parent).
struct StoredParent {
  std::string run_id;
  std::string step_path;
  int64_t revision = 0;
  int depth = 1;
};

// The trace a run joins (issue 25, runloom/trace.h): the traceparent given
// to StartRun (POST /runs). Without one the run's trace id is derived from
// its id (TraceIdOf) and nothing is stored.
struct StoredTrace {
  std::string trace_id;
  std::string parent_span_id;  // the caller's span: the run span's parent
};

struct RunContext {
  // Where exec steps run, from the workflow file's directory at admission;
  // "" = the engine's working directory.
  std::string working_dir;
  // The reviewer's feedback for a revision or a rerun ("" = none); templates
  // read it as run.feedback.
  std::string feedback;
  // The phase a rerun or revision starts from ("" = none): run.rerun_from.
  std::string rerun_from;
  std::optional<StoredBudget> budget;
  // The pending gate's JSON form (null = none); read and written through
  // the gate codec (PendingGateOf, ContextWithPendingGate).
  nlohmann::json pending_gate;
  std::optional<StoredTimer> timer;
  std::optional<StoredParent> parent;
  std::optional<StoredTrace> trace;
  // Keys this binary does not know, kept as they are.
  nlohmann::json unknown = nlohmann::json::object();
};

// Reads the stored form. Fields of the wrong JSON type read as absent: the
// stored form is written only by EncodeRunContext.
RunContext DecodeRunContext(const nlohmann::json& stored);
// The stored form: only the fields that are set, and the unknown keys.
nlohmann::json EncodeRunContext(const RunContext& context);

// DecodeRunContext(run.context).
RunContext ContextOf(const RunRecord& run);

// The trace and span id of the run's span in its current revision
// (runloom/trace.h).
TraceContext RunTraceOf(const RunRecord& run);

}  // namespace runloom::engine_internal
