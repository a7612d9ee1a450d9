// RedisClient against the test Redis (src/testing/test_servers.h), and its
// URL parsing and error mapping.
#include "redis/redis_client.h"

#include "runloom/clock.h"

#include "testing/status_matchers.h"
#include "testing/tcp_probe.h"
#include "testing/test_servers.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <string>
#include <unistd.h>

namespace runloom::redis {
namespace {

using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;
using Type = RedisReply::Type;

RedisUrl TestRedis(int db = 0) {
  auto servers = testing::GetTestServers();
  EXPECT_OK(servers);
  auto url = ParseRedisUrl(servers.ok() ? servers->redis_url : "");
  EXPECT_OK(url);
  RedisUrl out = url.ok() ? *url : RedisUrl{};
  out.db = db;
  return out;
}

// A key no other test uses.
std::string Key(const std::string& name) {
  return absl::StrCat("redis_client_test:", getpid(), ":", name);
}

TEST(ParseRedisUrl, AcceptsHostPortAndDb) {
  auto a = ParseRedisUrl("redis://127.0.0.1:6379");
  ASSERT_OK(a);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 6379);
  EXPECT_EQ(a->db, 0);
  auto b = ParseRedisUrl("redis://cache.internal:7000/3");
  ASSERT_OK(b);
  EXPECT_EQ(b->host, "cache.internal");
  EXPECT_EQ(b->port, 7000);
  EXPECT_EQ(b->db, 3);
  auto c = ParseRedisUrl("redis://[::1]:6380/15");
  ASSERT_OK(c);
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->db, 15);
  EXPECT_EQ(c->Address(), "[::1]:6380");
}

TEST(ParseRedisUrl, RefusesEverythingElseSayingTheForm) {
  for (const char* bad :
       {"", "127.0.0.1:6379", "http://h:1", "rediss://h:6379", "redis://h", "redis://:6379",
        "redis://h:0", "redis://h:65536", "redis://h:+1", "redis://h: 1", "redis://h:1/16",
        "redis://h:1/-1", "redis://h:1/x", "redis://u:p@h:1", "redis://h:1?db=2", "redis://[::1/0",
        "redis://[::1]/0"}) {
    SCOPED_TRACE(bad);
    EXPECT_THAT(ParseRedisUrl(bad),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("redis://host:port[/db]")));
  }
}

