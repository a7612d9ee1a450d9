// The tools of `runloom mcp`: parse (already checked against the specs),
// call the engine, encode with the wire form. Descriptions are what an
// agent reads to choose a tool: each says what it does, what it needs, and
// what comes next.
#include "mcp/tools.h"

#include "runloom/gate.h"
#include "runloom/status.h"
#include "runloom/workflow.h"

#include "absl/strings/str_cat.h"
#include "wire/wire.h"

#include <algorithm>
#include <iterator>

namespace runloom::mcp {
namespace {

using nlohmann::json;

constexpr int kDefaultListLimit = 20;
constexpr int kDefaultEventLimit = 100;
constexpr int kDefaultDeadLetterLimit = 100;
constexpr int64_t kDefaultFollowWaitSeconds = 10;

ToolOutcome Refused(wire::Refusal r) { return {json::object(), std::move(r)}; }
ToolOutcome Refused(const absl::Status& s) { return Refused(EngineRefusal(s)); }

std::string Str(const json& args, const char* name) {
  auto it = args.find(name);
  return it == args.end() ? std::string() : it->get<std::string>();
}

int64_t Int(const json& args, const char* name, int64_t fallback) {
  auto it = args.find(name);
  return it == args.end() ? fallback : it->get<int64_t>();
}

ArgSpec RunIdArg() {
  return {.name = "run_id", .required = true, .description = "the run's id (list_runs shows them)"};
}

ToolOutcome ListRuns(Engine* e, const ToolCall& c) {
  RunQuery q;
  if (std::string status = Str(c.args, "status"); !status.empty()) {
    q.status = ParseRunStatus(status);
  }
  q.workflow = Str(c.args, "workflow");
  q.parent_run_id = Str(c.args, "parent_run_id");
  q.cursor = Str(c.args, "cursor");
  q.limit = static_cast<int>(Int(c.args, "limit", kDefaultListLimit));
  absl::StatusOr<RunPage> page = e->ListRuns(q);
  if (!page.ok()) return Refused(page.status());
  return {wire::RunPageToJson(*page)};
}

// The run, its steps (of one revision), their counts and the gate it waits at.
ToolOutcome GetRun(Engine* e, const ToolCall& c) {
  absl::StatusOr<RunRecord> run = e->GetRun(Str(c.args, "run_id"));
  if (!run.ok()) return Refused(run.status());
  const int64_t revision = Int(c.args, "revision", run->revision);
  absl::StatusOr<std::vector<StepRecord>> steps = e->ListSteps(run->id, revision);
  if (!steps.ok()) return Refused(steps.status());
  absl::StatusOr<std::optional<PendingGate>> gate = PendingGateOfPaused(*run);
  if (!gate.ok()) return Refused(gate.status());
  json out = {{"run", wire::RunToJson(*run)},
              {"step_counts", wire::StepCountsToJson(*steps, revision)},
              {"pending_gate", gate->has_value() ? wire::GateToJson(**gate) : json(nullptr)}};
  json list = json::array();
  for (const StepRecord& s : *steps) list.push_back(wire::StepToJson(s));
  out["steps"] = std::move(list);
  return {std::move(out)};
}

ToolOutcome FollowEvents(Engine* e, absl::Duration max_wait, const ToolCall& c) {
  const std::string run_id = Str(c.args, "run_id");
  const int64_t after = Int(c.args, "after_seq", 0);
  const int limit = static_cast<int>(Int(c.args, "limit", kDefaultEventLimit));
  const absl::Duration wait =
      std::min(absl::Seconds(Int(c.args, "wait_seconds", kDefaultFollowWaitSeconds)), max_wait);
  absl::StatusOr<std::vector<Event>> events = e->ListEvents(run_id, after, limit);
  if (events.ok() && events->empty() && wait > absl::ZeroDuration()) {
    events = e->WatchEvents(run_id, after, e->clock()->Now() + wait, limit);
  }
  if (!events.ok()) return Refused(events.status());
  absl::StatusOr<RunRecord> run = e->GetRun(run_id);
  if (!run.ok()) return Refused(run.status());
  json list = json::array();
  for (const Event& ev : *events) list.push_back(wire::EventToJson(ev));
  const bool settled = IsTerminal(run->status) || run->status == RunStatus::kPaused;
  return {{{"events", std::move(list)},
           {"next_after_seq", events->empty() ? after : events->back().seq},
           {"run_status", std::string(ToString(run->status))},
           {"settled", settled}}};
}

ToolOutcome ListWorkflows(Engine* e, const ToolCall&) {
  absl::StatusOr<std::vector<WorkflowVersion>> all = e->ListWorkflows();
  if (!all.ok()) return Refused(all.status());
  json list = json::array();
  for (const WorkflowVersion& v : *all) list.push_back(wire::WorkflowVersionToJson(v, false));
  return {{{"workflows", std::move(list)}}};
}

// A catalog workflow needs start_run's operator role; a workflow file
// registers a definition in the catalog first, which over HTTP needs admin
// (POST /api/v1/workflows), and so it does here.
ToolOutcome StartRun(Engine* e, const ToolCall& c) {
  const std::string name = Str(c.args, "workflow");
  const std::string file = Str(c.args, "workflow_file");
  if (name.empty() == file.empty()) {
    return Refused(wire::Refusal{absl::StatusCode::kInvalidArgument, "invalid_argument",
                                 "give exactly one of workflow (a catalog name; list_workflows "
                                 "shows them) and workflow_file (a YAML file's path)",
                                 "workflow"});
  }
  StartRunRequest req;
  if (!file.empty()) {
    if (absl::Status s = Authorize(c.principal, Operation::kRegisterWorkflow); !s.ok()) {
      return Refused(wire::Refusal{
          s.code(), "forbidden",
          absl::StrCat("starting from workflow_file registers it in the catalog: ", s.message(),
                       "; start a registered workflow by name instead, or use an admin token"),
          "workflow_file"});
    }
    absl::StatusOr<Workflow> wf = LoadWorkflowFile(file);
    if (wf.ok()) {
      if (absl::Status s = e->ValidateSteps(*wf); !s.ok()) wf = s;
    }
    if (!wf.ok()) {
      wire::Refusal r = EngineRefusal(wf.status());
      r.field = "workflow_file";
      return Refused(std::move(r));
    }
    req.workflow = *std::move(wf);
  } else {
    req.workflow_name = name;
    req.workflow_version = Int(c.args, "version", 0);
  }
  if (auto it = c.args.find("inputs"); it != c.args.end()) req.inputs = *it;
  req.idempotency_key = Str(c.args, "idempotency_key");
  if (auto it = c.args.find("priority"); it != c.args.end()) {
    req.priority = static_cast<int>(it->get<int64_t>());
  }
  absl::StatusOr<CreateRunResult> started = e->StartRun(req);
  if (!started.ok()) {
    wire::Refusal r = EngineRefusal(started.status());
    if (r.code == "invalid_argument") r.field = "inputs";
    return Refused(std::move(r));
  }
  return {{{"run", wire::RunToJson(started->run)}, {"created", started->created}}};
}

ToolOutcome Decide(Engine* e, const ToolCall& c) {
  DecisionRequest d;
  const std::string run_id = Str(c.args, "run_id");
  d.proposal_digest = Str(c.args, "digest");
  const std::string decision = Str(c.args, "decision");
  d.decision = ParseDecision(decision);
  if (!d.decision.has_value()) return Refused(wire::UnknownDecisionRefusal(decision));
  if (auto it = c.args.find("edited"); it != c.args.end()) d.edited_proposal = *it;
  d.feedback = Str(c.args, "feedback");
  d.from_phase = Str(c.args, "from_phase");
  absl::StatusOr<RunRecord> run = e->Decide(run_id, d, c.principal.name);
  if (std::optional<wire::Refusal> refused =
          wire::DecideRefusal(run.status(), run_id, d.decision)) {
    return Refused(*std::move(refused));
  }
  if (!run.ok()) return Refused(run.status());
  return {{{"run", wire::RunToJson(*run)}}};
}

ToolOutcome CancelRun(Engine* e, const ToolCall& c) {
  absl::StatusOr<RunRecord> run = e->Cancel(Str(c.args, "run_id"), c.principal.name);
  if (!run.ok()) return Refused(run.status());
  return {{{"run", wire::RunToJson(*run)}}};
}

ToolOutcome Rerun(Engine* e, const ToolCall& c) {
  const std::string phase = Str(c.args, "from_phase");
  if (phase.empty()) {
    return Refused(wire::Refusal{absl::StatusCode::kInvalidArgument, "invalid_argument",
                                 "from_phase must name a phase", "from_phase"});
  }
  absl::StatusOr<RunRecord> run =
      e->Rerun(Str(c.args, "run_id"), phase, Str(c.args, "feedback"), c.principal.name);
  if (!run.ok()) {
    wire::Refusal r = EngineRefusal(run.status());
    if (r.code == "invalid_argument") r.field = "from_phase";
    return Refused(std::move(r));
  }
  return {{{"run", wire::RunToJson(*run)}}};
}

ToolOutcome SignalRun(Engine* e, const ToolCall& c) {
  SignalRequest req;
  req.name = Str(c.args, "name");
  if (auto it = c.args.find("payload"); it != c.args.end()) req.payload = *it;
  req.idempotency_key = Str(c.args, "idempotency_key");
  absl::StatusOr<SendSignalResult> sent = e->Signal(Str(c.args, "run_id"), req, c.principal.name);
  if (!sent.ok()) return Refused(sent.status());
  json out = wire::SignalToJson(sent->signal);
  out["created"] = sent->created;
  out["resolved"] = sent->resolved;
  return {{{"signal", std::move(out)}}};
}

ToolOutcome ListDeadLetters(Engine* e, const ToolCall& c) {
  absl::StatusOr<std::vector<DeadLetter>> all =
      e->ListDeadLetters(static_cast<int>(Int(c.args, "limit", kDefaultDeadLetterLimit)));
  if (!all.ok()) return Refused(all.status());
  json list = json::array();
  for (const DeadLetter& d : *all) list.push_back(wire::DeadLetterToJson(d));
  return {{{"dead_letters", std::move(list)}}};
}

ToolOutcome RedriveDeadLetter(Engine* e, const ToolCall& c) {
  const std::string id = Str(c.args, "id");
  if (absl::Status s = e->RedriveDeadLetter(id); !s.ok()) return Refused(s);
  return {{{"redriven", id}}};
}

std::vector<std::string> StatusNames() {
  std::vector<std::string> names;
  for (RunStatus s : kAllRunStatuses) names.emplace_back(ToString(s));
  return names;
}

std::vector<std::string> DecisionNames() { return {std::begin(kDecisions), std::end(kDecisions)}; }

}  // namespace

std::vector<Tool> McpTools(Engine* engine, absl::Duration max_wait) {
  auto bind = [engine](ToolOutcome (*fn)(Engine*, const ToolCall&)) {
    return [engine, fn](const ToolCall& c) { return fn(engine, c); };
  };
  const int64_t max_wait_s = absl::ToInt64Seconds(max_wait);
  std::vector<Tool> tools;
  tools.push_back(
      {"list_runs",
       "List runs, newest first, one page at a time. Pass next_cursor back as cursor for the "
       "next page (with the same filters). Needs the viewer role.",
       Operation::kRead,
       {{.name = "status", .description = "only runs in this status", .one_of = StatusNames()},
        {.name = "workflow", .description = "only runs of this workflow name"},
        {.name = "parent_run_id", .description = "only the children of this run"},
        {.name = "limit",
         .type = ArgType::kInteger,
         .description = "runs per page (default 20)",
         .min = 1,
         .max = kMaxReadLimit},
        {.name = "cursor", .description = "a previous page's next_cursor"}},
       bind(ListRuns)});
  tools.push_back(
      {"get_run",
       "A run with its steps, step counts and the approval gate it waits at (pending_gate: its "
       "proposal and proposal_digest, which decide needs; null when not paused at one). Needs "
       "the viewer role.",
       Operation::kRead,
       {RunIdArg(),
        {.name = "revision",
         .type = ArgType::kInteger,
         .description = "the revision whose steps to show (default: the run's current one)",
         .min = 1}},
       bind(GetRun)});
  tools.push_back(
      {"follow_events",
       absl::StrCat("The run's events after after_seq, oldest first. When there are none yet, "
                    "waits up to wait_seconds (at most ",
                    max_wait_s,
                    ") for one. Call again with next_after_seq to keep following; settled is "
                    "true once the run is finished or paused at a gate. Needs the viewer role."),
       Operation::kRead,
       {RunIdArg(),
        {.name = "after_seq",
         .type = ArgType::kInteger,
         .description = "return events with seq greater than this (default 0: from the start)"},
        {.name = "wait_seconds",
         .type = ArgType::kInteger,
         .description = "how long to wait for a new event when there is none (default 10)",
         .max = max_wait_s},
        {.name = "limit",
         .type = ArgType::kInteger,
         .description = "the most events to return (default 100)",
         .min = 1,
         .max = kMaxReadLimit}},
       [engine, max_wait](const ToolCall& c) { return FollowEvents(engine, max_wait, c); }});
  tools.push_back({"list_workflows",
                   "The workflows in the catalog, every version (start_run takes a name). "
                   "Needs the viewer role.",
                   Operation::kRead,
                   {},
                   bind(ListWorkflows)});
  tools.push_back(
      {"start_run",
       "Start a run of a catalog workflow (workflow, needs the operator role) or of a workflow "
       "YAML file on the server's machine (workflow_file: registers it in the catalog first, "
       "needs the admin role). The run is queued: a `runloom worker` or `runloom serve` on the "
       "same database executes it; follow it with get_run or follow_events.",
       Operation::kStartRun,
       {{.name = "workflow", .description = "a catalog workflow's name"},
        {.name = "workflow_file", .description = "a workflow YAML file's path"},
        {.name = "version",
         .type = ArgType::kInteger,
         .description = "with workflow: the version (default 0: the latest)"},
        {.name = "inputs",
         .type = ArgType::kObject,
         .description = "the run's inputs, by the workflow's input names"},
        {.name = "idempotency_key",
         .description = "the same key (per workflow) returns the first run instead of a new one"},
        {.name = "priority",
         .type = ArgType::kInteger,
         .description = "0-9, higher first among its concurrency key's queued runs",
         .max = kMaxPriority}},
       bind(StartRun)});
  tools.push_back(
      {"decide",
       "Decide on the approval gate a paused run waits at. digest must be the pending gate's "
       "proposal_digest from get_run (the proposal you reviewed): a stale one is refused and "
       "nothing is recorded. The reviewer is your token's name. Needs the approver role.",
       Operation::kDecide,
       {RunIdArg(),
        {.name = "digest",
         .required = true,
         .description = "the proposal_digest of the gate you reviewed (sha256:...)"},
        {.name = "decision",
         .required = true,
         .description = "what you decide",
         .one_of = DecisionNames()},
        {.name = "edited",
         .type = ArgType::kAny,
         .description = "decision edit: your version of the proposal"},
        {.name = "feedback", .description = "decision request_revision: what to change"},
        {.name = "from_phase",
         .description = "decision request_revision: the phase to rerun from (default: the "
                        "gate's revision_phase)"}},
       bind(Decide)});
  tools.push_back(
      {"cancel_run",
       "Cancel a run: queued, paused and waiting runs at once; a running run stops at its "
       "executor's next check (within a second). Needs the operator role.",
       Operation::kCancelRun,
       {RunIdArg()},
       bind(CancelRun)});
  tools.push_back(
      {"rerun",
       "Start a new revision of a finished, paused or waiting run from the first step of a "
       "phase: earlier steps keep their records. Needs the operator role.",
       Operation::kRerunRun,
       {RunIdArg(),
        {.name = "from_phase", .required = true, .description = "the phase to rerun from"},
        {.name = "feedback", .description = "feedback for the new revision (run.feedback)"}},
       bind(Rerun)});
  tools.push_back(
      {"signal_run",
       "Send a signal to a run's wait steps: kept in its mailbox until a wait for that name "
       "consumes it (at once when the run waits for it). Needs the operator role.",
       Operation::kSignalRun,
       {RunIdArg(),
        {.name = "name",
         .required = true,
         .description = "the signal's name (a wait step's signal:)"},
        {.name = "payload",
         .type = ArgType::kAny,
         .description = "the signal's data (at most 64 KiB of JSON)"},
        {.name = "idempotency_key", .description = "the same key again keeps nothing new"}},
       bind(SignalRun)});
  tools.push_back(
      {"list_dead_letters",
       "Queue messages the transport stopped delivering after too many deliveries without an "
       "ack, oldest first; their runs stay queued until redriven. Needs the viewer role.",
       Operation::kRead,
       {{.name = "limit",
         .type = ArgType::kInteger,
         .description = "the most to return (default 100)",
         .min = 1,
         .max = kMaxReadLimit}},
       bind(ListDeadLetters)});
  tools.push_back({"redrive_dead_letter",
                   "Deliver a dead letter's run again with a fresh delivery count. Needs the "
                   "admin role.",
                   Operation::kRedriveDeadLetter,
                   {{.name = "id",
                     .required = true,
                     .description = "the dead letter's id (list_dead_letters shows them)"}},
                   bind(RedriveDeadLetter)});
  return tools;
}

}  // namespace runloom::mcp
