// The Redis Streams transport on the test PostgreSQL and Redis (and, for
// restarts and outages, on a redis-server of its own): claim, ack, reclaim
// after the visibility timeout, dead letters at the cap, recovery after
// Redis loses everything, a relay that cannot publish, and OpenBackend's
// refusals.
#include "runloom/backend.h"
#include "runloom/clock.h"
#include "runloom/store.h"
#include "runloom/transport.h"

#include "store/event_check.h"
#include "store/postgres/pg_conn.h"
#include "testing/own_redis.h"
#include "testing/status_matchers.h"
#include "testing/tcp_probe.h"
#include "testing/test_servers.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redis/redis_client.h"

#include <atomic>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

namespace runloom::transport_internal {
namespace {

using redis::RedisClient;
using redis::RedisReply;
using ::runloom::testing::IsOkAndHolds;
using ::runloom::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::testing::UnorderedElementsAre;

// Real time a test waits for the relay thread (it retries at least every second).
constexpr absl::Duration kPatience = absl::Seconds(20);

class RedisTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_internal::TEST_SetEventCheckOnWrite(false);
    absl::StatusOr<testing::TestServers> servers = testing::GetTestServers();
    ASSERT_OK(servers);
    redis_url_ = servers->redis_url;
    static std::atomic<int> counter{0};
    absl::StatusOr<std::string> db =
        testing::CreateTestPostgresDatabase(absl::StrCat("redis_transport_", counter++));
    ASSERT_OK(db);
    db_url_ = *db;
  }

  absl::StatusOr<Backend> Open(const std::string& queue_url, int max_deliveries = 10) {
    BackendOptions o;
    o.queue_url = queue_url;
    o.transport.max_deliveries = max_deliveries;
    return OpenBackend(db_url_, o);
  }
  void OpenWith(const std::string& queue_url, int max_deliveries = 10) {
    absl::StatusOr<Backend> b = Open(queue_url, max_deliveries);
    ASSERT_OK(b);
    backend_ = *std::move(b);
  }
  void OpenDefault(int max_deliveries = 10) { OpenWith(redis_url_, max_deliveries); }

  // One SQL statement on the test database, its first column of the first row.
  std::string Sql(const std::string& sql) {
    absl::StatusOr<std::unique_ptr<store_internal::PgConn>> c =
        store_internal::PgConn::Connect(db_url_, "");
    EXPECT_OK(c);
    if (!c.ok()) return "";
    PGresult* r = PQexec((*c)->raw(), sql.c_str());
    std::string out;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0) out = PQgetvalue(r, 0, 0);
    EXPECT_TRUE(PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK)
        << sql << ": " << PQresultErrorMessage(r);
    PQclear(r);
    return out;
  }
  // Moves the database's clock (runloom_now()), the transport's authority.
  void Advance(absl::Duration d) {
    Sql(absl::StrCat("UPDATE runloom.clock SET offset_us = offset_us + ",
                     absl::ToInt64Microseconds(d)));
  }
  // A Redis command on the shared test Redis, under this database's keys.
  RedisReply RedisCommand(std::vector<std::string> argv) {
    absl::StatusOr<redis::RedisUrl> url = redis::ParseRedisUrl(redis_url_);
    EXPECT_OK(url);
    RedisClient c(*url, {});
    absl::StatusOr<RedisReply> r = c.Command(argv);
    EXPECT_OK(r);
    return r.ok() ? *r : RedisReply{};
  }
  std::string Key(const std::string& name) {
    return absl::StrCat(
        "runloom:{", Sql("SELECT value FROM runloom.meta WHERE key = 'instance_id'"), "}:", name);
  }

  std::string Create() {
    NewRun r;
    r.id = absl::StrCat("r_redis_", next_++);
    r.workflow_name = "wf";
    r.workflow_version = 1;
    r.workflow_digest = "sha256:abc";
    r.inputs = nlohmann::json::object();
    r.inputs_digest = "sha256:def";
    r.max_attempts = 3;
    absl::StatusOr<CreateRunResult> c = backend_.store->CreateRun(r, {});
    EXPECT_OK(c);
    return r.id;
  }
  std::vector<QueueMessage> Claim(absl::Duration visibility = absl::Seconds(60)) {
    absl::StatusOr<std::vector<QueueMessage>> m = backend_.transport->Claim("c", 100, visibility);
    EXPECT_OK(m);
    return m.ok() ? *m : std::vector<QueueMessage>{};
  }
  // Claims until `n` messages came (the relay may still be publishing, or
  // Redis be coming back).
  std::vector<QueueMessage> ClaimAtLeast(size_t n) {
    std::vector<QueueMessage> got;
    const absl::Time give_up = RealClock()->Now() + kPatience;
    while (got.size() < n && RealClock()->Now() < give_up) {
      // kUnavailable for a moment after Redis came back (the down pause).
      absl::StatusOr<std::vector<QueueMessage>> m =
          backend_.transport->Claim("c", 100, absl::Seconds(60));
      for (QueueMessage& q : m.ok() ? *m : std::vector<QueueMessage>{}) got.push_back(std::move(q));
      if (got.size() < n) RealClock()->SleepFor(absl::Milliseconds(100));
    }
    return got;
  }

  std::string redis_url_;
  std::string db_url_;
  Backend backend_;
  int next_ = 0;
};

