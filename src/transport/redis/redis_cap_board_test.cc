// The LLM concurrency cap on a real Redis (the test servers): publication
// with a TTL the server expires, executors following it and falling back to
// the static cap when the controller stops, and an unreachable Redis.
#include "transport/redis/redis_cap_board.h"

#include "llm/concurrency_controller.h"
#include "llm/llm_slots.h"
#include "testing/capturing_logger.h"
#include "testing/status_matchers.h"
#include "testing/test_servers.h"
#include "transport/redis/redis_client.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <unistd.h>

namespace runloom::redis {
namespace {

using ::runloom::testing::StatusIs;

RedisUrl TestRedis() {
  auto servers = testing::GetTestServers();
  EXPECT_OK(servers);
  auto url = ParseRedisUrl(servers.ok() ? servers->redis_url : "");
  EXPECT_OK(url);
  return url.ok() ? *url : RedisUrl{};
}

std::string Prefix(const std::string& name) {
  return absl::StrCat("runloom:{redis_cap_board_test:", getpid(), ":", name, "}");
}

TEST(RedisCapBoard, PublishesAKeyTheServerExpires) {
  const std::string prefix = Prefix("expire");
  std::shared_ptr<CapBoard> board = NewRedisCapBoard(TestRedis(), prefix);
  EXPECT_EQ(board->Read("openai").value_or(7), std::nullopt);
  ASSERT_OK(board->Publish("openai", 12, absl::Milliseconds(300)));
  EXPECT_EQ(board->Read("openai").value_or(std::nullopt), 12);

  RedisClient raw(TestRedis(), {});
  absl::StatusOr<RedisReply> value = raw.Command({"GET", prefix + ":llm_cap:openai"});
  ASSERT_OK(value);
  EXPECT_EQ(value->str, "12");
  absl::StatusOr<RedisReply> ttl = raw.Command({"PTTL", prefix + ":llm_cap:openai"});
  ASSERT_OK(ttl);
  EXPECT_GT(ttl->integer, 0);
  EXPECT_LE(ttl->integer, 300);

  absl::SleepFor(absl::Milliseconds(400));
  EXPECT_EQ(board->Read("openai").value_or(7), std::nullopt);

  // A value that is not a cap is reported, not trusted.
  ASSERT_OK(raw.Command({"SET", prefix + ":llm_cap:bad", "lots"}));
  EXPECT_THAT(board->Read("bad"), StatusIs(absl::StatusCode::kDataLoss));
  ASSERT_OK(raw.Command({"DEL", prefix + ":llm_cap:bad"}));
}

TEST(RedisCapBoard, ExecutorsFollowTheControllerAndFallBackWhenItStops) {
  testing::CapturingLogger log;
  std::shared_ptr<CapBoard> board = NewRedisCapBoard(TestRedis(), Prefix("fallback"));
  ConcurrencyOptions o{.static_cap = 5,
                       .tick = absl::Milliseconds(50),
                       .ttl = absl::Milliseconds(300),
                       .refresh = absl::Milliseconds(10)};
  auto controller = std::make_shared<ConcurrencyController>(
      "fake", o, ControllerDeps{.clock = RealClock(), .logger = &log, .board = board});
  // Two executors' slots (two processes in production) share the key.
  LlmSlots a("fake", o, &log);
  LlmSlots b("fake", o, &log);
  a.Attach(board, controller);
  b.Attach(board, nullptr);
  controller->Start();
  {
    std::optional<LlmSlots::Slot> s = a.TryAcquire(RealClock());
    ASSERT_TRUE(s.has_value());
    s->Finish(CallOutcome::Kind::kRateLimited, {});  // cut at once: 5 -> 2
  }
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(a.Cap(RealClock()), 2);
  EXPECT_EQ(b.Cap(RealClock()), 2);

  controller->Stop();
  absl::SleepFor(absl::Milliseconds(450));  // past the TTL, nobody renewing
  EXPECT_EQ(b.Cap(RealClock()), 5);
  EXPECT_EQ(log.Count(LogLevel::kWarning, "no fresh cap on redis "), 1);
}

TEST(RedisCapBoard, UnreachableRedisIsUnavailableAndExecutorsUseTheStaticCap) {
  RedisUrl closed{.host = "127.0.0.1", .port = 1};
  testing::CapturingLogger log;
  std::shared_ptr<CapBoard> board =
      NewRedisCapBoard(closed, Prefix("down"), {.connect_timeout = absl::Milliseconds(100)});
  EXPECT_THAT(board->Publish("p", 3, absl::Seconds(1)), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(board->Read("p"), StatusIs(absl::StatusCode::kUnavailable));
  LlmSlots slots("p", {.static_cap = 4}, &log);
  slots.Attach(board, nullptr);
  EXPECT_EQ(slots.Cap(RealClock()), 4);
  EXPECT_EQ(log.Count(LogLevel::kWarning, "using the static cap 4"), 1);
}

}  // namespace
}  // namespace runloom::redis
