// The tools `runloom mcp` offers (server.h): each a name, a description, a
// JSON Schema of its arguments, the Operation it needs (auth/operations.h)
// and a thin handler: check the arguments, call the Engine, encode with the
// wire form (wire/wire.h). The same shapes as the HTTP API's bodies, so an
// agent that reads one reads the other.
//
// Arguments are described once (ArgSpec): the inputSchema a client sees
// and the check CheckArgs applies are made from the same list, so they
// cannot disagree.
//
// Thread-safety: the table is const after McpTools(); a handler is as
// thread-safe as the Engine (it is).
#pragma once

#include "runloom/auth.h"
#include "runloom/engine.h"

#include "absl/time/time.h"
#include "auth/operations.h"
#include "nlohmann/json.hpp"
#include "wire/refusal.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace runloom::mcp {

// The longest string argument, in bytes (run ids, names, keys, digests,
// paths, feedback); inputs and payloads are objects, bounded by the line.
inline constexpr size_t kMaxStringArgBytes = 64 * 1024;

enum class ArgType { kString, kInteger, kBoolean, kObject, kAny };

// One argument of a tool.
struct ArgSpec {
  std::string name;
  ArgType type = ArgType::kString;
  bool required = false;
  std::string description;
  // kInteger: the accepted range (both inclusive).
  int64_t min = 0;
  int64_t max = INT64_MAX;
  // kString: the accepted values (empty = any).
  std::vector<std::string> one_of;
};

// What a handler answers: a result object, or a refusal (isError).
struct ToolOutcome {
  nlohmann::json result = nlohmann::json::object();
  std::optional<wire::Refusal> refusal;
};

// The arguments of one call, checked against the tool's specs, and who
// makes it (already authenticated and authorized for the tool's Operation).
struct ToolCall {
  const nlohmann::json& args;
  const Principal& principal;
};

struct Tool {
  std::string name;
  std::string description;
  Operation operation = Operation::kRead;
  std::vector<ArgSpec> args;
  std::function<ToolOutcome(const ToolCall&)> run;
};

// The JSON Schema of `args`: an object with those properties, the required
// ones listed, no others allowed.
nlohmann::json InputSchema(const std::vector<ArgSpec>& args);

// nullopt when `args` (the call's "arguments") fits `specs`; else the
// refusal (invalid_argument naming the field, what it must be, and the
// tool's arguments).
std::optional<wire::Refusal> CheckArgs(const std::vector<ArgSpec>& specs,
                                       const nlohmann::json& args);

// An engine error as a refusal: the wire's code and the engine's message;
// an internal error's message is logged and replaced (it may hold internals).
wire::Refusal EngineRefusal(const absl::Status& s);

// list_runs, get_run, follow_events, list_workflows, start_run, decide,
// cancel_run, rerun, signal_run, list_dead_letters, redrive_dead_letter.
// `engine` must outlive the tools; follow_events waits at most `max_wait`.
std::vector<Tool> McpTools(Engine* engine, absl::Duration max_wait);

}  // namespace runloom::mcp