TEST_F(RedisTransportTest, ClaimAckAndReclaimAfterTheVisibilityTimeout) {
  OpenDefault();
  const std::string a = Create();
  const std::string b = Create();
  std::vector<QueueMessage> first = Claim(absl::Seconds(10));
  ASSERT_THAT(first, ElementsAre(Field(&QueueMessage::run_id, a), Field(&QueueMessage::run_id, b)));
  EXPECT_THAT(first[0].id, ::testing::MatchesRegex("[0-9]+-[0-9]+")) << "a stream entry id";
  EXPECT_EQ(first[0].deliveries, 1);
  EXPECT_THAT(Claim(), IsEmpty());
  // The outbox rows were published and deleted; the stream holds both.
  EXPECT_EQ(Sql("SELECT count(*) FROM runloom.queue"), "0");
  EXPECT_EQ(RedisCommand({"XLEN", Key("jobs")}).integer, 2);

  Advance(absl::Seconds(10));  // the authority's time, not Redis' idle time
  std::vector<QueueMessage> again = Claim();
  ASSERT_THAT(again, SizeIs(2));
  EXPECT_EQ(again[0].id, first[0].id);
  EXPECT_EQ(again[0].deliveries, 2);
  ASSERT_OK(backend_.transport->Ack(again[0]));
  ASSERT_OK(backend_.transport->Ack(again[0]));  // twice is fine
  EXPECT_EQ(RedisCommand({"XLEN", Key("jobs")}).integer, 1) << "acked entries are deleted";
  EXPECT_THAT(backend_.transport->FindMessages({a, b}),
              IsOkAndHolds(Field(&MessagePresence::pending, ElementsAre(b))));
  EXPECT_THAT(backend_.transport->Ack(QueueMessage{"x-1", a, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(RedisTransportTest, DeadLetteredAtTheCapListedAndRedrivenToAClaim) {
  OpenDefault(/*max_deliveries=*/2);
  const std::string id = Create();
  for (int d = 1; d <= 2; ++d) {
    EXPECT_THAT(Claim(absl::Seconds(5)), ElementsAre(Field(&QueueMessage::deliveries, d)));
    Advance(absl::Seconds(5));
  }
  EXPECT_THAT(Claim(), IsEmpty()) << "the third delivery is dead-lettered";
  absl::StatusOr<std::vector<DeadLetter>> dl = backend_.transport->ListDeadLetters(0);
  ASSERT_OK(dl);
  ASSERT_THAT(*dl,
              ElementsAre(AllOf(Field(&DeadLetter::run_id, id), Field(&DeadLetter::deliveries, 2),
                                Field(&DeadLetter::reason, HasSubstr("the cap is 2")))));
  EXPECT_THAT((*dl)[0].message_id, ::testing::MatchesRegex("[0-9]+-[0-9]+"));
  // Out of the stream and its pending list, into the dead-letter stream.
  EXPECT_EQ(RedisCommand({"XLEN", Key("jobs")}).integer, 0);
  EXPECT_EQ(RedisCommand({"XLEN", Key("dead")}).integer, 1);
  EXPECT_THAT(backend_.transport->FindMessages({id}),
              IsOkAndHolds(AllOf(Field(&MessagePresence::pending, IsEmpty()),
                                 Field(&MessagePresence::dead_lettered, ElementsAre(id)))));

  ASSERT_OK(backend_.transport->Redrive((*dl)[0].id));
  EXPECT_THAT(backend_.transport->ListDeadLetters(0), IsOkAndHolds(IsEmpty()));
  std::vector<QueueMessage> m = Claim();
  ASSERT_THAT(
      m, ElementsAre(AllOf(Field(&QueueMessage::run_id, id), Field(&QueueMessage::deliveries, 1))));
  ASSERT_OK(backend_.store->AcquireLease(id, "w", absl::Seconds(30), {}).status());
  ASSERT_OK(backend_.transport->Ack(m[0]));
  EXPECT_THAT(backend_.transport->FindMessages({id}),
              IsOkAndHolds(AllOf(Field(&MessagePresence::pending, IsEmpty()),
                                 Field(&MessagePresence::dead_lettered, IsEmpty()))));
}

// Poison (issue 22.6, reference 002): a stream entry that names no run, or a
// run the database does not have, is dead-lettered at its first claim with
// the reason, never returned and never delivered again; the run beside them
// is claimed as usual.
TEST_F(RedisTransportTest, PoisonEntriesAreDeadLetteredAtOnceWithTheReason) {
  OpenDefault();
  const std::string good = Create();
  ASSERT_THAT(ClaimAtLeast(1), ElementsAre(Field(&QueueMessage::run_id, good)));
  EXPECT_EQ(RedisCommand({"XADD", Key("jobs"), "*", "junk", "1"}).type, RedisReply::Type::kString);
  EXPECT_EQ(RedisCommand({"XADD", Key("jobs"), "*", "run", "r_nobody"}).type,
            RedisReply::Type::kString);
  EXPECT_THAT(Claim(), IsEmpty()) << "poison is never returned";
  absl::StatusOr<std::vector<DeadLetter>> dl = backend_.transport->ListDeadLetters(0);
  ASSERT_OK(dl);
  EXPECT_THAT(*dl, UnorderedElementsAre(
                       AllOf(Field(&DeadLetter::run_id, ""), Field(&DeadLetter::deliveries, 1),
                             Field(&DeadLetter::reason, HasSubstr("no 'run' field"))),
                       AllOf(Field(&DeadLetter::run_id, "r_nobody"),
                             Field(&DeadLetter::reason, HasSubstr("does not have")))));
  EXPECT_EQ(RedisCommand({"XLEN", Key("jobs")}).integer, 1) << "only the good run's entry is left";
  EXPECT_EQ(RedisCommand({"XLEN", Key("dead")}).integer, 2);
  Advance(absl::Seconds(120));  // past every visibility deadline
  EXPECT_THAT(Claim(), ElementsAre(Field(&QueueMessage::run_id, good)));
  EXPECT_THAT(backend_.transport->ListDeadLetters(0), IsOkAndHolds(SizeIs(2)));
  // Redriving one is allowed and sends nothing: no run can take it.
  for (const DeadLetter& d : *dl) ASSERT_OK(backend_.transport->Redrive(d.id));
  EXPECT_THAT(Claim(), IsEmpty());
}

// A queued run whose stream entry was deleted (by hand, or trimmed): its
// index entry no longer counts, so the reconciler enqueues it again.
TEST_F(RedisTransportTest, AQueuedRunWhoseStreamEntryWasDeletedIsReconciled) {
  OpenDefault();
  const std::string id = Create();
  ASSERT_THAT(backend_.transport->FindMessages({id}),
              IsOkAndHolds(Field(&MessagePresence::pending, ElementsAre(id))));
  // Published by the relay thread: in the index, and the outbox row deleted.
  std::string entry;
  auto published = [&] {
    entry = RedisCommand({"HGET", Key("runs"), id}).str;
    return !entry.empty() && Sql("SELECT count(*) FROM runloom.queue") == "0";
  };
  for (const absl::Time give_up = RealClock()->Now() + kPatience;
       !published() && RealClock()->Now() < give_up;) {
    RealClock()->SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(published()) << "the relay never published";
  EXPECT_EQ(RedisCommand({"XDEL", Key("jobs"), entry}).integer, 1);
  EXPECT_THAT(backend_.transport->FindMessages({id}),
              IsOkAndHolds(Field(&MessagePresence::pending, IsEmpty())));
  ASSERT_OK(backend_.store->Enqueue(id, {}));  // what the reconciler does
  EXPECT_THAT(Claim(), ElementsAre(Field(&QueueMessage::run_id, id)));
}

// Redis restarted without persistence: the stream, its group and the index
// are gone. Nothing accounts for the queued runs any more, so the reconciler
// enqueues them again from the database, and the group comes back on NOGROUP.
TEST_F(RedisTransportTest, RestartWithoutPersistenceLosesOnlyMessages) {
  testing::OwnRedis own;
  ASSERT_OK(own.Start());
  OpenWith(own.url());
  std::vector<std::string> runs = {Create(), Create(), Create()};
  ASSERT_THAT(Claim(), SizeIs(3)) << "published and delivered once";
  Advance(absl::Minutes(2));
  EXPECT_THAT(backend_.transport->FindMessages(runs),
              IsOkAndHolds(Field(&MessagePresence::pending, SizeIs(3))));

  own.Kill();
  ASSERT_OK(own.Start());  // empty: no stream, no group
  absl::StatusOr<MessagePresence> p = backend_.transport->FindMessages(runs);
  ASSERT_OK(p);
  EXPECT_THAT(p->pending, IsEmpty());
  EXPECT_THAT(Claim(), IsEmpty()) << "the group is created again (NOGROUP), with nothing in it";
  for (const std::string& id : runs) ASSERT_OK(backend_.store->Enqueue(id, {}));  // reconciler
  std::vector<QueueMessage> again = ClaimAtLeast(3);
  std::vector<std::string> ids;
  for (const QueueMessage& m : again) ids.push_back(m.run_id);
  EXPECT_THAT(ids, UnorderedElementsAre(runs[0], runs[1], runs[2]));
  backend_ = Backend{};
}

// Redis down: the relay records why on each outbox row and moves on to the
// next (none blocks the others), logs it, and publishes them all once Redis
// is back.
TEST_F(RedisTransportTest, RelayThatCannotPublishRecordsWhyAndPublishesLater) {
  testing::OwnRedis own;
  ASSERT_OK(own.Start());
  OpenWith(own.url());
  own.Kill();
  const std::string a = Create();
  const std::string c = Create();
  const absl::Time give_up = RealClock()->Now() + kPatience;
  while (Sql("SELECT count(*) FROM runloom.queue WHERE last_error <> ''") != "2" &&
         RealClock()->Now() < give_up) {
    RealClock()->SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(Sql("SELECT count(*) FROM runloom.queue WHERE last_error <> ''"), "2")
      << "both rows were tried, each failure recorded";
  EXPECT_THAT(Sql("SELECT last_error FROM runloom.queue ORDER BY id LIMIT 1"),
              AllOf(HasSubstr(absl::StrCat("publishing run ", a)), HasSubstr("127.0.0.1")));
  EXPECT_THAT(backend_.transport->Claim("c", 10, absl::Seconds(5)),
              StatusIs(absl::StatusCode::kUnavailable));
  // The reconciler is told "cannot say", never "no message".
  EXPECT_THAT(backend_.transport->FindMessages({a, c}), StatusIs(absl::StatusCode::kUnavailable));

  ASSERT_OK(own.Start());
  std::vector<QueueMessage> m = ClaimAtLeast(2);
  ASSERT_THAT(m, ElementsAre(Field(&QueueMessage::run_id, a), Field(&QueueMessage::run_id, c)));
  EXPECT_EQ(Sql("SELECT count(*) FROM runloom.queue"), "0");
  backend_ = Backend{};
}

TEST_F(RedisTransportTest, OpenBackendRefusesABadQueueWritingNothing) {
  absl::StatusOr<int> closed = testing::ClosedLoopbackPort();
  ASSERT_OK(closed);
  EXPECT_THAT(
      Open(absl::StrCat("redis://127.0.0.1:", *closed)),
      StatusIs(absl::StatusCode::kUnavailable,
               AllOf(HasSubstr(absl::StrCat("127.0.0.1:", *closed)), HasSubstr("start Redis"))));
  EXPECT_THAT(Open("redis://127.0.0.1"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("queue URL")));
  EXPECT_EQ(Sql("SELECT to_regclass('runloom.meta') IS NULL"), "t") << "nothing written";

  const std::string sqlite =
      absl::StrCat(::testing::TempDir(), "/redis_transport_", getpid(), ".db");
  BackendOptions o;
  o.queue_url = redis_url_;
  EXPECT_THAT(OpenBackend(sqlite, o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs a PostgreSQL store")));
  EXPECT_NE(access(sqlite.c_str(), F_OK), 0) << "no SQLite file created";
}

}  // namespace
}  // namespace runloom::transport_internal
