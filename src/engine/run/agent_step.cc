// The agent step (issue 24): a model that calls tools, durable per turn and
// per call. Each model turn is an llm leaf step recorded at
// "<agent>/turn[N]"; each tool call the turn asked for is the tool's own
// step recorded at "<agent>/turn[N]/tool[<name>#<i>]". A resumed agent
// rebuilds the conversation from those records, so it repeats neither a
// finished turn nor a finished call. The calls of one turn run side by side
// unless one of them parks the run (approval, run, sleep); a call that parks
// it pauses the agent, which goes on after the decision or the child's end.
//
// A tool call's name and arguments are the model's words, so they are
// untrusted: a call naming no tool, with arguments over kMaxToolArgumentBytes,
// nested past kMaxToolArgumentDepth, not a JSON object, not matching the
// tool's schema, or putting shell metacharacters (or a leading '-') into an
// exec tool's command line is recorded as failed (class invalid) and
// answered to the model as an error; nothing runs.
#include "engine/run/agent_step.h"

#include "core/bounded_json.h"
#include "core/status_macros.h"
#include "engine/run/event_helpers.h"
#include "engine/run/run_execution.h"
#include "llm/conversation.h"
#include "llm/json_schema.h"
#include "workflow/template.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <functional>
#include <memory>
#include <set>

namespace runloom::engine_internal {
namespace {

constexpr char kMaxTurnsKey[] = "max_turns";
// What the model is told of a tool's result, at most (its output as JSON
// text; the step record keeps all of it).
constexpr size_t kMaxToolResultBytes = 16 * 1024;
// Tool names as they appear in a call's path: the model may write anything.
constexpr size_t kMaxPathToolName = 64;

bool ParksTheRun(const std::string& kind) {
  return kind == "approval" || kind == "run" || kind == "sleep" || kind == "wait";
}

// The name of a call as its path shows it: the tool's name when the model
// named one, else its letters, digits and '_' (at most 64), or "unknown".
std::string PathName(const std::string& name) {
  std::string out;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    if (ok && out.size() < kMaxPathToolName) out.push_back(c);
  }
  return out.empty() ? "unknown" : out;
}

// Characters a shell gives meaning to: refused in an argument that becomes
// a command-line argument of an exec tool, even though exec runs a list
// command without a shell (the program may hand it to one).
constexpr std::string_view kShellMeta = ";|&$`<>(){}[]*?!~#'\"\\\n\r";

// The argument paths (after "args") an exec tool's command line reads.
std::vector<std::vector<std::string>> CommandArgPaths(const StepDef& step) {
  std::vector<std::vector<std::string>> out;
  if (step.kind != "exec" || !step.config.contains("command")) return out;
  for (const std::string& ref : TemplateRefs(step.config["command"])) {
    absl::StatusOr<Ref> r = ParseRef(ref);
    if (r.ok() && r->root == "args") out.push_back(r->path);
  }
  return out;
}

// Every string inside `v` (the value itself, or the strings of an array or
// object), for the command-line check.
void Strings(const nlohmann::json& v, std::vector<std::string>& out) {
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
  } else if (v.is_array() || v.is_object()) {
    for (const nlohmann::json& e : v) Strings(e, out);
  }
}

}  // namespace

absl::StatusOr<int> AgentMaxTurns(const StepDef& step) {
  if (!step.config.contains(kMaxTurnsKey)) return kDefaultAgentTurns;
  const nlohmann::json& v = step.config[kMaxTurnsKey];
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > kMaxAgentTurns) {
    return absl::InvalidArgumentError(absl::StrCat("max_turns must be a whole number from 1 to ",
                                                   kMaxAgentTurns, " (default ", kDefaultAgentTurns,
                                                   "), got ", v.dump()));
  }
  return static_cast<int>(v.get<int64_t>());
}

