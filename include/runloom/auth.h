// Who is calling, and what they may do: roles, principals and the
// authenticator seam between a surface (the HTTP API) and where tokens live.
//
// Roles are ordered: viewer < operator < approver < admin. A route names the
// least role it needs; a principal with that role or a higher one may use it.
//
// Thread-safety: Role helpers are pure. An Authenticator is called from many
// threads at once; implementations must be thread-safe.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <string>

namespace runloom {

enum class Role : int { kViewer = 0, kOperator = 1, kApprover = 2, kAdmin = 3 };

// "viewer", "operator", "approver", "admin".
absl::string_view RoleName(Role role);

// The inverse of RoleName; anything else is kInvalidArgument naming the four.
absl::StatusOr<Role> ParseRole(absl::string_view name);

// True when `have` is `need` or above it.
inline bool RoleAtLeast(Role have, Role need) {
  return static_cast<int>(have) >= static_cast<int>(need);
}

// An authenticated caller. `name` is the token's name: the identity recorded
// as a decision's reviewer, never a field a request body can set.
struct Principal {
  std::string name;
  Role role = Role::kViewer;
};

// Turns the secret a caller presented (a bearer token) into a principal.
// kUnauthenticated for an unknown, malformed or revoked token; kUnavailable
// when the place tokens live cannot be reached. Implementations never log or
// return the presented secret.
class Authenticator {
 public:
  virtual ~Authenticator() = default;
  virtual absl::StatusOr<Principal> Authenticate(absl::string_view bearer_token) = 0;
};

}  // namespace runloom
