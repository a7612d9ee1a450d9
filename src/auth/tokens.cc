#include "auth/tokens.h"

#include "core/digest.h"
#include "core/status_macros.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include <array>
#include <openssl/rand.h>

namespace runloom {
namespace {

constexpr size_t kTokenIdRandomBytes = 8;
constexpr char kUnauthenticated[] = "unknown, revoked or malformed bearer token";

// `n` random bytes from the OS (OpenSSL's CSPRNG), lower-case hex.
absl::StatusOr<std::string> RandomHex(size_t n) {
  std::array<unsigned char, kTokenRandomBytes> buf{};
  if (n > buf.size()) return absl::InternalError("RandomHex: too many bytes asked for");
  if (RAND_bytes(buf.data(), static_cast<int>(n)) != 1) {
    return absl::InternalError("the OS random source (OpenSSL RAND_bytes) failed");
  }
  std::string out =
      absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(buf.data()), n));
  buf.fill(0);  // the bytes of a secret do not outlive the call
  return out;
}

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

}  // namespace

absl::Status ValidateTokenName(absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("a token name must not be empty");
  if (name.size() > kMaxTokenNameLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("token name '", absl::CHexEscape(name.substr(0, 16)), "...' is longer than ",
                     kMaxTokenNameLength, " characters"));
  }
  for (char c : name) {
    if (c < '!' || c > '~') {
      return absl::InvalidArgumentError(
          absl::StrCat("token name '", absl::CHexEscape(name),
                       "' may hold only printable ASCII characters without spaces (e.g. ci-bot, "
                       "alice@example)"));
    }
  }
  if (absl::StartsWith(name, kTokenIdPrefix)) {
    return absl::InvalidArgumentError(absl::StrCat("token name '", name, "' must not start with '",
                                                   kTokenIdPrefix, "' (token ids do)"));
  }
  return absl::OkStatus();
}

bool IsWellFormedToken(absl::string_view s) {
  if (!absl::StartsWith(s, kTokenPrefix)) return false;
  absl::string_view hex = s.substr(kTokenPrefix.size());
  if (hex.size() != 2 * kTokenRandomBytes) return false;
  for (char c : hex) {
    if (!IsLowerHex(c)) return false;
  }
  return true;
}

std::string HashToken(absl::string_view token) {
  return Sha256Hex(std::string_view(token.data(), token.size()));
}

absl::StatusOr<IssuedToken> IssueToken(TokenStore& store, absl::string_view name, Role role) {
  RUNLOOM_RETURN_IF_ERROR(ValidateTokenName(name));
  RUNLOOM_ASSIGN_OR_RETURN(std::string id_hex, RandomHex(kTokenIdRandomBytes));
  RUNLOOM_ASSIGN_OR_RETURN(std::string secret_hex, RandomHex(kTokenRandomBytes));
  IssuedToken out;
  out.token = absl::StrCat(kTokenPrefix, secret_hex);
  TokenRecord record;
  record.id = absl::StrCat(kTokenIdPrefix, id_hex);
  record.name = std::string(name);
  record.role = role;
  RUNLOOM_ASSIGN_OR_RETURN(out.record, store.CreateToken(record, HashToken(out.token)));
  return out;
}

absl::StatusOr<Principal> StoreAuthenticator::Authenticate(absl::string_view bearer_token) {
  // A malformed token is refused before the store: no lookup to time, and
  // nothing of it reaches a query or a message.
  if (!IsWellFormedToken(bearer_token)) return absl::UnauthenticatedError(kUnauthenticated);
  absl::StatusOr<TokenRecord> found = store_->FindActiveToken(HashToken(bearer_token));
  if (found.status().code() == absl::StatusCode::kNotFound) {
    return absl::UnauthenticatedError(kUnauthenticated);
  }
  if (!found.ok()) {
    // The store never saw the token, only its hash, and its messages do not
    // repeat the hash: safe to pass on.
    return absl::Status(found.status().code(),
                        absl::StrCat("looking up a bearer token: ", found.status().message()));
  }
  return Principal{found->name, found->role};
}

}  // namespace runloom