absl::Status ValidateAgentStep(const StepDef& agent, const StepRegistry& registry) {
  RUNLOOM_RETURN_IF_ERROR(AgentMaxTurns(agent).status());
  std::shared_ptr<StepKind> llm = registry.Find("llm");
  if (llm == nullptr) {
    return absl::InvalidArgumentError(
        "an agent's turns are llm calls, and this engine has no llm step kind");
  }
  RUNLOOM_RETURN_IF_ERROR(llm->Validate(AgentTurnStep(agent)));
  for (const ToolDef& t : agent.tools) {
    absl::StatusOr<std::unique_ptr<JsonSchema>> schema =
        JsonSchema::Compile(t.parameters, "parameters", "arguments");
    if (!schema.ok()) return Annotate(schema.status(), absl::StrCat("tool '", t.name, "'"));
  }
  return absl::OkStatus();
}

StepDef AgentTurnStep(const StepDef& agent) {
  StepDef turn = agent;
  turn.kind = "llm";
  turn.tools.clear();
  turn.config.erase(kMaxTurnsKey);
  if (turn.config.contains("response_schema")) turn.config["response_format"] = "json";
  return turn;
}

// One agent's walk: the tools' schemas, compiled once, and the conversation.
class AgentRun {
 public:
  explicit AgentRun(const StepDef& step) : step_(step) {}

  absl::Status Compile() {
    for (const ToolDef& t : step_.tools) {
      absl::StatusOr<std::unique_ptr<JsonSchema>> schema =
          JsonSchema::Compile(t.parameters, "parameters", "arguments");
      if (!schema.ok()) return Annotate(schema.status(), absl::StrCat("tool '", t.name, "'"));
      schemas_[t.name] = *std::move(schema);
      tools_.push_back({.name = t.name, .description = t.description, .parameters = t.parameters});
    }
    return absl::OkStatus();
  }

  const std::vector<LlmTool>& tools() const { return tools_; }

  const ToolDef* Find(const std::string& name) const {
    for (const ToolDef& t : step_.tools) {
      if (t.name == name) return &t;
    }
    return nullptr;
  }

  // The call's arguments, checked; or why the call is refused.
  absl::StatusOr<nlohmann::json> CheckCall(const LlmToolCall& call) const {
    const ToolDef* tool = Find(call.name);
    if (tool == nullptr) {
      std::vector<std::string> names;
      for (const ToolDef& t : step_.tools) names.push_back(t.name);
      return absl::InvalidArgumentError(absl::StrCat("there is no tool named '",
                                                     PathName(call.name), "'; the tools are ",
                                                     absl::StrJoin(names, ", ")));
    }
    if (call.arguments.size() > kMaxToolArgumentBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("the arguments are ", call.arguments.size(), " bytes; the most a call takes is ",
                       kMaxToolArgumentBytes));
    }
    LoadLimits limits;
    limits.max_bytes = static_cast<int64_t>(kMaxToolArgumentBytes);
    limits.max_depth = kMaxToolArgumentDepth;
    absl::StatusOr<nlohmann::json> args =
        ParseJsonBounded(call.arguments.empty() ? "{}" : call.arguments, "the arguments", limits);
    if (!args.ok()) return args.status();
    if (!args->is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the arguments must be a JSON object, got ", args->type_name()));
    }
    RUNLOOM_RETURN_IF_ERROR(schemas_.at(tool->name)->Validate(*args));
    for (const std::vector<std::string>& path : CommandArgPaths(tool->step)) {
      std::optional<nlohmann::json> v = JsonAtPath(*args, path);
      if (!v) continue;
      std::vector<std::string> strings;
      Strings(*v, strings);
      for (const std::string& s : strings) {
        if (s.find_first_of(kShellMeta) != std::string::npos || (!s.empty() && s[0] == '-')) {
          return absl::InvalidArgumentError(absl::StrCat(
              "args.", absl::StrJoin(path, "."),
              " goes on the tool's command line and may not hold shell metacharacters (",
              std::string(kShellMeta.substr(0, kShellMeta.size() - 2)),
              ") or start with '-'"));
        }
      }
    }
    return args;
  }

 private:
  const StepDef& step_;
  std::vector<LlmTool> tools_;
  std::map<std::string, std::unique_ptr<JsonSchema>> schemas_;
};

