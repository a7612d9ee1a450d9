// Stage events (reference 004's I/O matrix) against the test Redis: a second
// connection subscribes and sees what the engine published. Each test uses
// its own channel prefix; a sentinel published after the run marks the end of
// what the run published, so "nothing published" is checked without waiting.
#include "runloom/engine.h"

#include "engine/observe/stage_events.h"
#include "testing/capturing_logger.h"
#include "testing/engine_test_util.h"
#include "testing/status_matchers.h"
#include "testing/tcp_probe.h"
#include "testing/test_servers.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redis/redis_client.h"
#include "redis/redis_publisher.h"

#include <atomic>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

namespace runloom {
namespace {

using engine_internal::StageEvent;
using engine_internal::StageEventPayload;
using engine_internal::TerminalStageUpdate;
using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

constexpr char kTimestamp[] = "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z";

// Three staged steps, one without a stage, a secret and a content input.
constexpr char kPipeline[] = R"(name: ingest
inputs:
  doc_id: {type: string, required: true}
  tenant: {type: string}
  node: {type: integer}
  body: {type: string, default: ""}
  api_key: {type: string, secret: true}
stage_events: {document_id: doc_id, tenant_id: tenant, node_id: node}
steps:
  - {id: parse, kind: noop, stage: parsing}
  - {id: plain, kind: noop}
  - {id: chunk, kind: noop, stage: chunking}
  - {id: index, kind: noop, stage: indexing}
)";

// A workflow `name` with string id inputs doc_id, tenant and node, and
// `steps` (YAML list items).
std::string StringIdWorkflow(const std::string& name, const std::string& steps) {
  return absl::StrCat("name: ", name, "\n", R"(inputs:
  doc_id: {type: string}
  tenant: {type: string}
  node: {type: string}
stage_events: {document_id: doc_id, tenant_id: tenant, node_id: node}
steps:)",
                      steps);
}

std::string RedisUrl() {
  auto servers = testing::GetTestServers();
  EXPECT_OK(servers);
  return servers.ok() ? servers->redis_url : "";
}

std::string UniquePrefix() {
  static std::atomic<int> n{0};
  return absl::StrCat("stage_test_", getpid(), "_", n++);
}

struct Message {
  std::string channel;
  json payload;
};

// A second connection, PSUBSCRIBEd to "<prefix>:*" before the run starts.
class Subscriber {
 public:
  explicit Subscriber(std::string prefix)
      : prefix_(std::move(prefix)),
        client_(*redis::ParseRedisUrl(RedisUrl()), {.command_timeout = absl::Seconds(10)}) {
    auto r = client_.Command({"PSUBSCRIBE", prefix_ + ":*"});
    EXPECT_OK(r);
  }
  // Everything published to the prefix until the sentinel this publishes now.
  std::vector<Message> Drain() {
    redis::RedisClient pub(*redis::ParseRedisUrl(RedisUrl()), {});
    EXPECT_OK(pub.Command({"PUBLISH", prefix_ + ":sentinel", "{}"}));
    std::vector<Message> out;
    for (;;) {
      auto r = client_.ReadReply();
      EXPECT_OK(r);
      if (!r.ok() || r->elements.size() != 4) return out;
      if (r->elements[2].str == prefix_ + ":sentinel") return out;
      out.push_back({r->elements[2].str, json::parse(r->elements[3].str)});
      raw_ += r->elements[3].str;
    }
  }
  const std::string& raw() const { return raw_; }

 private:
  const std::string prefix_;
  redis::RedisClient client_;
  std::string raw_;  // every payload received, for "never appears" checks
};

EngineOptions WithStageEvents(const std::string& url, const std::string& prefix, Logger* logger,
                              absl::Duration timeout = absl::Milliseconds(250)) {
  EngineOptions opts;
  absl::StatusOr<std::shared_ptr<MessagePublisher>> publisher =
      redis::NewRedisPublisher(url, timeout);
  EXPECT_OK(publisher);
  opts.stage_events = {.publisher = publisher.value_or(nullptr), .channel_prefix = prefix};
  opts.env.logger = logger;
  return opts;
}

// A run's engine publishing to the test Redis under a prefix of its own,
// and a subscriber to that prefix.
class StageEventsOnRedis : public ::testing::Test {
 protected:
  StageEventsOnRedis()
      : prefix_(UniquePrefix()),
        sub_(prefix_),
        h_(WithStageEvents(RedisUrl(), prefix_, &logger_)) {}

