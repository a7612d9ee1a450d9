// `--stage-events` and RUNLOOM_STAGE_EVENTS, end to end: the real binary
// publishes to the test Redis from each command that executes runs (`run`,
// `worker`, `serve`), refuses a malformed URL with exit 2, and finishes its
// run with a warning per event when Redis is down.
#include "runloom/clock.h"

#include "core/status_macros.h"
#include "testing/status_matchers.h"
#include "testing/tcp_probe.h"
#include "testing/test_servers.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redis/redis_client.h"

#include <csignal>
#include <cstdlib>
#include <memory>
#include <string>
#include <unistd.h>
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

// A tenant of this process alone: ctest runs this binary's tests in
// processes side by side on one Redis, and a subscriber of a shared channel
// read another test's events.
const std::string& Tenant() {
  static const std::string tenant = absl::StrCat("t", getpid());
  return tenant;
}

std::vector<std::string> RunArgs(const std::string& dir) {
  return {"run",     dir + "/wf.yaml",     "--db",    dir + "/r.db", "--input", "doc=d9",
          "--input", "tenant=" + Tenant(), "--input", "node=n9"};
}

// A subscriber to the run's channel on the test Redis.
class StageSubscriber {
 public:
  static absl::StatusOr<std::unique_ptr<StageSubscriber>> Open(const std::string& redis_url) {
    RUNLOOM_ASSIGN_OR_RETURN(redis::RedisUrl url, redis::ParseRedisUrl(redis_url));
    auto s = std::unique_ptr<StageSubscriber>(new StageSubscriber(url));
    RUNLOOM_RETURN_IF_ERROR(
        s->client_.Command({"SUBSCRIBE", absl::StrCat("pipeline:", Tenant(), ":n9")}).status());
    return s;
  }

  // The three stage events of one run of kWorkflow, as stage/status, each
  // checked to carry `run_id` and the document id.
  std::vector<std::string> ReadRun(const std::string& run_id) {
    std::vector<std::string> got;
    for (int i = 0; i < 3; ++i) {
      auto m = client_.ReadReply();
      EXPECT_OK(m);
      if (!m.ok() || m->elements.size() != 3u) break;
      const nlohmann::json p = nlohmann::json::parse(m->elements[2].str);
      EXPECT_EQ(p["correlation_id"], run_id);
      EXPECT_EQ(p["document_id"], "d9");
      got.push_back(
          absl::StrCat(p["stage"].get<std::string>(), "/", p["status"].get<std::string>()));
    }
    return got;
  }

 private:
  explicit StageSubscriber(const redis::RedisUrl& url)
      : client_(url, {.command_timeout = absl::Seconds(20)}) {}
  redis::RedisClient client_;
};

// Admits a run of kWorkflow in `dir` without executing it; its id, or "".
std::string DetachedRun(const std::string& dir) {
  std::vector<std::string> args = RunArgs(dir);
  args.push_back("--detach");
  Result admitted = RunCli(args);
  EXPECT_EQ(admitted.code, 0) << admitted.out;
  return RunIdFrom(admitted.out);
}

const auto kEveryStage =
    ::testing::ElementsAre("parsing/started", "indexing/started", "completed/succeeded");

TEST(StageEventsCli, FlagPublishesEveryStageToTheChannel) {
  auto servers = GetTestServers();
  ASSERT_OK(servers);
  auto sub = StageSubscriber::Open(servers->redis_url);
  ASSERT_OK(sub);
  const std::string dir = WorkflowFile();
  std::vector<std::string> args = RunArgs(dir);
  args.push_back("--stage-events");
  args.push_back(servers->redis_url);
  Result r = RunCli(args);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT((*sub)->ReadRun(RunIdFrom(r.out)), kEveryStage);
}

// A run admitted with --detach, a subscriber to its channel, and the test
// Redis's URL, for the commands whose executors run it.
class DetachedStageRun : public ::testing::Test {
 protected:
  void SetUp() override {
    auto servers = GetTestServers();
    ASSERT_OK(servers);
    redis_url_ = servers->redis_url;
    auto sub = StageSubscriber::Open(redis_url_);
    ASSERT_OK(sub);
    sub_ = *std::move(sub);
    dir_ = WorkflowFile();
    run_id_ = DetachedRun(dir_);
    ASSERT_FALSE(run_id_.empty());
  }

