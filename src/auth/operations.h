// Which role may do what: the one rule every surface that authenticates a
// caller applies (the HTTP API's routes, `runloom mcp`'s tools).
//
// An Operation names what a caller asks for, not how it arrived (a route, a
// tool); RequiredRole is the least Role (runloom/auth.h) it needs. Reads of
// any kind need viewer; changing one run (start, cancel, rerun, signal) and
// schedules need operator; deciding a gate needs approver; what changes
// the whole installation (the catalog, dead letters, admin reset) needs admin.
// A surface authenticates first, then asks Authorize.
//
// Thread-safety: pure functions.
#pragma once

#include "runloom/auth.h"

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace runloom {

enum class Operation {
  kRead,      // runs, steps, gates, events, signals, workflows, dead letters, metrics
  kStartRun,  // a run of a catalog workflow
  kCancelRun,
  kRerunRun,
  kSignalRun,
  kManageSchedules,   // create, pause, resume, delete
  kDecide,            // a decision on an approval gate
  kRegisterWorkflow,  // a new definition in the catalog (it may run any exec step)
  kRedriveDeadLetter,
  kResetAll,  // admin reset: cancel every unfinished run
};

// The least role `op` needs.
Role RequiredRole(Operation op);

// "read", "start_run", ...: how a refusal names the operation.
absl::string_view OperationName(Operation op);

// "this needs the <need> role; your token has <have>": the one wording of a
// refusal for a role too low, which every surface sends (the API's 403).
std::string RoleRefusalMessage(Role need, Role have);

// OK when `who` may do `op`; else kPermissionDenied with RoleRefusalMessage.
absl::Status Authorize(const Principal& who, Operation op);

}  // namespace runloom
