// McpServer: runloom as a Model Context Protocol server over stdio, so a
// coding agent operates runloom the way people do (`runloom mcp`,
// docs/operations.md "runloom mcp").
//
// The transport is MCP's stdio transport: JSON-RPC 2.0, one message per
// line (UTF-8, no embedded newline) on stdin, one reply per request line on
// stdout; nothing else is ever written to stdout. The server offers the
// *tools* capability only: initialize, notifications/initialized, ping,
// tools/list and tools/call (the tools are in mcp/tools.h). Debian 12
// packages no MCP library for C++, and the protocol part is this small loop,
// so it is written here over nlohmann-json.
//
// Access: every tools/call authenticates the token the server was given
// (so a revoked token stops working at once, as over HTTP) and checks the
// tool's Operation against the caller's role with the same rule the HTTP
// API applies (auth/operations.h). A refused call is a tool result with
// isError true and the wire's refusal {code, message, field}
// (wire/refusal.h); a protocol fault is a JSON-RPC error: -32700 for text
// that is not JSON, -32600 for a message that is not a request (or a line
// over McpOptions::max_line_bytes), -32601 for an unknown method, -32602 for
// bad params or an unknown tool. The token never appears in a reply or a
// log line.
//
// Input is untrusted: a line is read up to max_line_bytes and parsed under
// LoadLimits (core/bounded_json.h); a tool's arguments are checked against
// its input schema before anything runs. Nothing is ever run in a shell.
//
// Execution: the server reads and changes runs through the Engine only; it
// never Start()s it, so runs progress only where a `runloom worker` or
// `runloom serve` executes them (as with `runloom decide` and the other
// commands that do not execute).
//
// Thread-safety: one thread calls HandleLine/Serve at a time; requests are
// answered in order, one at a time (follow_events may block its caller for
// up to McpOptions::max_follow_wait).
//
// Example:
//   StoreAuthenticator auth(engine->tokens());
//   McpServer server(engine.get(), &auth, token, {});
//   return server.Serve(std::cin, std::cout);
#pragma once

#include "runloom/auth.h"
#include "runloom/engine.h"
#include "runloom/version.h"

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

#include <cstddef>
#include <istream>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace runloom::mcp {

struct McpOptions {
  // The longest message line accepted; a longer one is answered with a
  // -32600 error (id null) and skipped to its end without being kept.
  size_t max_line_bytes = size_t{1} << 20;  // 1 MiB
  // The longest follow_events may wait for a new event.
  absl::Duration max_follow_wait = absl::Seconds(30);
  // Shown in initialize's serverInfo.
  std::string version = RUNLOOM_VERSION;
};

// One line read by ReadBoundedLine.
struct BoundedLine {
  std::string text;       // without its '\n' (and a '\r' before it)
  bool too_long = false;  // the line had more than max bytes; `text` is empty
  bool eof = false;       // the input ended (`text` may hold a last line without '\n')
};

// Reads one line of `in`, keeping at most `max_bytes` of it: a longer line
// is read to its end and dropped (memory stays bounded by max_bytes).
BoundedLine ReadBoundedLine(std::streambuf& in, size_t max_bytes);

struct Tool;  // mcp/tools.h

class McpServer {
 public:
  // `engine` and `auth` are not owned and must outlive the server. `token`
  // is the secret every call authenticates with; it is kept in memory only.
  McpServer(Engine* engine, Authenticator* auth, std::string token, McpOptions options);
  ~McpServer();
  McpServer(const McpServer&) = delete;
  McpServer& operator=(const McpServer&) = delete;

  // Answers one JSON-RPC message (a line without its newline): the reply
  // line (one JSON object, no newline), or nullopt for a notification or a
  // response, which get no reply.
  std::optional<std::string> HandleLine(absl::string_view line);

  // Reads lines from `in` and writes the replies to `out` (each flushed)
  // until `in` ends. Blank lines are skipped.
  void Serve(std::istream& in, std::ostream& out);

  // The tools/list result: {"tools": [{name, description, inputSchema}...]}.
  nlohmann::json ListTools() const;

 private:
  struct Reply;  // a result or a JSON-RPC error (server.cc)
  Reply Dispatch(const std::string& method, const nlohmann::json& params);
  Reply Initialize(const nlohmann::json& params) const;
  Reply CallTool(const nlohmann::json& params);

  // Constant after construction. The engine is the tools' (tools_).
  Authenticator* const auth_;
  const std::string token_;
  const McpOptions options_;
  std::vector<Tool> tools_;
};

}  // namespace runloom::mcp