  const std::string prefix_;
  testing::CapturingLogger logger_;
  Subscriber sub_;
  Harness h_;
};

json Inputs() {
  return {{"doc_id", "doc-42"},
          {"tenant", "acme"},
          {"node", 7},
          {"body", "TOP-SECRET-CONTENT"},
          {"api_key", "sk-very-secret"}};
}

std::vector<std::string> Stages(const std::vector<Message>& ms) {
  std::vector<std::string> out;
  for (const Message& m : ms) {
    out.push_back(absl::StrCat(m.payload.value("stage", "?"), "/", m.payload.value("status", "?")));
  }
  return out;
}

TEST_F(StageEventsOnRedis, HappyPathOneEventPerStageThenCompleted) {
  RunRecord r = h_.RunYaml(kPipeline, Inputs());
  ASSERT_EQ(r.status, RunStatus::kCompleted);
  std::vector<Message> ms = sub_.Drain();
  EXPECT_THAT(Stages(ms), ElementsAre("parsing/started", "chunking/started", "indexing/started",
                                      "completed/succeeded"));
  for (const Message& m : ms) {
    EXPECT_EQ(m.channel, prefix_ + ":acme:7");
    std::vector<std::string> keys;
    for (auto it = m.payload.begin(); it != m.payload.end(); ++it) keys.push_back(it.key());
    EXPECT_THAT(keys, ElementsAre("correlation_id", "document_id", "node_id", "stage", "status",
                                  "tenant_id", "timestamp"));
    EXPECT_EQ(m.payload["correlation_id"], r.id);
    EXPECT_EQ(m.payload["document_id"], "doc-42");
    EXPECT_EQ(m.payload["tenant_id"], "acme");
    EXPECT_EQ(m.payload["node_id"], "7");
    EXPECT_THAT(m.payload["timestamp"].get<std::string>(), MatchesRegex(kTimestamp));
  }
  EXPECT_EQ(logger_.Count(LogLevel::kWarning, "stage events"), 0);
}

TEST_F(StageEventsOnRedis, NoInputValueBeyondTheIdsIsPublished) {
  ASSERT_EQ(h_.RunYaml(kPipeline, Inputs()).status, RunStatus::kCompleted);
  ASSERT_EQ(sub_.Drain().size(), 4u);
  EXPECT_THAT(sub_.raw(), HasSubstr("doc-42"));  // the check below can fail
  EXPECT_THAT(sub_.raw(), Not(HasSubstr("TOP-SECRET-CONTENT")));
  EXPECT_THAT(sub_.raw(), Not(HasSubstr("sk-very-secret")));
  EXPECT_THAT(sub_.raw(), Not(HasSubstr("body")));
  EXPECT_THAT(sub_.raw(), Not(HasSubstr("api_key")));
}

TEST_F(StageEventsOnRedis, UpstreamFailureEndsWithFailedEventCarryingTheError) {
  RunRecord r = h_.RunYaml(StringIdWorkflow("ingest_fails", R"(
  - {id: parse, kind: noop, stage: parsing}
  - {id: index, kind: fail, stage: indexing}
  - {id: never, kind: noop, stage: chunking}
)"),
                           {{"doc_id", "d1"}, {"tenant", "t1"}, {"node", "n1"}});
  ASSERT_EQ(r.status, RunStatus::kFailed);
  std::vector<Message> ms = sub_.Drain();
  EXPECT_THAT(Stages(ms), ElementsAre("parsing/started", "indexing/started", "failed/failed"));
  ASSERT_FALSE(ms.empty());
  EXPECT_EQ(ms.back().channel, prefix_ + ":t1:n1");
  ASSERT_TRUE(ms.back().payload.contains("error"));
  EXPECT_FALSE(ms.back().payload["error"].get<std::string>().empty());
  EXPECT_EQ(ms.back().payload["error"], r.error);
  EXPECT_FALSE(ms.front().payload.contains("error"));
}

