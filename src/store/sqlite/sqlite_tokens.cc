// The API tokens of the SQLite store (Store::CreateToken and the rest; the
// table is schema version 4, docs/formats/sqlite-schema.md).
#include "core/status_macros.h"
#include "store/sqlite/codec.h"
#include "store/sqlite/sqlite_store.h"

#include "absl/strings/str_cat.h"

#include <optional>
#include <utility>

namespace runloom::store_internal {
namespace {

constexpr char kActiveByName[] = "SELECT 1 FROM tokens WHERE name = ?1 AND revoked_at IS NULL";
constexpr char kInsertToken[] =
    "INSERT INTO tokens (id, name, role, hash, created_at) VALUES (?1, ?2, ?3, ?4, ?5)";
constexpr char kListTokens[] =
    "SELECT " RUNLOOM_TOKEN_COLUMNS " FROM tokens ORDER BY created_at, id";
// An id match wins over a name match (names cannot look like ids, but the
// store does not rely on it), and exactly one row is revoked.
constexpr char kRevokeToken[] =
    "UPDATE tokens SET revoked_at = ?2 WHERE id = ("
    "SELECT id FROM tokens WHERE revoked_at IS NULL AND (id = ?1 OR name = ?1) "
    "ORDER BY id = ?1 DESC LIMIT 1) RETURNING " RUNLOOM_TOKEN_COLUMNS;
// An equality lookup on the unique index of hash. Comparing in constant
// time would not matter here: what is compared is a SHA-256 of the secret,
// so timing reveals nothing usable about the secret itself.
constexpr char kActiveByHash[] =
    "SELECT " RUNLOOM_TOKEN_COLUMNS " FROM tokens WHERE hash = ?1 AND revoked_at IS NULL";

}  // namespace

absl::StatusOr<TokenRecord> SqliteStore::CreateToken(const TokenRecord& token,
                                                     const std::string& token_hash) {
  RUNLOOM_RETURN_IF_ERROR(CheckNewToken(token, token_hash));
  TokenRecord out = token;
  out.revoked_at.reset();
  RUNLOOM_RETURN_IF_ERROR(h_->Write([&](WriteTxn& txn) -> absl::Status {
    {
      RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kActiveByName));
      st.BindText(1, token.name);
      RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
      if (row) {
        return absl::AlreadyExistsError(
            absl::StrCat("an active token is named '", token.name, "'; revoke it first"));
      }
    }
    out.created_at = h_->Now();
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kInsertToken));
    st.BindText(1, token.id);
    st.BindText(2, token.name);
    st.BindText(3, std::string(RoleName(token.role)));
    st.BindText(4, token_hash);
    st.BindTime(5, out.created_at);
    absl::Status s = st.Run();
    if (s.code() == absl::StatusCode::kAlreadyExists) {
      return absl::AlreadyExistsError(
          absl::StrCat("token ", token.id, " (or its hash) already exists"));
    }
    return s;
  }));
  return out;
}

absl::StatusOr<std::vector<TokenRecord>> SqliteStore::ListTokens() {
  return h_->Read([&](Db& db) -> absl::StatusOr<std::vector<TokenRecord>> {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kListTokens));
    std::vector<TokenRecord> out;
    while (true) {
      RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) return out;
      RUNLOOM_ASSIGN_OR_RETURN(TokenRecord t, TokenFromRow(st));
      out.push_back(std::move(t));
    }
  });
}

absl::StatusOr<TokenRecord> SqliteStore::RevokeToken(const std::string& id_or_name) {
  std::optional<TokenRecord> revoked;
  RUNLOOM_RETURN_IF_ERROR(h_->Write([&](WriteTxn& txn) -> absl::Status {
    revoked.reset();  // the op may run again in another group
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, txn.db.Prepare(kRevokeToken));
    st.BindText(1, id_or_name);
    st.BindTime(2, h_->Now());
    RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) return absl::OkStatus();
    RUNLOOM_ASSIGN_OR_RETURN(revoked, TokenFromRow(st));
    return st.Run();  // finish the statement (RETURNING yields one row)
  }));
  if (!revoked.has_value()) {
    return absl::NotFoundError(absl::StrCat("no active token has id or name '", id_or_name, "'"));
  }
  return std::move(*revoked);
}

absl::StatusOr<TokenRecord> SqliteStore::FindActiveToken(const std::string& token_hash) {
  return h_->Read([&](Db& db) -> absl::StatusOr<TokenRecord> {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db.Prepare(kActiveByHash));
    st.BindText(1, token_hash);
    RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) return absl::NotFoundError("no active token has this hash");
    return TokenFromRow(st);
  });
}

}  // namespace runloom::store_internal