  std::string redis_url_;
  std::unique_ptr<StageSubscriber> sub_;
  std::string dir_;
  std::string run_id_;
};

// Executed by `runloom worker --stage-events`.
TEST_F(DetachedStageRun, WorkerExecutorsPublishEveryStage) {
  Result worker =
      RunCli({"worker", "--db", dir_ + "/r.db", "--until-idle", "--stage-events", redis_url_});
  ASSERT_EQ(worker.code, 0) << worker.out;
  EXPECT_THAT(sub_->ReadRun(run_id_), kEveryStage);
}

// Executed by the executors of `runloom serve --stage-events` (before, serve
// had no such flag and its executors published nothing).
TEST_F(DetachedStageRun, ServeExecutorsPublishEveryStage) {
  const std::string log = dir_ + "/serve.log";
  Child server({"serve", "--db", dir_ + "/r.db", "--listen", "127.0.0.1:0", "--insecure-no-auth",
                "--stage-events", redis_url_},
               log);
  ASSERT_NE(WaitForServePort(log), 0) << ReadFile(log);
  EXPECT_THAT(sub_->ReadRun(run_id_), kEveryStage);
  server.Kill(SIGTERM);
  EXPECT_EQ(server.Wait(), 0) << ReadFile(log);
}

// Reference 004's own verification, on the example: `redis-cli PSUBSCRIBE
// 'pipeline:*'` while the ingest example runs with stage events on shows
// one JSON per stage (save_metadata's pending and processing, parsing,
// chunking, indexing) and the terminal completed.
TEST(StageEventsCli, IngestExampleShowsEveryStageToRedisCliPsubscribe) {
  auto servers = GetTestServers();
  ASSERT_OK(servers);
  const std::string dir = MakeTempDir("stage-ingest");
  const std::string port = servers->redis_url.substr(servers->redis_url.rfind(':') + 1);
  const std::string log = dir + "/psubscribe.log";
  Child cli({"-h", "127.0.0.1", "-p", port, "PSUBSCRIBE", "pipeline:*"}, log,
            {.program = "/usr/bin/redis-cli"});
  auto subscribed = [&] { return ReadFile(log).find("pipeline:*\n1") != std::string::npos; };
  for (int i = 0; i < 500 && !subscribed(); ++i) RealClock()->SleepFor(absl::Milliseconds(10));
  ASSERT_TRUE(subscribed()) << ReadFile(log);
  Result r = RunCli({"run", SourceDir() + "/examples/ingest.yaml", "--db", dir + "/i.db", "--input",
                     "document_id=doc-1", "--input", "tenant=" + Tenant(), "--input", "node=n1",
                     "--stage-events", servers->redis_url});
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string run_id = RunIdFrom(r.out);
  std::vector<std::string> stages;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    stages.clear();
    for (absl::string_view line : absl::StrSplit(ReadFile(log), '\n')) {
      if (!absl::StartsWith(line, "{")) continue;
      const nlohmann::json p = nlohmann::json::parse(line, nullptr, false);
      if (!p.is_object() || p.value("correlation_id", "") != run_id) continue;
      EXPECT_EQ(p["document_id"], "doc-1");
      EXPECT_EQ(p["tenant_id"], Tenant());
      EXPECT_EQ(p["node_id"], "n1");
      stages.push_back(
          absl::StrCat(p["stage"].get<std::string>(), "/", p["status"].get<std::string>()));
    }
    if (!stages.empty() && stages.back() == "completed/succeeded") break;
    RealClock()->SleepFor(absl::Milliseconds(20));
  }
  cli.Kill(SIGTERM);
  cli.Wait();
  EXPECT_THAT(stages,
              ::testing::ElementsAre("pending/started", "processing/started", "parsing/started",
                                     "chunking/started", "indexing/started", "completed/succeeded"))
      << ReadFile(log);
  EXPECT_THAT(ReadFile(log), HasSubstr(absl::StrCat("pipeline:", Tenant(), ":n1")));
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
  for (size_t at = 0; (at = r.out.find(absl::StrCat("not published to pipeline:", Tenant(), ":n9"),
                                       at)) != std::string::npos;
       ++at) {
    ++warnings;
  }
  EXPECT_EQ(warnings, 3u) << r.out;
}

}  // namespace
}  // namespace runloom::testing
