// `runloom mcp`: the MCP server (src/mcp) on stdin/stdout, over the
// database --db names, as the principal of the token in $RUNLOOM_TOKEN.
//
// It executes no run, like `decide`, `cancel` and the other commands that
// are not run/worker/serve: its engine is never started, so the runs it
// starts or decides are executed by a `runloom worker` or `runloom serve`
// on the same database. An MCP client starts one server per session and
// may kill it at any time; a server that also held leases would turn every
// such kill into a lease expiry to recover from.
#include "runloom/engine.h"

#include "cli/cli_common.h"
#include "cli/commands.h"

#include "absl/strings/str_cat.h"
#include "auth/tokens.h"
#include "mcp/server.h"

#include <cstdlib>
#include <iostream>
#include <memory>

namespace runloom::cli {

int McpCommand(const McpFlags& f) {
  // The token is read from the environment (never a flag: a flag is
  // visible to every user in the process list) and never printed.
  const char* env = std::getenv(kMcpTokenVariable);
  std::string token = env == nullptr ? "" : env;
  if (token.empty()) {
    return BadInput(absl::StrCat(
        "runloom mcp needs a token in $", kMcpTokenVariable,
        ": make one with `runloom token create --name NAME --role ROLE` and set it in the "
        "MCP client's environment for this server (docs/operations.md, \"runloom mcp\")"));
  }
  if (!IsWellFormedToken(token)) {
    return BadInput(absl::StrCat("$", kMcpTokenVariable,
                                 " does not hold a runloom token (rl_ and 64 hex digits); copy "
                                 "the line `runloom token create` printed"));
  }
  if (absl::Status s = CheckQueueUrl(f.common); !s.ok()) return BadInput(std::string(s.message()));
  // The step kinds workers execute, so a workflow file start_run registers
  // is checked against them (as `runloom workflows --register` does).
  absl::StatusOr<std::shared_ptr<StepRegistry>> kinds = StepKindsSetting(f.config);
  if (!kinds.ok()) return BadInput(std::string(kinds.status().message()));
  EngineOptions options;
  options.registry = *std::move(kinds);
  absl::StatusOr<Backend> backend = OpenExistingDb(f.common);
  if (!backend.ok()) return DbOpenFailure(f.common, backend.status());
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Open(std::move(options), *std::move(backend));
  if (!engine.ok()) return Failure(std::string(engine.status().message()));
  Engine* e = engine->get();
  StoreAuthenticator auth(e->tokens());
  absl::StatusOr<Principal> who = auth.Authenticate(token);
  if (!who.ok()) {
    if (absl::IsUnauthenticated(who.status())) {
      return BadInput(absl::StrCat("$", kMcpTokenVariable, " is not an active token of ",
                                   RedactedUrl(f.common.db),
                                   " (unknown or revoked): `runloom token list` shows the "
                                   "tokens; make one with `runloom token create`"));
    }
    return Failure(std::string(who.status().message()));
  }
  PrintStderr(
      LogLevel::kInfo,
      absl::StrCat("runloom mcp: serving MCP over stdio as '", who->name, "' (",
                   RoleName(who->role), ") on ", RedactedUrl(f.common.db),
                   "; this process executes no run: a `runloom worker` or `runloom serve` on the "
                   "same database does"));
  mcp::McpServer server(e, &auth, std::move(token), {});
  std::cin.tie(nullptr);
  server.Serve(std::cin, std::cout);
  return 0;
}

}  // namespace runloom::cli