TEST(StageEvents, FlagOffMakesNoConnectionAtAll) {
  auto listener = testing::TcpListener::Open();
  ASSERT_OK(listener);
  const std::string url = absl::StrCat("redis://127.0.0.1:", (*listener)->port());
  testing::CapturingLogger logger;
  EngineOptions off = WithStageEvents(url, "off", &logger);
  off.stage_events.publisher = nullptr;
  Harness h(std::move(off));
  ASSERT_EQ(h.RunYaml(kPipeline, Inputs()).status, RunStatus::kCompleted);
  EXPECT_EQ((*listener)->Accepted(), 0);
  EXPECT_EQ(logger.Count(LogLevel::kWarning, "stage events"), 0);
  // The control: switched on, the same engine setup does connect there.
  EngineOptions on = WithStageEvents(url, "on", &logger, absl::Milliseconds(50));
  Harness h_on(std::move(on));
  ASSERT_EQ(h_on.RunYaml(kPipeline, Inputs()).status, RunStatus::kCompleted);
  EXPECT_GE((*listener)->Accepted(), 1);
}

TEST(StageEvents, RedisDownRunCompletesWithAWarningPerPublish) {
  auto port = testing::ClosedLoopbackPort();
  ASSERT_OK(port);
  testing::CapturingLogger logger;
  Harness h(WithStageEvents(absl::StrCat("redis://127.0.0.1:", *port), "down", &logger));
  const absl::Time start = RealClock()->Now();
  RunRecord r = h.RunYaml(kPipeline, Inputs());
  EXPECT_EQ(r.status, RunStatus::kCompleted);
  EXPECT_LT(RealClock()->Now() - start, absl::Seconds(5));
  for (const auto& [stage, n] :
       std::vector<std::pair<std::string, int>>{{"parsing/started", 1},
                                                {"completed/succeeded", 1},
                                                {"not published to down:acme:7", 4}}) {
    SCOPED_TRACE(stage);
    EXPECT_EQ(logger.Count(LogLevel::kWarning, stage), n);
  }
  EXPECT_EQ(logger.Count(LogLevel::kWarning, absl::StrCat("127.0.0.1:", *port)), 4);
  for (const auto& line : logger.lines()) EXPECT_THAT(line.message, Not(HasSubstr("TOP-SECRET")));
}

TEST_F(StageEventsOnRedis, MissingTenantOrNodeSkipsThePublishWithAnError) {
  json no_tenant = Inputs();
  no_tenant.erase("tenant");
  EXPECT_EQ(h_.RunYaml(kPipeline, no_tenant).status, RunStatus::kCompleted);
  EXPECT_EQ(logger_.Count(LogLevel::kError, "input 'tenant' (tenant_id) is missing or empty"), 4);
  json empty_node = Inputs();
  empty_node.erase("node");
  EXPECT_EQ(h_.RunYaml(kPipeline, empty_node).status, RunStatus::kCompleted);
  EXPECT_EQ(logger_.Count(LogLevel::kError, "input 'node' (node_id) is missing or empty"), 4);
  EXPECT_THAT(sub_.Drain(), ::testing::IsEmpty());
}

TEST_F(StageEventsOnRedis, WorkflowWithoutTheBlockPublishesNothing) {
  EXPECT_EQ(h_.RunYaml("name: plain\nsteps:\n  - {id: a, kind: noop}\n").status,
            RunStatus::kCompleted);
  EXPECT_THAT(sub_.Drain(), ::testing::IsEmpty());
  EXPECT_EQ(logger_.Count(LogLevel::kWarning, "stage events"), 0);
}

TEST_F(StageEventsOnRedis, RetriesDoNotRepeatAStagesStartedEvent) {
  RunRecord r = h_.RunYaml(StringIdWorkflow("flaky_parse", R"(
  - id: parse
    kind: fail
    times: 2
    stage: parsing
    retry: {max_attempts: 3, initial_delay: 1ms}
)"),
                           {{"doc_id", "d"}, {"tenant", "t"}, {"node", "n"}});
  ASSERT_EQ(r.status, RunStatus::kCompleted);
  ASSERT_EQ(h_.Steps(r.id)["parse"].attempt, 3);
  EXPECT_THAT(Stages(sub_.Drain()), ElementsAre("parsing/started", "completed/succeeded"));
}

