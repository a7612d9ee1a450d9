#include "runloom/auth.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace runloom {

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kViewer:
      return "viewer";
    case Role::kOperator:
      return "operator";
    case Role::kApprover:
      return "approver";
    case Role::kAdmin:
      return "admin";
  }
  return "viewer";
}

absl::StatusOr<Role> ParseRole(absl::string_view name) {
  for (Role r : {Role::kViewer, Role::kOperator, Role::kApprover, Role::kAdmin}) {
    if (name == RoleName(r)) return r;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown role '", name.substr(0, 64),
                                                 "': use viewer, operator, approver or admin"));
}

}  // namespace runloom
