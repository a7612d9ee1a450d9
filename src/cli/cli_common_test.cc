// The CLI's backend flags without a process: the queue URL's accepted form,
// the environment's precedence, and the exit code of each open failure.
#include "cli/cli_common.h"

#include "runloom/clock.h"

#include "cli/commands.h"
#include "llm/llm_concurrency.h"
#include "steps/builtin_steps.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

namespace runloom::cli {
namespace {

using ::testing::HasSubstr;

CommonFlags Queue(const std::string& url, const std::string& from = "--queue") {
  CommonFlags c;
  c.queue = url;
  c.queue_from = from;
  return c;
}

TEST(QueueUrl, AcceptsRedisHostPortAndAnOptionalDatabase) {
  for (const char* url :
       {"", "redis://localhost:6379", "redis://10.0.0.7:6380/0", "redis://[::1]:6379/15",
        "redis://cache-1.internal_x:1", "redis://h:65535/2"}) {
    EXPECT_TRUE(CheckQueueUrl(Queue(url)).ok()) << url << ": " << CheckQueueUrl(Queue(url));
  }
}

TEST(QueueUrl, RefusesEverythingElseNamingTheSourceValueAndForm) {
  const std::pair<const char*, const char*> bad[] = {
      {"redis:/h:6379", "scheme"},      {"rediss://h:6379", "scheme"},
      {"redis://h", "no port"},         {"redis://[::1]", "no port"},
      {"redis://h:", "port"},           {"redis://h:0", "port"},
      {"redis://h:65536", "port"},      {"redis://h:+80", "port"},
      {"redis://h: 80", "port"},        {"redis://:6379", "host"},
      {"redis://u:p@h:6379", "host"},   {"redis://h:6379/", "database number"},
      {"redis://h:6379/x", "database"}, {"redis://h:6379/1?x=y", "database"},
      {"redis://[zz]:6379", "host"},    {"redis://h/0", "no port"},
  };
  for (const auto& [url, why] : bad) {
    absl::Status s = CheckQueueUrl(Queue(url, "RUNLOOM_QUEUE"));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << url;
    EXPECT_THAT(s.message(), HasSubstr(why)) << url;
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("RUNLOOM_QUEUE '", url, "'")));
    EXPECT_THAT(s.message(), HasSubstr("(accepted: redis://host:port[/n])"));
  }
}

TEST(BackendFlags, AFlagBeatsTheEnvironmentWhichBeatsTheDefault) {
  setenv("RUNLOOM_DB", "/env/runs.db", 1);
  setenv("RUNLOOM_QUEUE", "redis://env:1", 1);
  CommonFlags given;
  given.db = "/flag/runs.db";
  given.queue = "";  // `--queue ""`: the store's own queue
  CommonFlags c = WithEnvironment(given, /*db_given=*/true, /*queue_given=*/true);
  EXPECT_EQ(c.db, "/flag/runs.db");
  EXPECT_EQ(c.db_from, "--db");
  EXPECT_EQ(c.queue, "");
  c = WithEnvironment(CommonFlags{}, false, false);
  EXPECT_EQ(c.db, "/env/runs.db");
  EXPECT_EQ(c.db_from, "RUNLOOM_DB");
  EXPECT_EQ(c.queue, "redis://env:1");
  EXPECT_EQ(c.queue_from, "RUNLOOM_QUEUE");
  setenv("RUNLOOM_DB", "", 1);  // empty = unset
  unsetenv("RUNLOOM_QUEUE");
  c = WithEnvironment(CommonFlags{}, false, false);
  EXPECT_EQ(c.db, "runloom.db");
  EXPECT_EQ(c.db_from, "");
  EXPECT_EQ(c.queue, "");
  unsetenv("RUNLOOM_DB");
}

