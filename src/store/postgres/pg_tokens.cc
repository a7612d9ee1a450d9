// The API tokens of the PostgreSQL store (Store::CreateToken and the rest;
// the table is schema version 5, docs/formats/sqlite-schema.md "tokens").
#include "core/status_macros.h"
#include "store/postgres/pg_store.h"
#include "store/record_codec.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include <optional>
#include <utility>

namespace runloom::store_internal {
namespace {

constexpr char kActiveByName[] = "SELECT 1 FROM tokens WHERE name = $1 AND revoked_at IS NULL";
constexpr char kInsertToken[] =
    "INSERT INTO tokens (id, name, role, hash, created_at) "
    "VALUES ($1, $2, $3, $4, runloom_now()) RETURNING created_at";
constexpr char kListTokens[] =
    "SELECT " RUNLOOM_TOKEN_COLUMNS " FROM tokens ORDER BY created_at, id";
// An id match wins over a name match, and one row at most is revoked. The
// outer `revoked_at IS NULL` is rechecked on a row a concurrent revoke
// changed first (READ COMMITTED), so a token is revoked once.
constexpr char kRevokeToken[] =
    "UPDATE tokens SET revoked_at = runloom_now() WHERE revoked_at IS NULL AND id = ("
    "SELECT id FROM tokens WHERE revoked_at IS NULL AND (id = $1 OR name = $1) "
    "ORDER BY id = $1 DESC LIMIT 1) RETURNING " RUNLOOM_TOKEN_COLUMNS;
// An equality lookup on the unique index of hash. Comparing in constant
// time would not matter here: what is compared is a SHA-256 of the secret,
// so timing reveals nothing usable about the secret itself.
constexpr char kActiveByHash[] =
    "SELECT " RUNLOOM_TOKEN_COLUMNS " FROM tokens WHERE hash = $1 AND revoked_at IS NULL";

}  // namespace

absl::StatusOr<TokenRecord> PgStore::CreateToken(const TokenRecord& token,
                                                 const std::string& token_hash) {
  RUNLOOM_RETURN_IF_ERROR(CheckNewToken(token, token_hash));
  TokenRecord out = token;
  out.revoked_at.reset();
  absl::Status s = h_->Txn([&](PgConn& c) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(PgResult found, c.Exec(kActiveByName, PgParams().Text(token.name)));
    if (found.rows() > 0) {
      return absl::AlreadyExistsError(
          absl::StrCat("an active token is named '", token.name, "'; revoke it first"));
    }
    PgParams p;
    p.Text(token.id).Text(token.name).Text(std::string(RoleName(token.role))).Text(token_hash);
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kInsertToken, p));
    out.created_at = r.row(0).ColumnTime(0);
    return absl::OkStatus();
  });
  if (s.code() == absl::StatusCode::kAlreadyExists &&
      !absl::StrContains(s.message(), "revoke it first")) {
    // The unique indexes: a concurrent create of the name, or a reused id or hash.
    return absl::AlreadyExistsError(
        absl::StrCat("token ", token.id, " named '", token.name, "' (or its hash) already exists"));
  }
  RUNLOOM_RETURN_IF_ERROR(s);
  return out;
}

absl::StatusOr<std::vector<TokenRecord>> PgStore::ListTokens() {
  std::vector<TokenRecord> out;
  RUNLOOM_RETURN_IF_ERROR(h_->Read([&](PgConn& c) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kListTokens));
    out.clear();  // Read may run the body again after a lost connection
    for (int i = 0; i < r.rows(); ++i) {
      RUNLOOM_ASSIGN_OR_RETURN(TokenRecord t, TokenFromRow(r.row(i)));
      out.push_back(std::move(t));
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<TokenRecord> PgStore::RevokeToken(const std::string& id_or_name) {
  std::optional<TokenRecord> revoked;
  RUNLOOM_RETURN_IF_ERROR(h_->Txn([&](PgConn& c) -> absl::Status {
    revoked.reset();  // Txn may run the body again
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kRevokeToken, PgParams().Text(id_or_name)));
    if (r.rows() == 0) return absl::OkStatus();
    RUNLOOM_ASSIGN_OR_RETURN(revoked, TokenFromRow(r.row(0)));
    return absl::OkStatus();
  }));
  if (!revoked.has_value()) {
    return absl::NotFoundError(absl::StrCat("no active token has id or name '", id_or_name, "'"));
  }
  return std::move(*revoked);
}

absl::StatusOr<TokenRecord> PgStore::FindActiveToken(const std::string& token_hash) {
  std::optional<TokenRecord> found;
  RUNLOOM_RETURN_IF_ERROR(h_->Read([&](PgConn& c) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kActiveByHash, PgParams().Text(token_hash)));
    found.reset();
    if (r.rows() == 0) return absl::OkStatus();
    RUNLOOM_ASSIGN_OR_RETURN(found, TokenFromRow(r.row(0)));
    return absl::OkStatus();
  }));
  if (!found.has_value()) return absl::NotFoundError("no active token has this hash");
  return std::move(*found);
}

}  // namespace runloom::store_internal
