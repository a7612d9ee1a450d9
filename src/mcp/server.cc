// The JSON-RPC 2.0 loop of MCP's stdio transport (server.h). Written here by
// hand: Debian 12 packages no MCP library for C++, and the protocol part is
// this one file.
#include "mcp/server.h"

#include "core/bounded_json.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mcp/tools.h"

#include <algorithm>
#include <exception>
#include <iterator>

namespace runloom::mcp {

using nlohmann::json;

// JSON-RPC 2.0's error codes.
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kInternalError = -32603;

// The MCP revisions this server speaks, newest first. The tools part is the
// same in all of them; initialize answers with the client's when it is one
// of these, else with the newest (and the client decides).
constexpr const char* kProtocolVersions[] = {"2025-11-25", "2025-06-18", "2025-03-26",
                                             "2024-11-05"};

struct McpServer::Reply {
  json result;
  std::optional<int> error_code;
  std::string error_message;
};

namespace {

std::string Dump(const json& j) {
  // Step outputs and event data may hold text that is not UTF-8 (a
  // subprocess's bytes): replaced, never a throw.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string ErrorLine(const json& id, int code, const std::string& message) {
  return Dump({{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}});
}

// The bounds on one message: the line's size, and LoadLimits' values and depth.
LoadLimits MessageLimits(size_t max_line_bytes) {
  LoadLimits limits;
  limits.max_bytes = static_cast<int64_t>(max_line_bytes);
  return limits;
}

json ToolResult(const ToolOutcome& out) {
  if (!out.refusal) {
    return {{"content", {{{"type", "text"}, {"text", Dump(out.result)}}}},
            {"structuredContent", out.result},
            {"isError", false}};
  }
  const wire::Refusal& r = *out.refusal;
  json error = {{"code", r.code}, {"message", r.message}};
  std::string text = absl::StrCat(r.code, ": ", r.message);
  if (!r.field.empty()) {
    error["field"] = r.field;
    absl::StrAppend(&text, " (field: ", r.field, ")");
  }
  return {{"content", {{{"type", "text"}, {"text", text}}}},
          {"structuredContent", {{"error", std::move(error)}}},
          {"isError", true}};
}

}  // namespace

BoundedLine ReadBoundedLine(std::streambuf& in, size_t max_bytes) {
  BoundedLine line;
  for (;;) {
    const int c = in.sbumpc();
    if (c == std::char_traits<char>::eof()) {
      line.eof = true;
      break;
    }
    if (c == '\n') break;
    if (line.too_long) continue;
    if (line.text.size() == max_bytes) {
      line.too_long = true;
      line.text = std::string();  // release it: the rest is dropped unread
      continue;
    }
    line.text.push_back(static_cast<char>(c));
  }
  if (!line.text.empty() && line.text.back() == '\r') line.text.pop_back();
  return line;
}

McpServer::McpServer(Engine* engine, Authenticator* auth, std::string token, McpOptions options)
    : auth_(auth),
      token_(std::move(token)),
      options_(std::move(options)),
      tools_(McpTools(engine, options_.max_follow_wait)) {}

McpServer::~McpServer() = default;

json McpServer::ListTools() const {
  json list = json::array();
  for (const Tool& t : tools_) {
    list.push_back(
        {{"name", t.name}, {"description", t.description}, {"inputSchema", InputSchema(t.args)}});
  }
  return {{"tools", std::move(list)}};
}

McpServer::Reply McpServer::Initialize(const json& params) const {
  std::string version = kProtocolVersions[0];
  if (auto it = params.find("protocolVersion"); it != params.end() && it->is_string()) {
    const std::string& asked = it->get_ref<const std::string&>();
    if (std::find(std::begin(kProtocolVersions), std::end(kProtocolVersions), asked) !=
        std::end(kProtocolVersions)) {
      version = asked;
    }
  }
  return {{{"protocolVersion", version},
           {"capabilities", {{"tools", {{"listChanged", false}}}}},
           {"serverInfo", {{"name", "runloom"}, {"version", options_.version}}},
           {"instructions",
            "runloom runs durable LLM-agent pipelines. list_runs and get_run read runs; "
            "follow_events follows one; start_run, decide, cancel_run, rerun and signal_run "
            "change them. This server executes no run: a `runloom worker` or `runloom serve` on "
            "the same database does. To decide a gate, read its proposal_digest with get_run "
            "first. What a call may do depends on the token's role (viewer, operator, approver, "
            "admin), as over the HTTP API."}}};
}

McpServer::Reply McpServer::CallTool(const json& params) {
  auto name = params.find("name");
  if (name == params.end() || !name->is_string()) {
    return {json(), kInvalidParams, "tools/call needs params.name, a tool's name (tools/list)"};
  }
  const std::string& tool_name = name->get_ref<const std::string&>();
  auto tool = std::find_if(tools_.begin(), tools_.end(),
                           [&tool_name](const Tool& t) { return t.name == tool_name; });
  if (tool == tools_.end()) {
    return {json(), kInvalidParams,
            absl::StrCat("unknown tool '", tool_name.substr(0, 64),
                         "': tools/list names the tools of this server")};
  }
  static const json kNoArgs = json::object();
  auto args_it = params.find("arguments");
  const json& args = args_it == params.end() || args_it->is_null() ? kNoArgs : *args_it;
  if (!args.is_object()) {
    return {json(), kInvalidParams, "tools/call params.arguments must be an object"};
  }
  // Every call authenticates again, so a revoked token stops working at
  // once (as over HTTP, where each request does).
  absl::StatusOr<Principal> who = auth_->Authenticate(token_);
  if (!who.ok()) {
    wire::Refusal r = EngineRefusal(who.status());
    if (absl::IsUnauthenticated(who.status())) {
      r.message =
          "RUNLOOM_TOKEN is not an active token (unknown or revoked): give `runloom mcp` a token "
          "from `runloom token create --name NAME --role ROLE`";
    }
    return {ToolResult({json::object(), std::move(r)})};
  }
  if (absl::Status s = Authorize(*who, tool->operation); !s.ok()) {
    return {ToolResult(
        {json::object(),
         wire::Refusal{s.code(), "forbidden",
                       absl::StrCat(tool->name, " refused: ", s.message(), " ('", who->name,
                                    "'); use a token with the ",
                                    RoleName(RequiredRole(tool->operation)), " role or above"),
                       ""}})};
  }
  if (std::optional<wire::Refusal> bad = CheckArgs(tool->args, args)) {
    return {ToolResult({json::object(), std::move(bad)})};
  }
  return {ToolResult(tool->run(ToolCall{args, *who}))};
}

McpServer::Reply McpServer::Dispatch(const std::string& method, const json& params) {
  if (method == "initialize") return Initialize(params);
  if (method == "ping") return {json::object()};
  if (method == "tools/list") return {ListTools()};
  if (method == "tools/call") return CallTool(params);
  return {json(), kMethodNotFound,
          absl::StrCat("method '", method.substr(0, 64),
                       "' not found: this server offers initialize, ping, tools/list and "
                       "tools/call")};
}

std::optional<std::string> McpServer::HandleLine(absl::string_view line) {
  absl::StatusOr<json> parsed =
      ParseJsonBounded(line, "JSON-RPC message", MessageLimits(options_.max_line_bytes));
  if (!parsed.ok()) {
    return ErrorLine(nullptr, kParseError,
                     absl::StrCat("parse error: ", parsed.status().message()));
  }
  const json& msg = *parsed;
  if (!msg.is_object()) {
    return ErrorLine(nullptr, kInvalidRequest,
                     msg.is_array() ? "batches are not supported: send one message per line"
                                    : "a JSON-RPC message is an object");
  }
  auto id = msg.find("id");
  const bool notification = id == msg.end();
  const json reply_id = notification ? json(nullptr) : *id;
  if (!notification && !id->is_string() && !id->is_number_integer()) {
    return ErrorLine(nullptr, kInvalidRequest, "id must be a string or an integer");
  }
  auto method = msg.find("method");
  if (method == msg.end()) {
    // A response to a request of ours: this server sends none, so it is dropped.
    return std::nullopt;
  }
  auto version = msg.find("jsonrpc");
  if (!method->is_string() || version == msg.end() || *version != "2.0") {
    if (notification) return std::nullopt;
    return ErrorLine(reply_id, kInvalidRequest,
                     "a request has \"jsonrpc\": \"2.0\" and a string \"method\"");
  }
  static const json kNoParams = json::object();
  auto params_it = msg.find("params");
  const json& params = params_it == msg.end() ? kNoParams : *params_it;
  // Notifications (initialized, cancelled, ...) need nothing from us.
  if (notification) return std::nullopt;
  if (!params.is_object()) return ErrorLine(reply_id, kInvalidParams, "params must be an object");
  Reply reply;
  try {
    reply = Dispatch(method->get<std::string>(), params);
  } catch (const std::exception& e) {
    // A JSON access the checks above missed: a bug, answered, not a crash.
    return ErrorLine(reply_id, kInternalError, absl::StrCat("internal error: ", e.what()));
  }
  if (reply.error_code) return ErrorLine(reply_id, *reply.error_code, reply.error_message);
  return Dump({{"jsonrpc", "2.0"}, {"id", reply_id}, {"result", std::move(reply.result)}});
}

void McpServer::Serve(std::istream& in, std::ostream& out) {
  std::streambuf* buf = in.rdbuf();
  for (;;) {
    BoundedLine line = ReadBoundedLine(*buf, options_.max_line_bytes);
    if (line.too_long) {
      out << ErrorLine(nullptr, kInvalidRequest,
                       absl::StrCat("message over ", options_.max_line_bytes,
                                    " bytes: dropped unread; send smaller messages"))
          << '\n'
          << std::flush;
    } else if (line.text.find_first_not_of(" \t") != std::string::npos) {
      if (std::optional<std::string> reply = HandleLine(line.text)) {
        out << *reply << '\n' << std::flush;
      }
    }
    if (line.eof) return;
  }
}

}  // namespace runloom::mcp