TEST(BackendFlags, AnUnreachableServerIsBadInputALockedFileIsNot) {
  CommonFlags sqlite;
  CommonFlags redis = Queue("redis://h:1");
  CommonFlags postgres;
  postgres.db = "postgres://u@h:5432/d";
  const absl::Status down = absl::UnavailableError("connection refused");
  EXPECT_EQ(DbOpenFailure(sqlite, down), kExitNotCompleted) << "locked: retry";
  EXPECT_EQ(DbOpenFailure(redis, down), kExitBadInput);
  EXPECT_EQ(DbOpenFailure(postgres, down), kExitBadInput);
  EXPECT_EQ(DbOpenFailure(sqlite, absl::InvalidArgumentError("bad URL")), kExitBadInput);
  EXPECT_EQ(DbOpenFailure(redis, absl::UnimplementedError("no Redis")), kExitBadInput);
  EXPECT_EQ(DbOpenFailure(redis, absl::PermissionDeniedError("auth")), kExitBadInput);
  EXPECT_EQ(DbOpenFailure(sqlite, absl::DataLossError("torn")), kExitNotCompleted);
}

// --config: every configured provider's calls are capped, starting from (and
// falling back to) its max_concurrency; the built-in fake keeps its own cap.
TEST(StepKindsSetting, EachConfiguredProviderGetsItsStaticCap) {
  const std::string path = ::testing::TempDir() + "/caps_config.yaml";
  {
    std::ofstream f(path);
    f << "providers:\n"
         "  local: {kind: openai, base_url: 'http://127.0.0.1:9/v1', max_concurrency: 3}\n"
         "  other: {kind: anthropic, base_url: 'http://127.0.0.1:9/v1', max_concurrency: 5}\n"
         "models:\n"
         "  writer: {provider: local}\n"
         "  editor: {provider: local, model: m2}\n"
         "  reviewer: {provider: other}\n";
  }
  absl::StatusOr<std::shared_ptr<StepRegistry>> kinds = StepKindsSetting(path);
  ASSERT_TRUE(kinds.ok()) << kinds.status();
  LlmConcurrency* caps = LlmConcurrencyOf(**kinds);
  ASSERT_NE(caps, nullptr);
  std::map<std::string, int> by_name;
  for (const LlmConcurrency::CapState& c : caps->Caps(RealClock())) by_name[c.name] = c.cap;
  EXPECT_EQ(by_name,
            (std::map<std::string, int>{{"fake", kFakeStaticCap}, {"local", 3}, {"other", 5}}));
}

// --log-format beats $RUNLOOM_LOG_FORMAT; an unknown value from either names
// its source and the accepted ones.
TEST(LogFormatSetting, FlagThenEnvironmentThenText) {
  unsetenv("RUNLOOM_LOG_FORMAT");
  EXPECT_EQ(*LogFormatSetting(std::nullopt), LogFormat::kText);
  EXPECT_EQ(*LogFormatSetting("json"), LogFormat::kJson);
  setenv("RUNLOOM_LOG_FORMAT", "json", 1);
  EXPECT_EQ(*LogFormatSetting(std::nullopt), LogFormat::kJson);
  EXPECT_EQ(*LogFormatSetting("text"), LogFormat::kText);
  setenv("RUNLOOM_LOG_FORMAT", "", 1);  // empty = unset
  EXPECT_EQ(*LogFormatSetting(std::nullopt), LogFormat::kText);
  setenv("RUNLOOM_LOG_FORMAT", "yaml", 1);
  EXPECT_THAT(LogFormatSetting(std::nullopt).status().message(),
              HasSubstr("RUNLOOM_LOG_FORMAT: unknown log format 'yaml'; use text or json"));
  EXPECT_THAT(LogFormatSetting("JSON").status().message(),
              HasSubstr("--log-format: unknown log format 'JSON'; use text or json"));
  EXPECT_EQ(LogFormatSetting("").status().code(), absl::StatusCode::kInvalidArgument);
  unsetenv("RUNLOOM_LOG_FORMAT");
}

}  // namespace
}  // namespace runloom::cli
