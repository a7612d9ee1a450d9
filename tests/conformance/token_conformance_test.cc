// Store conformance for API tokens: create, list, revoke (by id or name),
// find by hash, for every backend of AllBackendsUnderTest().
#include "conformance_fixture.h"

#include <atomic>
#include <thread>
#include <vector>

namespace runloom::conformance {
namespace {

using ::runloom::testing::IsOkAndHolds;
using ::runloom::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::IsEmpty;
using ::testing::Optional;

class TokenConformanceTest : public ConformanceTest {
 protected:
  static TokenRecord Token(const std::string& id, const std::string& name, Role role) {
    TokenRecord t;
    t.id = id;
    t.name = name;
    t.role = role;
    return t;
  }
  // A distinct 64-hex-digit stand-in for a SHA-256.
  static std::string Hash(char c) { return std::string(64, c); }
};

TEST_P(TokenConformanceTest, CreateStoresTheTokenActiveAtNow) {
  const absl::Time before = Now();
  absl::StatusOr<TokenRecord> t =
      store_->CreateToken(Token("tok_1", "ci", Role::kOperator), Hash('a'));
  ASSERT_OK(t);
  EXPECT_EQ(t->id, "tok_1");
  EXPECT_EQ(t->name, "ci");
  EXPECT_EQ(t->role, Role::kOperator);
  EXPECT_GE(t->created_at, before);
  EXPECT_EQ(t->revoked_at, std::nullopt);
  absl::StatusOr<TokenRecord> found = store_->FindActiveToken(Hash('a'));
  ASSERT_OK(found);
  EXPECT_EQ(found->id, "tok_1");
  EXPECT_EQ(found->name, "ci");
  EXPECT_EQ(found->role, Role::kOperator);
  EXPECT_EQ(found->created_at, t->created_at);
}

TEST_P(TokenConformanceTest, EveryRoleRoundTrips) {
  const Role roles[] = {Role::kViewer, Role::kOperator, Role::kApprover, Role::kAdmin};
  char h = 'a';
  for (Role r : roles) {
    const std::string name(RoleName(r));
    ASSERT_OK(store_->CreateToken(Token("tok_" + name, name, r), Hash(h)));
    EXPECT_THAT(store_->FindActiveToken(Hash(h)), IsOkAndHolds(Field(&TokenRecord::role, r)));
    ++h;
  }
}

TEST_P(TokenConformanceTest, UnknownHashIsNotFound) {
  ASSERT_OK(store_->CreateToken(Token("tok_1", "ci", Role::kViewer), Hash('a')));
  EXPECT_THAT(store_->FindActiveToken(Hash('b')), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store_->FindActiveToken(""), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(TokenConformanceTest, ActiveNameIdAndHashAreUnique) {
  ASSERT_OK(store_->CreateToken(Token("tok_1", "ci", Role::kViewer), Hash('a')));
  EXPECT_THAT(store_->CreateToken(Token("tok_2", "ci", Role::kAdmin), Hash('b')),
              StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(store_->CreateToken(Token("tok_1", "other", Role::kAdmin), Hash('c')),
              StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(store_->CreateToken(Token("tok_3", "third", Role::kAdmin), Hash('a')),
              StatusIs(absl::StatusCode::kAlreadyExists));
  // Nothing of the refused creates was written.
  absl::StatusOr<std::vector<TokenRecord>> all = store_->ListTokens();
  ASSERT_OK(all);
  EXPECT_THAT(*all, ElementsAre(Field(&TokenRecord::id, "tok_1")));
  EXPECT_THAT(store_->FindActiveToken(Hash('b')), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(TokenConformanceTest, EmptyIdNameOrHashIsInvalid) {
  EXPECT_THAT(store_->CreateToken(Token("", "ci", Role::kViewer), Hash('a')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->CreateToken(Token("tok_1", "", Role::kViewer), Hash('a')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->CreateToken(Token("tok_1", "ci", Role::kViewer), ""),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->ListTokens(), IsOkAndHolds(IsEmpty()));
}

TEST_P(TokenConformanceTest, ListIsOldestFirstWithRevokedOnes) {
  ASSERT_OK(store_->CreateToken(Token("tok_a", "first", Role::kViewer), Hash('a')));
  Advance(absl::Seconds(1));
  ASSERT_OK(store_->CreateToken(Token("tok_b", "second", Role::kAdmin), Hash('b')));
  Advance(absl::Seconds(1));
  ASSERT_OK(store_->RevokeToken("first"));
  absl::StatusOr<std::vector<TokenRecord>> all = store_->ListTokens();
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].id, "tok_a");
  EXPECT_TRUE((*all)[0].revoked_at.has_value());
  EXPECT_GT(*(*all)[0].revoked_at, (*all)[0].created_at);
  EXPECT_EQ((*all)[1].id, "tok_b");
  EXPECT_EQ((*all)[1].revoked_at, std::nullopt);
  EXPECT_LT((*all)[0].created_at, (*all)[1].created_at);
}

TEST_P(TokenConformanceTest, RevokeByIdOrNameEndsLookupsOnce) {
  ASSERT_OK(store_->CreateToken(Token("tok_a", "alice", Role::kApprover), Hash('a')));
  ASSERT_OK(store_->CreateToken(Token("tok_b", "bob", Role::kViewer), Hash('b')));
  absl::StatusOr<TokenRecord> r = store_->RevokeToken("tok_a");
  ASSERT_OK(r);
  EXPECT_EQ(r->name, "alice");
  EXPECT_TRUE(r->revoked_at.has_value());
  EXPECT_THAT(store_->FindActiveToken(Hash('a')), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store_->RevokeToken("tok_a"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store_->RevokeToken("alice"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store_->RevokeToken("bob"), IsOkAndHolds(Field(&TokenRecord::id, "tok_b")));
  EXPECT_THAT(store_->FindActiveToken(Hash('b')), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store_->RevokeToken("nobody"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(TokenConformanceTest, ARevokedNameCanBeGivenToANewToken) {
  ASSERT_OK(store_->CreateToken(Token("tok_a", "ci", Role::kViewer), Hash('a')));
  ASSERT_OK(store_->RevokeToken("ci"));
  ASSERT_OK(store_->CreateToken(Token("tok_b", "ci", Role::kAdmin), Hash('b')));
  EXPECT_THAT(store_->FindActiveToken(Hash('b')),
              IsOkAndHolds(Field(&TokenRecord::role, Role::kAdmin)));
  // Revoking by the name now reaches the active one only.
  EXPECT_THAT(store_->RevokeToken("ci"), IsOkAndHolds(Field(&TokenRecord::id, "tok_b")));
}

TEST_P(TokenConformanceTest, AnIdMatchWinsOverANameMatch) {
  ASSERT_OK(store_->CreateToken(Token("tok_x", "a", Role::kViewer), Hash('a')));
  ASSERT_OK(store_->CreateToken(Token("tok_y", "tok_x", Role::kViewer), Hash('b')));
  EXPECT_THAT(store_->RevokeToken("tok_x"), IsOkAndHolds(Field(&TokenRecord::id, "tok_x")));
  EXPECT_OK(store_->FindActiveToken(Hash('b')));
  EXPECT_THAT(store_->RevokeToken("tok_x"), IsOkAndHolds(Field(&TokenRecord::id, "tok_y")));
}

TEST_P(TokenConformanceTest, TokensAreSharedBetweenHandles) {
  if (!GetParam().shared_location) GTEST_SKIP() << "each open is a private database";
  ASSERT_OK(store_->CreateToken(Token("tok_1", "ci", Role::kOperator), Hash('a')));
  absl::StatusOr<Backend> second = Open();
  ASSERT_OK(second);
  EXPECT_THAT(second->store->FindActiveToken(Hash('a')),
              IsOkAndHolds(Field(&TokenRecord::name, "ci")));
  ASSERT_OK(second->store->RevokeToken("ci"));
  EXPECT_THAT(store_->FindActiveToken(Hash('a')), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store_->ListTokens(),
              IsOkAndHolds(ElementsAre(Field(&TokenRecord::revoked_at, Optional(::testing::_)))));
}

// Racing creates of one name, and racing revokes of one token, from two
// handles (two processes' worth): exactly one of each wins.
TEST_P(TokenConformanceTest, RacingCreatesAndRevokesHaveOneWinner) {
  if (!GetParam().shared_location) GTEST_SKIP() << "each open is a private database";
  absl::StatusOr<Backend> second = Open();
  ASSERT_OK(second);
  Store* stores[] = {store_.get(), second->store.get()};
  constexpr int kThreads = 6;
  std::atomic<int> created{0}, taken{0}, revoked{0}, gone{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      Store* s = stores[i % 2];
      absl::StatusOr<TokenRecord> c =
          s->CreateToken(Token(absl::StrCat("tok_", i), "shared", Role::kViewer),
                         Hash(static_cast<char>('a' + i)));
      (c.ok() ? created : taken)++;
      if (!c.ok()) {
        EXPECT_EQ(c.status().code(), absl::StatusCode::kAlreadyExists) << c.status();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  threads.clear();
  EXPECT_EQ(created.load(), 1);
  EXPECT_EQ(taken.load(), kThreads - 1);
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      absl::StatusOr<TokenRecord> r = stores[i % 2]->RevokeToken("shared");
      (r.ok() ? revoked : gone)++;
      if (!r.ok()) {
        EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(revoked.load(), 1);
  EXPECT_EQ(gone.load(), kThreads - 1);
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Backends, TokenConformanceTest, ::testing::ValuesIn(AllBackendsUnderTest()),
                         FactoryName);

}  // namespace runloom::conformance