namespace {

// What a tool's result tells the model: its output as JSON text (cut), or
// its error.
LlmMessage ToolAnswer(const LlmToolCall& call, const StepResult& result) {
  LlmMessage m{.role = "tool", .tool_call_id = call.id, .tool_name = call.name};
  if (result.state == StepState::kSucceeded) {
    m.text = result.output.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (m.text.size() > kMaxToolResultBytes) {
      m.text = absl::StrCat(m.text.substr(0, kMaxToolResultBytes), "... (cut at ",
                            kMaxToolResultBytes, " bytes)");
    }
  } else {
    m.is_error = true;
    m.text = absl::StrCat("error: ", result.error.empty() ? "the tool failed" : result.error);
  }
  return m;
}

std::vector<LlmToolCall> CallsOf(const nlohmann::json& output) {
  std::vector<LlmToolCall> calls;
  if (!output.is_object() || !output.contains("tool_calls") || !output["tool_calls"].is_array()) {
    return calls;
  }
  for (const nlohmann::json& c : output["tool_calls"]) {
    if (!c.is_object()) continue;
    calls.push_back({.id = c.value("id", ""),
                     .name = c.value("name", ""),
                     .arguments = c.value("arguments", "")});
  }
  return calls;
}

StepResult Recorded(const StepRecord& rec) {
  return {.state = rec.state,
          .output = rec.output,
          .error = rec.error,
          .error_class = rec.error_class};
}

}  // namespace

// Over 50 lines: the turn loop and the call fan-out share the conversation.
absl::StatusOr<StepResult> RunExecution::RunAgent(const StepDef& step, const std::string& path,
                                                  Scope& scope, StopSource& stop) {
  const absl::Time started = config_.clock->Now();
  StepResult result;
  result.state = StepState::kFailed;
  result.error_class = ErrorClass::kInvalid;
  AgentRun agent(step);
  absl::StatusOr<int> max_turns = AgentMaxTurns(step);
  absl::Status compiled = max_turns.ok() ? agent.Compile() : max_turns.status();
  if (!compiled.ok()) {
    result.error = std::string(compiled.message());
    RUNLOOM_RETURN_IF_ERROR(RecordContainer(step, path, result, started));
    return result;
  }
  const StepDef turn_step = AgentTurnStep(step);
  std::vector<LlmMessage> history;
  int calls_made = 0;
  for (int turn = 1; turn <= *max_turns; ++turn) {
    const std::string turn_path = absl::StrCat(path, "/turn[", turn, "]");
    StepResult reply;
    if (auto rec = records_.find(turn_path); rec != records_.end()) {
      reply = Recorded(rec->second);
    } else {
      const nlohmann::json literal = {{kAgentToolsKey, AgentToolsToJson(agent.tools())},
                                      {kAgentHistoryKey, AgentHistoryToJson(history)}};
      RUNLOOM_ASSIGN_OR_RETURN(reply, RunLeaf(turn_step, turn_path, scope, stop, &literal));
    }
    if (reply.state != StepState::kSucceeded) {
      result.error = absl::StrCat("turn ", turn, ": ", reply.error);
      result.error_class = reply.error_class.value_or(ErrorClass::kError);
      RUNLOOM_RETURN_IF_ERROR(RecordContainer(step, path, result, started));
      return result;
    }
    std::vector<LlmToolCall> calls = CallsOf(reply.output);
    history.push_back(
        {.role = "assistant", .text = reply.output.value("text", ""), .tool_calls = calls});
    if (calls.empty()) {
      result.state = StepState::kSucceeded;
      result.error_class.reset();
      result.output = {{"text", reply.output.value("text", "")},
                       {"turns", turn},
                       {"tool_calls", calls_made},
                       {"model", reply.output.value("model", "")}};
      if (reply.output.contains("json")) result.output["json"] = reply.output["json"];
      RUNLOOM_RETURN_IF_ERROR(RecordContainer(step, path, result, started));
      return result;
    }
    calls_made += static_cast<int>(calls.size());
    RUNLOOM_ASSIGN_OR_RETURN(std::vector<StepResult> answers,
                             RunToolCalls(agent, calls, turn_path, scope, stop));
    if (halt_ != Halt::kNone) return StepResult{};  // a call parked the run
    for (size_t i = 0; i < calls.size(); ++i) history.push_back(ToolAnswer(calls[i], answers[i]));
  }
  result.error = absl::StrCat("max_turns (", *max_turns,
                              ") reached without a final answer; raise max_turns or tell the "
                              "model in the prompt when to stop calling tools");
  result.error_class = ErrorClass::kError;
  RUNLOOM_RETURN_IF_ERROR(RecordContainer(step, path, result, started));
  return result;
}