TEST(RedisClient, ClosedPortIsUnavailableQuicklyWithTheAddress) {
  auto port = testing::ClosedLoopbackPort();
  ASSERT_OK(port);
  RedisClient client({.host = "127.0.0.1", .port = *port}, {});
  const absl::Time start = RealClock()->Now();
  EXPECT_THAT(client.Command({"PING"}),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr(absl::StrCat("Redis at 127.0.0.1:", *port))));
  EXPECT_LT(RealClock()->Now() - start, absl::Seconds(2));
  EXPECT_FALSE(client.connected());
  // ReadReply needs a connection.
  EXPECT_THAT(client.ReadReply(), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(RedisClient, SilentServerTimesOutWithinTheConnectAndCommandTimeouts) {
  auto listener = testing::TcpListener::Open();  // accepts in the kernel, never answers
  ASSERT_OK(listener);
  RedisClient client(
      {.host = "127.0.0.1", .port = (*listener)->port()},
      {.connect_timeout = absl::Milliseconds(200), .command_timeout = absl::Milliseconds(200)});
  const absl::Time start = RealClock()->Now();
  EXPECT_THAT(client.Command({"PING"}), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_LT(RealClock()->Now() - start, absl::Seconds(2));
  EXPECT_FALSE(client.connected());
}

TEST(RedisClient, RepliesAreOwnedValuesOfEachType) {
  RedisClient client(TestRedis(), {});
  auto pong = client.Command({"PING"});
  ASSERT_OK(pong);
  EXPECT_EQ(pong->type, Type::kStatus);
  EXPECT_EQ(pong->str, "PONG");
  // Arguments are binary-safe and never a format string.
  const std::string value = std::string("a %s %d \r\n b\0c", 15);
  const std::string key = Key("binary");
  ASSERT_OK(client.Command({"SET", key, value}));
  auto got = client.Command({"GET", key});
  ASSERT_OK(got);
  EXPECT_EQ(got->type, Type::kString);
  EXPECT_EQ(got->str, value);
  auto missing = client.Command({"GET", Key("missing")});
  ASSERT_OK(missing);
  EXPECT_EQ(missing->type, Type::kNil);
  const std::string list = Key("list");
  ASSERT_OK(client.Command({"DEL", list}));
  auto pushed = client.Command({"RPUSH", list, "x", "y"});
  ASSERT_OK(pushed);
  EXPECT_EQ(pushed->type, Type::kInteger);
  EXPECT_EQ(pushed->integer, 2);
  auto range = client.Command({"LRANGE", list, "0", "-1"});
  ASSERT_OK(range);
  ASSERT_EQ(range->type, Type::kArray);
  ASSERT_EQ(range->elements.size(), 2u);
  EXPECT_EQ(range->elements[1].str, "y");
  // An error reply is a reply: the connection stays usable.
  auto err = client.Command({"NO_SUCH_COMMAND", "x"});
  ASSERT_OK(err);
  EXPECT_EQ(err->type, Type::kError);
  EXPECT_THAT(err->str, HasSubstr("unknown command"));
  EXPECT_TRUE(client.connected());
  EXPECT_THAT(client.Command({}), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(RedisClient, SelectsTheUrlsDatabase) {
  constexpr int kDb = 5;
  const std::string key = Key("db");
  RedisClient in_db(TestRedis(kDb), {});
  RedisClient in_zero(TestRedis(0), {});
  ASSERT_OK(in_db.Command({"SET", key, "five"}));
  auto there = in_db.Command({"GET", key});
  ASSERT_OK(there);
  EXPECT_EQ(there->str, "five");
  auto not_here = in_zero.Command({"GET", key});
  ASSERT_OK(not_here);
  EXPECT_EQ(not_here->type, Type::kNil);
  ASSERT_OK(in_db.Command({"DEL", key}));
}

TEST(RedisClient, ReconnectsOnTheNextCommandAfterTheConnectionBroke) {
  RedisClient victim(TestRedis(), {});
  RedisClient killer(TestRedis(), {});
  auto id = victim.Command({"CLIENT", "ID"});
  ASSERT_OK(id);
  ASSERT_EQ(id->type, Type::kInteger);
  auto killed = killer.Command({"CLIENT", "KILL", "ID", std::to_string(id->integer)});
  ASSERT_OK(killed);
  ASSERT_EQ(killed->integer, 1);
  EXPECT_THAT(victim.Command({"PING"}), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_FALSE(victim.connected());
  auto again = victim.Command({"PING"});
  ASSERT_OK(again);
  EXPECT_EQ(again->str, "PONG");
  auto new_id = victim.Command({"CLIENT", "ID"});
  ASSERT_OK(new_id);
  EXPECT_NE(new_id->integer, id->integer);
}

TEST(RedisClient, ReadReplyReceivesPublishedMessages) {
  RedisClient subscriber(TestRedis(), {.command_timeout = absl::Seconds(5)});
  RedisClient publisher(TestRedis(), {});
  const std::string channel = Key("chan");
  auto sub = subscriber.Command({"SUBSCRIBE", channel});
  ASSERT_OK(sub);
  ASSERT_EQ(sub->type, Type::kArray);
  EXPECT_EQ(sub->elements[0].str, "subscribe");
  auto n = publisher.Command({"PUBLISH", channel, "hello"});
  ASSERT_OK(n);
  EXPECT_EQ(n->integer, 1);
  auto msg = subscriber.ReadReply();
  ASSERT_OK(msg);
  ASSERT_EQ(msg->elements.size(), 3u);
  EXPECT_EQ(msg->elements[0].str, "message");
  EXPECT_EQ(msg->elements[1].str, channel);
  EXPECT_EQ(msg->elements[2].str, "hello");
}

}  // namespace
}  // namespace runloom::redis
