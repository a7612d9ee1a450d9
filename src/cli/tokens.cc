// `runloom token create|list|revoke`: API tokens with roles (docs/operations.md,
// "Tokens"). The token itself is printed once, by create; the store keeps
// only its hash, and no other output ever shows either.
#include "auth/tokens.h"

#include "runloom/auth.h"
#include "runloom/events.h"

#include "cli/cli_common.h"
#include "cli/commands.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "wire/wire.h"

#include <iostream>

namespace runloom::cli {
namespace {

std::string RevokedText(const TokenRecord& t) {
  return t.revoked_at.has_value() ? FormatEventTime(*t.revoked_at) : "-";
}

}  // namespace

int TokenCreateCommand(const TokenFlags& f) {
  // Both checked before the database is opened: a bad flag writes nothing.
  absl::StatusOr<Role> role = ParseRole(f.role);
  if (!role.ok()) return BadInput(absl::StrCat("--role: ", role.status().message()));
  absl::Status name_ok = ValidateTokenName(f.name);
  if (!name_ok.ok()) return BadInput(absl::StrCat("--name: ", name_ok.message()));
  absl::StatusOr<Backend> backend = OpenDb(f.common);
  if (!backend.ok()) return DbOpenFailure(f.common, backend.status());
  absl::StatusOr<IssuedToken> issued = IssueToken(*backend->store, f.name, *role);
  if (issued.status().code() == absl::StatusCode::kAlreadyExists) {
    return BadInput(absl::StrCat(issued.status().message(), " (runloom token revoke ",
                                 ShellQuote(f.name), BackendArgs(f.common), ")"));
  }
  if (!issued.ok()) return Failure(std::string(issued.status().message()));
  const TokenRecord& t = issued->record;
  if (f.json) {
    std::cout << nlohmann::json{{"id", t.id},
                                {"name", t.name},
                                {"role", std::string(RoleName(t.role))},
                                {"token", issued->token}}
                     .dump()
              << "\n";
  } else {
    std::cout << issued->token << "\n";
  }
  PrintStderr(
      LogLevel::kInfo,
      absl::StrCat("created token ", t.id, " '", t.name, "' with role ", RoleName(t.role),
                   "; it will not be shown again (runloom keeps only its hash): store it now"));
  return kExitCompleted;
}

int TokenListCommand(const TokenFlags& f) {
  absl::StatusOr<Backend> backend = OpenExistingDb(f.common);
  if (!backend.ok()) return DbOpenFailure(f.common, backend.status());
  absl::StatusOr<std::vector<TokenRecord>> tokens = backend->store->ListTokens();
  if (!tokens.ok()) return Failure(std::string(tokens.status().message()));
  if (f.json) {
    nlohmann::json out = {{"tokens", nlohmann::json::array()}};
    for (const TokenRecord& t : *tokens) out["tokens"].push_back(wire::TokenToJson(t));
    std::cout << out.dump(2) << "\n";
    return kExitCompleted;
  }
  if (tokens->empty()) {
    std::cout << "no tokens; create one with: runloom token create --name NAME --role ROLE"
              << BackendArgs(f.common) << "\n";
    return kExitCompleted;
  }
  constexpr char kRow[] = "%-20s  %-24s  %-8s  %-27s  %s\n";
  std::cout << absl::StrFormat(kRow, "ID", "NAME", "ROLE", "CREATED", "REVOKED");
  for (const TokenRecord& t : *tokens) {
    std::cout << absl::StrFormat(kRow, t.id, t.name, RoleName(t.role),
                                 FormatEventTime(t.created_at), RevokedText(t));
  }
  return kExitCompleted;
}

int TokenRevokeCommand(const TokenFlags& f) {
  absl::StatusOr<Backend> backend = OpenExistingDb(f.common);
  if (!backend.ok()) return DbOpenFailure(f.common, backend.status());
  absl::StatusOr<TokenRecord> t = backend->store->RevokeToken(f.id_or_name);
  if (t.status().code() == absl::StatusCode::kNotFound) {
    return BadInput(absl::StrCat(t.status().message(), " in ", RedactedUrl(f.common.db),
                                 " (revoked already, or unknown); list them with: runloom token "
                                 "list",
                                 BackendArgs(f.common)));
  }
  if (!t.ok()) return Failure(std::string(t.status().message()));
  if (f.json) {
    std::cout << wire::TokenToJson(*t).dump() << "\n";
  } else {
    std::cout << "revoked token " << t->id << " '" << t->name << "' (" << RoleName(t->role)
              << ")\n";
  }
  return kExitCompleted;
}

}  // namespace runloom::cli
