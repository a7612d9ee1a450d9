// `runloom run --stage-events` and RUNLOOM_STAGE_EVENTS, end to end: the real
// binary publishes to the test Redis, refuses a malformed URL with exit 2, and
// finishes its run with a warning per event when Redis is down.
#include "testing/status_matchers.h"
#include "testing/tcp_probe.h"
#include "testing/test_servers.h"
#include "transport/redis/redis_client.h"

#include "absl/strings/str_cat.h"
#include "cli_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <cstdlib>
#include <string>
#include <vector>

namespace runloom::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kWorkflow[] = R"(name: cli_stages
inputs:
  doc: {type: string, required: true}
  tenant: {type: string, required: true}
  node: {type: string, required: true}
stage_events: {document_id: doc, tenant_id: tenant, node_id: node}
steps:
  - {id: parse, kind: noop, stage: parsing}
  - {id: index, kind: noop, stage: indexing}
)";

std::string WorkflowFile() {
  const std::string dir = MakeTempDir("stage-cli");
  WriteFile(dir + "/wf.yaml", kWorkflow);
  return dir;
}

std::vector<std::string> RunArgs(const std::string& dir) {
  return {"run",    dir + "/wf.yaml", "--db",      dir + "/r.db", "--input",
          "doc=d9", "--input",        "tenant=t9", "--input",     "node=n9"};
}

TEST(StageEventsCli, FlagPublishesEveryStageToTheChannel) {
  auto servers = GetTestServers();
  ASSERT_OK(servers);
  auto url = redis::ParseRedisUrl(servers->redis_url);
  ASSERT_OK(url);
  redis::RedisClient sub(*url, {.command_timeout = absl::Seconds(20)});
  ASSERT_OK(sub.Command({"SUBSCRIBE", "pipeline:t9:n9"}));
  const std::string dir = WorkflowFile();
  std::vector<std::string> args = RunArgs(dir);
  args.push_back("--stage-events");
  args.push_back(servers->redis_url);
  Result r = RunCli(args);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string run_id = RunIdFrom(r.out);
  std::vector<std::string> got;
  for (int i = 0; i < 3; ++i) {
    auto m = sub.ReadReply();
    ASSERT_OK(m);
    ASSERT_EQ(m->elements.size(), 3u);
    const nlohmann::json p = nlohmann::json::parse(m->elements[2].str);
    EXPECT_EQ(p["correlation_id"], run_id);
    EXPECT_EQ(p["document_id"], "d9");
    got.push_back(absl::StrCat(p["stage"].get<std::string>(), "/", p["status"].get<std::string>()));
  }
  EXPECT_THAT(got,
              ::testing::ElementsAre("parsing/started", "indexing/started", "completed/succeeded"));
}

TEST(StageEventsCli, MalformedUrlIsExitTwoNamingTheSetting) {
  const std::string dir = WorkflowFile();
  std::vector<std::string> args = RunArgs(dir);
  args.push_back("--stage-events");
  args.push_back("http://127.0.0.1:6379");
  Result flag = RunCli(args);
  EXPECT_EQ(flag.code, 2);
  EXPECT_THAT(flag.out, HasSubstr("--stage-events: Redis URL 'http://127.0.0.1:6379'"));
  setenv("RUNLOOM_STAGE_EVENTS", "redis://nohost", 1);
  Result env = RunCli(RunArgs(dir));
  unsetenv("RUNLOOM_STAGE_EVENTS");
  EXPECT_EQ(env.code, 2);
  EXPECT_THAT(env.out, HasSubstr("RUNLOOM_STAGE_EVENTS: Redis URL 'redis://nohost'"));
}

TEST(StageEventsCli, RedisDownStillCompletesWithAWarningPerEvent) {
  auto port = ClosedLoopbackPort();
  ASSERT_OK(port);
  const std::string dir = WorkflowFile();
  setenv("RUNLOOM_STAGE_EVENTS", absl::StrCat("redis://127.0.0.1:", *port).c_str(), 1);
  Result r = RunCli(RunArgs(dir));
  unsetenv("RUNLOOM_STAGE_EVENTS");
  EXPECT_EQ(r.code, 0) << r.out;
  size_t warnings = 0;
  for (size_t at = 0; (at = r.out.find("not published to pipeline:t9:n9", at)) != std::string::npos;
       ++at) {
    ++warnings;
  }
  EXPECT_EQ(warnings, 3u) << r.out;
}

}  // namespace
}  // namespace runloom::testing