// Over 50 lines: recorded calls, refused calls and the side-by-side run
// share the per-call slots.
absl::StatusOr<std::vector<StepResult>> RunExecution::RunToolCalls(
    const AgentRun& agent, const std::vector<LlmToolCall>& calls, const std::string& turn_path,
    Scope& scope, StopSource& stop) {
  const size_t n = calls.size();
  struct CallRun {
    std::string path;
    const ToolDef* tool = nullptr;  // null: recorded or refused
    nlohmann::json args;
    Scope scope;
    absl::StatusOr<StepResult> result = absl::UnknownError("not run");
  };
  std::vector<CallRun> runs(n);
  std::vector<size_t> pending;
  bool parks = false;
  for (size_t i = 0; i < n; ++i) {
    CallRun& r = runs[i];
    r.path = absl::StrCat(turn_path, "/tool[", PathName(calls[i].name), "#", i, "]");
    if (auto rec = records_.find(r.path); rec != records_.end()) {
      r.result = Recorded(rec->second);
      continue;
    }
    absl::StatusOr<nlohmann::json> args = agent.CheckCall(calls[i]);
    if (!args.ok()) {
      // Refused: recorded as failed, never run; the model reads why.
      StepResult refused{.state = StepState::kFailed,
                         .output = nullptr,
                         .error = absl::StrCat("refused, not run: ", args.status().message()),
                         .error_class = ErrorClass::kInvalid};
      StepDef as_step;
      as_step.id = PathName(calls[i].name);
      as_step.kind = "tool";
      RUNLOOM_RETURN_IF_ERROR(
          Record(as_step, r.path, refused, 1, config_.clock->Now(), "",
                 {events::StepFailed(run_.id, r.path, as_step.id, 1, refused.error,
                                     ErrorClass::kInvalid, false, std::nullopt)}));
      r.result = refused;
      continue;
    }
    r.tool = agent.Find(calls[i].name);
    r.args = *std::move(args);
    r.scope.parent = &scope;
    r.scope.args = &r.args;
    parks = parks || ParksTheRun(r.tool->step.kind);
    pending.push_back(i);
  }
  auto run_one = [&](size_t i) {
    runs[i].result = RunStep(runs[i].tool->step, runs[i].path, runs[i].scope, stop);
  };
  if (parks || pending.size() < 2) {
    // One at a time: a call that parks the run (a gate, a child run) stops
    // the walk, and the calls after it wait for the next execution.
    for (size_t i : pending) {
      run_one(i);
      if (!runs[i].result.ok() || halt_ != Halt::kNone) break;
    }
  } else {
    ++parallel_depth_;
    std::vector<std::function<void()>> tasks;
    for (size_t i : pending) tasks.emplace_back([&run_one, i] { run_one(i); });
    config_.scheduler->RunAll(tasks, config_.clock, absl::InfiniteFuture(), [](size_t) {});
    --parallel_depth_;
  }
  std::vector<StepResult> out;
  for (CallRun& r : runs) {
    if (halt_ != Halt::kNone) break;
    if (!r.result.ok()) return r.result.status();
    out.push_back(*std::move(r.result));
  }
  return out;
}

}  // namespace runloom::engine_internal