// Runs that end without an execution holding them publish their end too.
TEST_F(StageEventsOnRedis, CancelAndResetOfRunsNobodyHoldsPublishFailed) {
  auto wf = LoadWorkflowYaml(kPipeline, "ingest.yaml");
  ASSERT_OK(wf);
  StartRunRequest req{.workflow = *wf, .inputs = Inputs()};
  auto first = h_.engine->StartRun(req);
  ASSERT_OK(first);
  ASSERT_OK(h_.engine->Cancel(first->run.id, "ops"));
  auto second = h_.engine->StartRun(req);
  ASSERT_OK(second);
  auto reset = h_.engine->ResetAll("admin");
  ASSERT_OK(reset);
  EXPECT_EQ(*reset, 1);
  std::vector<Message> ms = sub_.Drain();
  EXPECT_THAT(Stages(ms), ElementsAre("failed/failed", "failed/failed"));
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(ms[0].payload["correlation_id"], first->run.id);
  EXPECT_EQ(ms[0].payload["error"], "cancelled by ops");
  EXPECT_EQ(ms[1].payload["correlation_id"], second->run.id);
  EXPECT_EQ(ms[1].payload["error"], "admin reset by admin");
}

TEST(StageEvents, SweeperFailingARunAtTheAttemptCapPublishesFailed) {
  const std::string prefix = UniquePrefix();
  testing::CapturingLogger logger;
  Subscriber sub(prefix);
  SimulatedClock clock;
  EngineOptions opts = WithStageEvents(RedisUrl(), prefix, &logger);
  opts.lease_ttl = absl::Seconds(10);
  opts.enable_sweeper = false;
  Harness h(std::move(opts), &clock);
  auto wf = LoadWorkflowYaml(absl::StrCat("max_attempts: 1\n", kPipeline), "ingest.yaml");
  ASSERT_OK(wf);
  auto started = h.engine->StartRun({.workflow = *wf, .inputs = Inputs()});
  ASSERT_OK(started);
  ASSERT_OK(h.engine->store()->AcquireLease(started->run.id, "crashy", absl::Seconds(10), {}));
  clock.Advance(absl::Seconds(11));
  EXPECT_EQ(*h.engine->SweepOnce(), 1);
  std::vector<Message> ms = sub.Drain();
  EXPECT_THAT(Stages(ms), ElementsAre("failed/failed"));
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].payload["correlation_id"], started->run.id);
  EXPECT_THAT(ms[0].payload["error"].get<std::string>(), HasSubstr("attempt cap reached"));
  EXPECT_EQ(ms[0].payload["timestamp"], engine_internal::StageTimestamp(clock.Now()));
}

TEST(StageEvents, BadSettingsAreRefused) {
  for (const char* url : {"localhost:6379", "", "http://h:1"}) {
    EXPECT_THAT(redis::NewRedisPublisher(url),
                testing::StatusIs(absl::StatusCode::kInvalidArgument))
        << url;
  }
  EXPECT_THAT(redis::NewRedisPublisher("redis://h:1", absl::ZeroDuration()),
              testing::StatusIs(absl::StatusCode::kInvalidArgument));
  auto publisher = redis::NewRedisPublisher("redis://h:1");
  ASSERT_OK(publisher);
  for (const StageEventOptions& o :
       {StageEventOptions{.publisher = *publisher, .channel_prefix = ""}}) {
    auto backend = OpenSqlite(":memory:", {});
    ASSERT_OK(backend);
    EngineOptions opts;
    opts.stage_events = o;
    EXPECT_THAT(Engine::Open(std::move(opts), *std::move(backend)),
                testing::StatusIs(absl::StatusCode::kInvalidArgument));
  }
}

TEST(StageEventValues, TerminalUpdatesAndPayload) {
  EXPECT_EQ(TerminalStageUpdate(RunStatus::kCompleted, "").stage, "completed");
  EXPECT_EQ(TerminalStageUpdate(RunStatus::kCompleted, "").status, "succeeded");
  const auto failed = TerminalStageUpdate(RunStatus::kFailed, "step 'x' failed");
  EXPECT_EQ(failed.stage, "failed");
  EXPECT_EQ(failed.status, "failed");
  EXPECT_EQ(failed.error, "step 'x' failed");
  EXPECT_EQ(TerminalStageUpdate(RunStatus::kCancelled, "").error, "run cancelled");
  StageEvent e{.correlation_id = "r1",
               .document_id = "d",
               .tenant_id = "t",
               .node_id = "n",
               .update = {"parsing", "started", ""},
               .at = absl::FromUnixMillis(1776938412345)};
  EXPECT_EQ(StageEventPayload(e).dump(),
            R"({"correlation_id":"r1","document_id":"d","node_id":"n","stage":"parsing",)"
            R"("status":"started","tenant_id":"t","timestamp":"2026-04-23T10:00:12.345Z"})");
}

}  // namespace
}  // namespace runloom
