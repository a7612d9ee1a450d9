// API tokens on a real SQLite store (:memory:): issuing, the stored hash,
// name rules, and StoreAuthenticator's answers.
#include "auth/tokens.h"

#include "runloom/sqlite.h"

#include "testing/status_matchers.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

#include <memory>
#include <string>

namespace runloom {
namespace {

using ::runloom::testing::IsOkAndHolds;
using ::runloom::testing::StatusIs;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;

// Fails every token lookup with `code`, to see what Authenticate passes on.
class FailingLookups final : public StoreWrapper {
 public:
  FailingLookups(std::unique_ptr<Store> inner, absl::StatusCode code)
      : StoreWrapper(std::move(inner)), code_(code) {}
  absl::StatusOr<TokenRecord> FindActiveToken(const std::string&) override {
    return absl::Status(code_, "backend down");
  }

 private:
  const absl::StatusCode code_;
};

class TokensTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Backend> b = OpenSqlite(":memory:", {});
    ASSERT_OK(b);
    store_ = std::move(b->store);
  }
  std::unique_ptr<Store> store_;
};

TEST_F(TokensTest, IssuedTokenHasTheFormAndOnlyItsHashIsStored) {
  absl::StatusOr<IssuedToken> t = IssueToken(*store_, "ci", Role::kOperator);
  ASSERT_OK(t);
  EXPECT_TRUE(IsWellFormedToken(t->token)) << "token of the wrong form";
  EXPECT_TRUE(absl::StartsWith(t->token, "rl_"));
  EXPECT_THAT(t->token, SizeIs(3 + 64));
  EXPECT_TRUE(absl::StartsWith(t->record.id, "tok_"));
  EXPECT_EQ(t->record.name, "ci");
  EXPECT_EQ(t->record.role, Role::kOperator);
  EXPECT_THAT(store_->FindActiveToken(HashToken(t->token)),
              IsOkAndHolds(Field(&TokenRecord::id, t->record.id)));
  // The store is keyed by the hash, not the token.
  EXPECT_THAT(store_->FindActiveToken(t->token), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(TokensTest, TwoTokensDiffer) {
  absl::StatusOr<IssuedToken> a = IssueToken(*store_, "a", Role::kViewer);
  absl::StatusOr<IssuedToken> b = IssueToken(*store_, "b", Role::kViewer);
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_NE(a->token, b->token);
  EXPECT_NE(a->record.id, b->record.id);
}

TEST_F(TokensTest, HashIsSha256Hex) {
  EXPECT_EQ(HashToken("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_F(TokensTest, NameRules) {
  EXPECT_OK(ValidateTokenName("ci-bot"));
  EXPECT_OK(ValidateTokenName("alice@example.com"));
  EXPECT_OK(ValidateTokenName(std::string(kMaxTokenNameLength, 'x')));
  for (const std::string& bad :
       {std::string(), std::string(kMaxTokenNameLength + 1, 'x'), std::string("two words"),
        std::string("tab\there"), std::string("nl\n"), std::string("caf\xc3\xa9"),
        std::string("tok_abc"), std::string("nul\0x", 5)}) {
    EXPECT_THAT(ValidateTokenName(bad), StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
  }
}

TEST_F(TokensTest, BadNameWritesNothing) {
  EXPECT_THAT(IssueToken(*store_, "two words", Role::kAdmin),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->ListTokens(), IsOkAndHolds(SizeIs(0)));
}

TEST_F(TokensTest, DuplicateActiveNameIsAlreadyExists) {
  ASSERT_OK(IssueToken(*store_, "ci", Role::kViewer));
  EXPECT_THAT(IssueToken(*store_, "ci", Role::kAdmin), StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(store_->ListTokens(), IsOkAndHolds(SizeIs(1)));
}

TEST_F(TokensTest, AuthenticateReturnsTheTokensNameAndRole) {
  absl::StatusOr<IssuedToken> t = IssueToken(*store_, "alice", Role::kApprover);
  ASSERT_OK(t);
  StoreAuthenticator auth(store_.get());
  absl::StatusOr<Principal> p = auth.Authenticate(t->token);
  ASSERT_OK(p);
  EXPECT_EQ(p->name, "alice");
  EXPECT_EQ(p->role, Role::kApprover);
}

TEST_F(TokensTest, AuthenticateRefusesUnknownMalformedAndRevokedWithoutEchoingThem) {
  absl::StatusOr<IssuedToken> t = IssueToken(*store_, "bob", Role::kAdmin);
  ASSERT_OK(t);
  StoreAuthenticator auth(store_.get());
  std::string unknown = t->token;
  unknown.back() = unknown.back() == '0' ? '1' : '0';
  const std::string upper = "rl_" + std::string(64, 'A');
  for (const std::string& bad : {unknown, std::string(), std::string("rl_"), upper, t->token + "0",
                                 t->token.substr(3), " " + t->token}) {
    absl::StatusOr<Principal> p = auth.Authenticate(bad);
    EXPECT_THAT(p, StatusIs(absl::StatusCode::kUnauthenticated)) << bad;
    if (!bad.empty()) {
      EXPECT_THAT(std::string(p.status().message()), Not(HasSubstr(bad)));
    }
  }
  ASSERT_OK(auth.Authenticate(t->token));
  ASSERT_OK(store_->RevokeToken("bob"));
  absl::StatusOr<Principal> revoked = auth.Authenticate(t->token);
  EXPECT_THAT(revoked, StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(std::string(revoked.status().message()), Not(HasSubstr(t->token)));
}

TEST_F(TokensTest, AuthenticatePassesOnAnUnreachableStore) {
  absl::StatusOr<IssuedToken> t = IssueToken(*store_, "carol", Role::kViewer);
  ASSERT_OK(t);
  FailingLookups failing(std::move(store_), absl::StatusCode::kUnavailable);
  StoreAuthenticator auth(&failing);
  absl::StatusOr<Principal> p = auth.Authenticate(t->token);
  EXPECT_THAT(p, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(std::string(p.status().message()), Not(HasSubstr(t->token)));
}

}  // namespace
}  // namespace runloom
