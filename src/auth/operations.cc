#include "auth/operations.h"

#include "absl/strings/str_cat.h"

namespace runloom {

Role RequiredRole(Operation op) {
  switch (op) {
    case Operation::kRead:
      return Role::kViewer;
    case Operation::kStartRun:
    case Operation::kCancelRun:
    case Operation::kRerunRun:
    case Operation::kSignalRun:
    case Operation::kManageSchedules:
      return Role::kOperator;
    case Operation::kDecide:
      return Role::kApprover;
    case Operation::kRegisterWorkflow:
    case Operation::kRedriveDeadLetter:
    case Operation::kResetAll:
      return Role::kAdmin;
  }
  // An Operation outside the enum: refuse everyone below admin.
  return Role::kAdmin;
}

absl::string_view OperationName(Operation op) {
  switch (op) {
    case Operation::kRead:
      return "read";
    case Operation::kStartRun:
      return "start_run";
    case Operation::kCancelRun:
      return "cancel_run";
    case Operation::kRerunRun:
      return "rerun";
    case Operation::kSignalRun:
      return "signal_run";
    case Operation::kManageSchedules:
      return "manage_schedules";
    case Operation::kDecide:
      return "decide";
    case Operation::kRegisterWorkflow:
      return "register_workflow";
    case Operation::kRedriveDeadLetter:
      return "redrive_dead_letter";
    case Operation::kResetAll:
      return "reset";
  }
  return "unknown";
}

std::string RoleRefusalMessage(Role need, Role have) {
  return absl::StrCat("this needs the ", RoleName(need), " role; your token has ", RoleName(have));
}

absl::Status Authorize(const Principal& who, Operation op) {
  const Role need = RequiredRole(op);
  if (RoleAtLeast(who.role, need)) return absl::OkStatus();
  return absl::PermissionDeniedError(RoleRefusalMessage(need, who.role));
}

}  // namespace runloom
