// OpenBackend: which URLs open which backend, and the errors for the rest.
#include "runloom/backend.h"

#include "testing/status_matchers.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <filesystem>
#include <string>
#include <unistd.h>

namespace runloom {
namespace {

using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

class OpenBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           absl::StrCat("runloom_backend_", getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Opens `url`, registers a workflow, and says whether it worked.
  void ExpectOpens(const std::string& url) {
    absl::StatusOr<Backend> b = OpenBackend(url, {});
    ASSERT_OK(b) << url;
    ASSERT_NE(b->store, nullptr);
    ASSERT_NE(b->transport, nullptr);
    EXPECT_NE(b->events, nullptr);  // every backend has its event bus
    EXPECT_OK(b->store->RegisterWorkflow("wf", "sha256:x", nlohmann::json::object()));
  }

  std::filesystem::path dir_;
};

TEST_F(OpenBackendTest, SqliteForms) {
  ExpectOpens(absl::StrCat("sqlite://", (dir_ / "abs.db").string()));  // sqlite:///abs/...
  EXPECT_TRUE(std::filesystem::exists(dir_ / "abs.db"));
  ExpectOpens((dir_ / "plain.db").string());
  EXPECT_TRUE(std::filesystem::exists(dir_ / "plain.db"));
  ExpectOpens("sqlite::memory:");
  ExpectOpens(":memory:");
}

TEST_F(OpenBackendTest, RelativeSqliteUrlIsRelativeToTheWorkingDirectory) {
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir_);
  ExpectOpens("sqlite://rel.db");
  std::filesystem::current_path(cwd);
  EXPECT_TRUE(std::filesystem::exists(dir_ / "rel.db"));
}

TEST_F(OpenBackendTest, OptionsReachTheBackend) {
  BackendOptions o;
  o.durability = "sometimes";
  EXPECT_THAT(OpenBackend("sqlite::memory:", o), StatusIs(absl::StatusCode::kInvalidArgument));
  o = BackendOptions{};
  o.transport.max_deliveries = 0;
  EXPECT_THAT(OpenBackend("sqlite::memory:", o), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(OpenBackendTest, BadUrlsSayWhatWasWrongAndWhatIsAccepted) {
  struct Case {
    std::string url;
    std::string why;
  };
  for (const Case& c :
       {Case{"", "empty"}, Case{"mysql://u@h:3306/db", "unknown scheme 'mysql'"},
        Case{"postgres:u@h/db", "after 'postgres:' comes '//"},
        Case{"redis://localhost", "unknown scheme 'redis'"},
        Case{"sqlite:", "after 'sqlite:' comes '//'"},
        Case{"sqlite:/x.db", "after 'sqlite:' comes '//'"}, Case{"sqlite://", "no database path"},
        Case{"sqlite:///", "no database path"}, Case{"sqlite:///x.db?mode=ro", "query strings"}}) {
    absl::StatusOr<Backend> b = OpenBackend(c.url, {});
    EXPECT_THAT(b, StatusIs(absl::StatusCode::kInvalidArgument)) << c.url;
    EXPECT_THAT(std::string(b.status().message()), HasSubstr(c.why)) << c.url;
    EXPECT_THAT(std::string(b.status().message()), HasSubstr("sqlite::memory:")) << c.url;
  }
}

TEST_F(OpenBackendTest, PostgresUrlsReachPostgres) {
  // Nothing listens on port 1 of loopback: unreachable, kUnavailable, with
  // the address and never a password.
  absl::StatusOr<Backend> b = OpenBackend("postgres://u:secret-pw@127.0.0.1:1/db", {});
  EXPECT_THAT(b, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("127.0.0.1:1/db"));
  EXPECT_THAT(std::string(b.status().message()), Not(HasSubstr("secret-pw")));
  EXPECT_THAT(OpenBackend("postgres://u@127.0.0.1:1/db?nonsense=1", {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(RedactedUrlTest, HidesOnlyThePassword) {
  EXPECT_EQ(RedactedUrl("postgres://app:s3cret@db:5432/runs"), "postgres://app:***@db:5432/runs");
  EXPECT_EQ(RedactedUrl("postgresql://app:p@ss:w@rd@db/runs?sslmode=require"),
            "postgresql://app:***@db/runs?sslmode=require");
  EXPECT_EQ(RedactedUrl("postgres://app@db:5432/runs"), "postgres://app@db:5432/runs");
  EXPECT_EQ(RedactedUrl("postgres://db:5432/runs"), "postgres://db:5432/runs");
  EXPECT_EQ(RedactedUrl("postgres://db/runs?user=a@b"), "postgres://db/runs?user=a@b");
  EXPECT_EQ(RedactedUrl("sqlite:///tmp/a:b@c.db"), "sqlite:///tmp/a:b@c.db");
  EXPECT_EQ(RedactedUrl("/tmp/runs.db"), "/tmp/runs.db");
  EXPECT_EQ(RedactedUrl("redis://:pw@127.0.0.1:6379/0"), "redis://:***@127.0.0.1:6379/0");
}

}  // namespace
}  // namespace runloom
