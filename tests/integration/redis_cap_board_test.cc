// The LLM concurrency cap on a real Redis (the test servers): publication
// with a TTL the server expires, executors following it and falling back to
// the static cap when the controller stops, and an unreachable Redis; the
// calls in flight counted across processes (two boards and two LlmSlots
// stand for two worker processes): the cap bounds their sum, a dead
// holder's slot expires, a live one's is renewed, a Redis that is down
// leaves each process counting its own, and a wait ends on stop/deadline.
#include "llm/redis_cap_board.h"

#include "llm/concurrency_controller.h"
#include "llm/llm_slots.h"
#include "testing/capturing_logger.h"
#include "testing/status_matchers.h"
#include "testing/test_servers.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "redis/redis_client.h"

#include <algorithm>
#include <atomic>
#include <set>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

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
  // Only the lease holder publishes.
  EXPECT_EQ(board->Lead("openai", "me", absl::Seconds(5)).value_or(""), "me");
  EXPECT_EQ(board->Lead("openai", "other", absl::Seconds(5)).value_or(""), "me");
  EXPECT_EQ(board->Publish("openai", "other", 99, absl::Milliseconds(300)).value_or(true), false);
  EXPECT_EQ(board->Read("openai").value_or(7), std::nullopt);
  EXPECT_EQ(board->Publish("openai", "me", 12, absl::Milliseconds(300)).value_or(false), true);
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
  EXPECT_THAT(board->Publish("p", "x", 3, absl::Seconds(1)),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(board->Lead("p", "x", absl::Seconds(1)), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(board->Report("p", SenseReport{.reporter = "x"}),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(board->Read("p"), StatusIs(absl::StatusCode::kUnavailable));
  LlmSlots slots("p", {.static_cap = 4}, &log);
  slots.Attach(board, nullptr);
  EXPECT_EQ(slots.Cap(RealClock()), 4);
  EXPECT_EQ(log.Count(LogLevel::kWarning, "using the static cap 4"), 1);
}

// Sense and Decide meet in Redis (002): reports travel on a stream, the
// lease names one decider, a cut at a 429 only lowers, and a report that
// does not decode is skipped, not trusted.
TEST(RedisCapBoard, ReportsTravelOnAStreamAndOnlyTheLeaseHolderPublishes) {
  const std::string prefix = Prefix("sense");
  std::shared_ptr<CapBoard> a = NewRedisCapBoard(TestRedis(), prefix);
  std::shared_ptr<CapBoard> b = NewRedisCapBoard(TestRedis(), prefix);
  std::string cursor;
  ASSERT_OK(a->ReadReports("p", &cursor));
  SenseReport sent{.reporter = "host:1:0",
                   .ok = 7,
                   .rate_limited = 1,
                   .errors = 2,
                   .waited = true,
                   .latency_sum = absl::Milliseconds(7300),
                   .limit_requests = 600,
                   .cut = 5,
                   .cut_from = 10,
                   .in_flight = 9,
                   .pool_size = 8,
                   .pool_acquires = 100,
                   .pool_waited = 60,
                   .pool_exhausted = 1,
                   .pool_wait = absl::Milliseconds(2500),
                   .cpu_busy = 0.25};
  ASSERT_OK(b->Report("p", sent));
  RedisClient raw(TestRedis(), {});
  ASSERT_OK(raw.Command({"XADD", prefix + ":llm_sense:p", "*", "reporter", "x", "ok", "-5"}));
  ASSERT_OK(b->Report("p", SenseReport{.reporter = "host:2:0", .ok = 1}));
  int malformed = 0;
  absl::StatusOr<std::vector<SenseReport>> got = a->ReadReports("p", &cursor, &malformed);
  ASSERT_OK(got);
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ(malformed, 1);
  const SenseReport& r = (*got)[0];
  EXPECT_EQ(r.reporter, "host:1:0");
  EXPECT_EQ(r.ok, 7);
  EXPECT_EQ(r.rate_limited, 1);
  EXPECT_EQ(r.errors, 2);
  EXPECT_TRUE(r.waited);
  EXPECT_EQ(r.latency_sum, absl::Milliseconds(7300));
  EXPECT_EQ(r.limit_requests, 600);
  EXPECT_EQ(r.cut, 5);
  EXPECT_EQ(r.cut_from, 10);
  EXPECT_EQ(r.in_flight, 9);
  EXPECT_EQ(r.pool_size, 8);
  EXPECT_EQ(r.pool_acquires, 100);
  EXPECT_EQ(r.pool_waited, 60);
  EXPECT_EQ(r.pool_exhausted, 1);
  EXPECT_EQ(r.pool_wait, absl::Milliseconds(2500));
  EXPECT_EQ(r.cpu_busy, 0.25);
  EXPECT_EQ((*got)[1].reporter, "host:2:0");
  // Read from the cursor: nothing new.
  EXPECT_EQ(a->ReadReports("p", &cursor).value_or(std::vector<SenseReport>(1)).size(), 0u);

  // The lease: one holder until it expires on the server.
  EXPECT_EQ(a->Lead("p", "a", absl::Milliseconds(300)).value_or(""), "a");
  EXPECT_EQ(b->Lead("p", "b", absl::Milliseconds(300)).value_or(""), "a");
  EXPECT_EQ(b->Publish("p", "b", 50, absl::Seconds(5)).value_or(true), false);
  EXPECT_EQ(a->Publish("p", "a", 20, absl::Seconds(5)).value_or(false), true);
  // A cut lowers, never raises.
  ASSERT_OK(b->Cut("p", 30, absl::Seconds(5)));
  EXPECT_EQ(a->Read("p").value_or(std::nullopt), 20);
  ASSERT_OK(b->Cut("p", 10, absl::Seconds(5)));
  EXPECT_EQ(a->Read("p").value_or(std::nullopt), 10);
  absl::SleepFor(absl::Milliseconds(400));
  EXPECT_EQ(b->Lead("p", "b", absl::Seconds(5)).value_or(""), "b");
  EXPECT_EQ(a->Publish("p", "a", 40, absl::Seconds(5)).value_or(true), false);
  absl::StatusOr<RedisReply> holder = raw.Command({"GET", prefix + ":llm_controller:p"});
  ASSERT_OK(holder);
  EXPECT_EQ(holder->str, "b");
  absl::StatusOr<RedisReply> ttl = raw.Command({"PTTL", prefix + ":llm_sense:p"});
  ASSERT_OK(ttl);
  EXPECT_GT(ttl->integer, 0);  // the stream goes when the deployment does
}

// Two adapting processes (a fork: two address spaces, two connections, two
// controllers) make one cap, not two: only the child's calls wait for a
// slot, the parent sees no demand of its own. With a controller per process
// each publishing its own view, the key would jump between the parent's
// static cap and the child's growing one; with one decider fed by both
// processes' reports it only grows.
TEST(RedisCapBoard, TwoAdaptingProcessesMakeOneCap) {
  const std::string prefix = Prefix("one_cap");
  const ConcurrencyOptions o{.static_cap = 4,
                             .max_cap = 1000,
                             .tick = absl::Milliseconds(50),
                             .ttl = absl::Seconds(2),
                             .lease = absl::Milliseconds(600)};
  constexpr absl::Duration kRun = absl::Milliseconds(2500);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child: its calls keep finding every slot taken.
    std::shared_ptr<CapBoard> board = NewRedisCapBoard(TestRedis(), prefix);
    ConcurrencyController c(
        "fake", o, {.clock = RealClock(), .logger = NullLogger(), .board = board, .id = "child"});
    c.Start();
    const absl::Time end = absl::Now() + kRun;
    while (absl::Now() < end) {
      c.Observe({.kind = CallOutcome::Kind::kOk,
                 .started = absl::Now(),
                 .latency = absl::Milliseconds(100),
                 .waited = true});
      absl::SleepFor(absl::Milliseconds(5));
    }
    c.Stop();
    _exit(0);
  }
  std::shared_ptr<CapBoard> board = NewRedisCapBoard(TestRedis(), prefix);
  ConcurrencyController parent(
      "fake", o, {.clock = RealClock(), .logger = NullLogger(), .board = board, .id = "parent"});
  parent.Start();
  std::vector<int> seen;
  const absl::Time end = absl::Now() + kRun;
  while (absl::Now() < end) {
    absl::StatusOr<std::optional<int>> cap = board->Read("fake");
    if (cap.ok() && cap->has_value()) seen.push_back(**cap);
    absl::SleepFor(absl::Milliseconds(5));
  }
  parent.Stop();
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;

  ASSERT_GT(seen.size(), 50u);
  int drops = 0;
  for (size_t i = 1; i < seen.size(); ++i) drops += seen[i] < seen[i - 1] ? 1 : 0;
  EXPECT_EQ(drops, 0) << "the cap went down " << drops << " times: two deciders";
  EXPECT_GT(seen.back(), o.static_cap + 10) << "the child's demand did not reach the decider";
  // Both processes reported; one holds the lease.
  RedisClient raw(TestRedis(), {});
  absl::StatusOr<RedisReply> entries =
      raw.Command({"XRANGE", prefix + ":llm_sense:fake", "-", "+"});
  ASSERT_OK(entries);
  std::set<std::string> reporters;
  for (const RedisReply& e : entries->elements) {
    for (size_t i = 0; i + 1 < e.elements[1].elements.size(); i += 2) {
      if (e.elements[1].elements[i].str == "reporter") {
        reporters.insert(e.elements[1].elements[i + 1].str);
      }
    }
  }
  EXPECT_EQ(reporters, (std::set<std::string>{"child", "parent"}));
}

// A step context for LlmSlots::Acquire on the real clock, stopped by Stop().
class WaitContext final : public StepContext {
 public:
  explicit WaitContext(absl::Time deadline = absl::InfiniteFuture()) : deadline_(deadline) {}
  const std::string& run_id() const override { return none_; }
  const std::string& step_path() const override { return none_; }
  int attempt() const override { return 1; }
  const std::string& working_dir() const override { return none_; }
  Clock* clock() override { return RealClock(); }
  absl::Time deadline() const override { return deadline_; }
  bool Stopping() override { return stopped_; }
  bool SleepUntil(absl::Time until) override {
    RealClock()->SleepUntil(until);
    return !stopped_;
  }
  void OnStop(std::function<void()>) override {}
  void RecordEvent(Event) override {}
  void Stop() { stopped_ = true; }

 private:
  const std::string none_;
  const absl::Time deadline_;
  std::atomic<bool> stopped_{false};
};

int64_t SlotsHeld(const std::string& prefix, const std::string& provider) {
  RedisClient raw(TestRedis(), {});
  absl::StatusOr<RedisReply> n = raw.Command({"ZCARD", prefix + ":llm_slots:" + provider});
  EXPECT_OK(n);
  return n.ok() ? n->integer : -1;
}

// Two worker processes on one Redis: each its own board (connection) and
// slots for provider "p", following no controller (the static cap).
struct TwoWorkers {
  TwoWorkers(const std::string& prefix, int cap, absl::Duration slot_ttl_a = absl::Seconds(15))
      : board_a(NewRedisCapBoard(TestRedis(), prefix, {}, {.slot_ttl = slot_ttl_a})),
        board_b(NewRedisCapBoard(TestRedis(), prefix)),
        a("p", {.static_cap = cap, .refresh = absl::Milliseconds(20)}, &log),
        b("p", {.static_cap = cap, .refresh = absl::Milliseconds(20)}, &log) {
    a.Attach(board_a, nullptr);
    b.Attach(board_b, nullptr);
  }
  testing::CapturingLogger log;
  std::shared_ptr<CapBoard> board_a;
  std::shared_ptr<CapBoard> board_b;
  LlmSlots a;
  LlmSlots b;
};

TEST(RedisLlmSlots, TwoProcessesNeverHoldMoreThanTheCapTogether) {
  const std::string prefix = Prefix("global");
  constexpr int kCap = 3;
  TwoWorkers w(prefix, kCap);
  LlmSlots& a = w.a;
  LlmSlots& b = w.b;
  ASSERT_TRUE(w.board_a->CountsSlots());

  // Deterministic: A holds every slot, so B (with none of its own) has none.
  {
    std::vector<LlmSlots::Slot> held;
    for (int i = 0; i < kCap; ++i) {
      std::optional<LlmSlots::Slot> s = a.TryAcquire(RealClock());
      ASSERT_TRUE(s.has_value()) << i;
      held.push_back(*std::move(s));
    }
    EXPECT_EQ(SlotsHeld(prefix, "p"), kCap);
    EXPECT_EQ(b.in_flight(), 0);
    EXPECT_FALSE(b.TryAcquire(RealClock()).has_value());
    held.back().Finish(CallOutcome::Kind::kOk, {});
    std::optional<LlmSlots::Slot> s = b.TryAcquire(RealClock());
    EXPECT_TRUE(s.has_value());
    EXPECT_FALSE(a.TryAcquire(RealClock()).has_value());
  }
  EXPECT_EQ(SlotsHeld(prefix, "p"), 0);

  // Many threads in both processes: never more than kCap calls together.
  constexpr int kThreadsEach = 4;
  constexpr int kCallsEach = 25;
  std::atomic<int> in_call{0};
  std::atomic<int> max_in_call{0};
  std::atomic<int> calls{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2 * kThreadsEach; ++t) {
    LlmSlots* slots = t % 2 == 0 ? &a : &b;
    threads.emplace_back([&, slots] {
      WaitContext ctx(RealClock()->Now() + absl::Seconds(60));
      for (int i = 0; i < kCallsEach; ++i) {
        absl::StatusOr<LlmSlots::Slot> s = slots->Acquire(ctx);
        ASSERT_OK(s);
        const int now = in_call.fetch_add(1) + 1;
        int seen = max_in_call.load();
        while (now > seen && !max_in_call.compare_exchange_weak(seen, now)) {
        }
        absl::SleepFor(absl::Milliseconds(1));
        in_call.fetch_sub(1);
        s->Finish(CallOutcome::Kind::kOk, {});
        calls.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(calls.load(), 2 * kThreadsEach * kCallsEach);
  EXPECT_LE(max_in_call.load(), kCap);
  EXPECT_GE(max_in_call.load(), 1);
  EXPECT_EQ(SlotsHeld(prefix, "p"), 0);
  EXPECT_EQ(a.in_flight() + b.in_flight(), 0);
  EXPECT_EQ(w.log.Count(LogLevel::kWarning, "cannot count calls in flight"), 0);
}

TEST(RedisLlmSlots, ADeadHoldersSlotExpiresAndALiveOneIsRenewed) {
  constexpr absl::Duration kTtl = absl::Milliseconds(900);
  // A live holder: its board renews the slot every kTtl / 3, so it outlasts
  // several TTLs and B waits.
  TwoWorkers w(Prefix("expiry"), 1, kTtl);
  LlmSlots& a = w.a;
  LlmSlots& b = w.b;
  {
    std::optional<LlmSlots::Slot> held = a.TryAcquire(RealClock());
    ASSERT_TRUE(held.has_value());
    absl::SleepFor(kTtl * 2 + absl::Milliseconds(300));
    EXPECT_FALSE(b.TryAcquire(RealClock()).has_value());
  }
  EXPECT_TRUE(b.TryAcquire(RealClock()).has_value());

  // A dead holder: its process (board) is gone without returning the slot.
  absl::StatusOr<std::optional<std::string>> taken = w.board_a->TakeSlot("p", 1);
  ASSERT_OK(taken);
  ASSERT_TRUE(taken->has_value());
  const absl::Time taken_at = RealClock()->Now();
  a.Detach();
  w.board_a.reset();  // stops renewing, as a crash would
  EXPECT_FALSE(b.TryAcquire(RealClock()).has_value());
  WaitContext ctx(RealClock()->Now() + absl::Seconds(30));
  absl::StatusOr<LlmSlots::Slot> s = b.Acquire(ctx);
  ASSERT_OK(s);
  // Freed by the TTL, not before it (Redis' clock; a little slack).
  EXPECT_GE(RealClock()->Now() - taken_at, kTtl - absl::Milliseconds(100));
}

TEST(RedisLlmSlots, RedisDownLeavesEachProcessCountingItsOwnCalls) {
  RedisUrl closed{.host = "127.0.0.1", .port = 1};
  testing::CapturingLogger log;
  std::shared_ptr<CapBoard> board =
      NewRedisCapBoard(closed, Prefix("down2"), {.connect_timeout = absl::Milliseconds(100)});
  EXPECT_THAT(board->TakeSlot("p", 2), StatusIs(absl::StatusCode::kUnavailable));
  LlmSlots slots("p", {.static_cap = 2}, &log);
  slots.Attach(board, nullptr);
  WaitContext ctx(RealClock()->Now() + absl::Seconds(30));
  absl::StatusOr<LlmSlots::Slot> first = slots.Acquire(ctx);
  ASSERT_OK(first);
  std::optional<LlmSlots::Slot> second = slots.TryAcquire(RealClock());
  ASSERT_TRUE(second.has_value());
  EXPECT_FALSE(slots.TryAcquire(RealClock()).has_value());  // the static cap, counted here
  EXPECT_EQ(slots.in_flight(), 2);
  second->Finish(CallOutcome::Kind::kOk, {});
  EXPECT_TRUE(slots.TryAcquire(RealClock()).has_value());
  EXPECT_EQ(log.Count(LogLevel::kWarning, "cannot count calls in flight on redis 127.0.0.1:1"), 1);
}

TEST(RedisLlmSlots, AWaitForASlotEndsOnStopAndOnTheDeadline) {
  const std::string prefix = Prefix("wait");
  TwoWorkers w(prefix, 1);
  LlmSlots& b = w.b;
  std::optional<LlmSlots::Slot> held = w.a.TryAcquire(RealClock());
  ASSERT_TRUE(held.has_value());

  WaitContext late(RealClock()->Now() + absl::Milliseconds(200));
  EXPECT_THAT(b.Acquire(late), StatusIs(absl::StatusCode::kDeadlineExceeded));

  WaitContext stopped;
  std::thread stopper([&] {
    absl::SleepFor(absl::Milliseconds(100));
    stopped.Stop();
  });
  EXPECT_THAT(b.Acquire(stopped), StatusIs(absl::StatusCode::kCancelled));
  stopper.join();
  EXPECT_EQ(b.in_flight(), 0);
  EXPECT_EQ(SlotsHeld(prefix, "p"), 1);  // only A's
}

}  // namespace
}  // namespace runloom::redis
