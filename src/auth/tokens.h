// API tokens: making one (a secret from the OS random source, shown once),
// the hash the store keeps instead of it, the rules for token names, and
// StoreAuthenticator, the Authenticator (runloom/auth.h) over a Store.
//
// A token is "rl_" followed by 64 lower-case hex digits (32 random bytes
// from OpenSSL's RAND_bytes, which draws on the OS). The store keeps only
// its SHA-256 (lower-case hex); the token itself is returned once, by
// IssueToken, and is never stored, logged or put in an error message.
//
// Why a module of its own (runloom::auth) and not src/api: the token store
// is used by both the HTTP API (src/api) and the CLI (`runloom token`), and
// needs only the Store; the roles themselves (runloom/auth.h) are core
// values, since the store keeps a token's role.
//
// Thread-safety: the functions are thread-safe; a StoreAuthenticator may be
// called from many threads at once (the Store is thread-safe).
#pragma once

#include "runloom/auth.h"
#include "runloom/store.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <cstddef>
#include <string>

namespace runloom {

// Every token starts with this, so a leaked one is recognizable (secret
// scanners) and a malformed one is refused without a store lookup.
inline constexpr absl::string_view kTokenPrefix = "rl_";
// Random bytes in a token (hex-encoded: twice as many digits).
inline constexpr size_t kTokenRandomBytes = 32;
// Token ids are "tok_" + 16 hex digits; names may not start with "tok_", so
// `runloom token revoke X` never wonders which one X is.
inline constexpr absl::string_view kTokenIdPrefix = "tok_";
inline constexpr size_t kMaxTokenNameLength = 64;

// A name is 1 to kMaxTokenNameLength printable ASCII characters without
// spaces (0x21-0x7e), not starting with "tok_". kInvalidArgument saying
// which rule failed (the name is quoted with non-printables escaped).
absl::Status ValidateTokenName(absl::string_view name);

// True when `s` has a token's form (prefix, 64 lower-case hex digits).
bool IsWellFormedToken(absl::string_view s);

// The hash the store keeps: lower-case hex SHA-256 of the token's text.
std::string HashToken(absl::string_view token);

struct IssuedToken {
  TokenRecord record;
  std::string token;  // the secret: show it once, never store or log it
};

// Makes a token named `name` with `role` and stores its hash. Errors:
// kInvalidArgument (bad name, nothing written); kAlreadyExists (an active
// token has the name); kInternal when the OS random source fails; the
// store's codes otherwise.
//
// Example:
//   RUNLOOM_ASSIGN_OR_RETURN(IssuedToken t, IssueToken(*store, "ci", Role::kOperator));
//   std::cout << t.token << "\n";  // once; only its hash is stored
absl::StatusOr<IssuedToken> IssueToken(TokenStore& store, absl::string_view name, Role role);

// Authenticates bearer tokens against the tokens of a Store.
// Authenticate: kUnauthenticated for a malformed, unknown or revoked token
// (one message for all three: a caller learns nothing from which it was);
// kUnavailable when the store cannot be reached; other store errors keep
// their code. The token never appears in a returned message.
class StoreAuthenticator final : public Authenticator {
 public:
  // `store` is not owned and must outlive this object.
  explicit StoreAuthenticator(TokenStore* store) : store_(store) {}
  StoreAuthenticator(const StoreAuthenticator&) = delete;
  StoreAuthenticator& operator=(const StoreAuthenticator&) = delete;

  absl::StatusOr<Principal> Authenticate(absl::string_view bearer_token) override;

 private:
  TokenStore* const store_;  // const after construction
};

}  // namespace runloom
