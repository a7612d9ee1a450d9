// The parts of the adaptive cap one at a time: telemetry parsing, the fake
// provider's limits, the controller's limiters, executor slots and their
// fallback to the static cap when the controller stops.
#include "llm/concurrency_controller.h"

#include "llm/cap_board.h"
#include "llm/fake_provider.h"
#include "llm/llm_slots.h"
#include "llm/rate_limit.h"
#include "testing/capturing_logger.h"
#include "testing/fiber_host.h"
#include "testing/status_matchers.h"
#include "testing/step_test_util.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <thread>

namespace runloom {
namespace {

using ::runloom::steps_testing::TestStepContext;
using ::runloom::testing::CapturingLogger;
using ::runloom::testing::StatusIs;
using ::testing::HasSubstr;

TEST(RateLimitTelemetry, ReadsOpenAiHeadersAndIgnoresGarbage) {
  RateLimitTelemetry t = ParseRateLimitHeaders({{"Retry-After", " 2 "},
                                                {"X-RateLimit-Limit-Requests", "600"},
                                                {"x-ratelimit-remaining-requests", "-3"},
                                                {"content-type", "application/json"}});
  EXPECT_EQ(t.retry_after, absl::Seconds(2));
  EXPECT_EQ(t.limit_requests, 600);
  EXPECT_FALSE(t.remaining_requests.has_value());  // negative: ignored
  EXPECT_EQ(ParseRateLimitHeaders({{"retry-after", "250ms"}}).retry_after, absl::Milliseconds(250));
  EXPECT_TRUE(ParseRateLimitHeaders({{"retry-after", "Wed, 21 Oct 2015 07:28:00 GMT"},
                                     {"x-ratelimit-limit-requests", "1e99"},
                                     {"x-ratelimit-remaining-requests", std::string(100, '9')}})
                  .empty());
}

TEST(RateLimitTelemetry, TravelsOnAFailedStatus) {
  absl::Status s = absl::ResourceExhaustedError("429");
  AttachRateLimit(
      s, {.limit_requests = 60, .remaining_requests = 0, .retry_after = absl::Milliseconds(1500)});
  RateLimitTelemetry t = RateLimitOf(s);
  EXPECT_EQ(t.limit_requests, 60);
  EXPECT_EQ(t.remaining_requests, 0);
  EXPECT_EQ(t.retry_after, absl::Milliseconds(1500));
  EXPECT_TRUE(RateLimitOf(absl::UnavailableError("x")).empty());
  absl::Status ok;
  AttachRateLimit(ok, t);
  EXPECT_TRUE(ok.ok());
}

TEST(FakeProviderLimits, AnswersTooManyWith429AndHeaders) {
  auto fake = NewFakeLlmProvider({.latency = absl::Seconds(1), .hidden_limit = 2});
  LlmRequest req{.model = "fake", .prompt = "p"};
  EXPECT_OK(fake->Enter(req, 1).status);
  EXPECT_OK(fake->Enter(req, 1).status);
  FakeLlmProvider::Admission third = fake->Enter(req, 1);
  EXPECT_THAT(third.status, StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("429")));
  EXPECT_EQ(third.latency, absl::ZeroDuration());
  RateLimitTelemetry t = RateLimitOf(third.status);
  EXPECT_EQ(t.limit_requests, 120);  // 2 in flight at 1 s each: 120 per minute
  EXPECT_EQ(t.remaining_requests, 0);
  EXPECT_EQ(t.retry_after, absl::Seconds(1));
  fake->Leave();
  fake->Leave();
  fake->Leave();
  EXPECT_EQ(fake->in_flight(), 0);
  fake->SetHiddenLimit(0);
  for (int i = 0; i < 5; ++i) EXPECT_OK(fake->Enter(req, 1).status);
}

TEST(FakeProviderLimits, LatencyAndErrorsAreSeededPerRequest) {
  FakeProviderOptions o{.latency = absl::Milliseconds(100),
                        .latency_jitter = absl::Milliseconds(50),
                        .error_rate = 0.2,
                        .seed = 7};
  auto a = NewFakeLlmProvider(o);
  auto b = NewFakeLlmProvider(o);
  int errors = 0;
  for (int i = 0; i < 1000; ++i) {
    LlmRequest req{.model = "fake", .prompt = absl::StrCat("prompt ", i)};
    FakeLlmProvider::Admission x = a->Enter(req, 1);
    FakeLlmProvider::Admission y = b->Enter(req, 1);
    EXPECT_EQ(x.status.code(), y.status.code());
    EXPECT_EQ(x.latency, y.latency);
    EXPECT_GE(x.latency, absl::Milliseconds(100));
    EXPECT_LT(x.latency, absl::Milliseconds(150));
    if (absl::IsUnavailable(x.status)) ++errors;
  }
  EXPECT_GT(errors, 150);
  EXPECT_LT(errors, 250);
}

TEST(FakeProviderLimits, CompleteWaitsOnTheStepClockAndLeaves) {
  SimulatedClock clock;
  TestStepContext ctx(&clock);
  auto fake =
      NewFakeLlmProvider({.latency = absl::Seconds(2), .hidden_limit = 1, .advertise = true});
  std::optional<absl::StatusOr<LlmResponse>> got;
  std::thread t([&] { got = fake->Complete(ctx, LlmRequest{.model = "fake", .prompt = "hi"}); });
  ctx.AwaitSleeping();
  EXPECT_EQ(fake->in_flight(), 1);
  // A second call while the first is in flight: 429 at once, no waiting.
  EXPECT_THAT(fake->Complete(ctx, LlmRequest{.model = "fake", .prompt = "x"}),
              StatusIs(absl::StatusCode::kResourceExhausted));
  clock.Advance(absl::Seconds(2));
  t.join();
  ASSERT_OK(*got);
  EXPECT_EQ((*got)->rate_limit.limit_requests, 30);
  EXPECT_EQ(fake->in_flight(), 0);
}

TEST(FakeProviderLimits, OptionsFromConfig) {
  auto o = ParseFakeProviderOptions(nlohmann::json::parse(
      R"({"latency": "800ms", "latency_jitter": "400ms", "error_rate": 0.01,
          "hidden_limit": 20, "retry_after": "2s", "advertise": true, "seed": 42})"));
  ASSERT_OK(o);
  EXPECT_EQ(o->latency, absl::Milliseconds(800));
  EXPECT_EQ(o->latency_jitter, absl::Milliseconds(400));
  EXPECT_EQ(o->error_rate, 0.01);
  EXPECT_EQ(o->hidden_limit, 20);
  EXPECT_EQ(o->retry_after, absl::Seconds(2));
  EXPECT_TRUE(o->advertise);
  EXPECT_EQ(o->seed, 42u);
  for (const char* bad :
       {R"({"error_rate": 1.5})", R"({"hidden_limit": -1})", R"({"latency": 5})",
        R"({"seed": "x"})", R"({"advertise": 1})", R"({"hidden_limit": 2000000})", "[]"}) {
    EXPECT_THAT(ParseFakeProviderOptions(nlohmann::json::parse(bad)),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fake provider")))
        << bad;
  }
  EXPECT_THAT(ParseFakeProviderOptions(nlohmann::json::parse(R"({"limit": 3})")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("allowed: advertise")));
}

ControllerDeps Deps(Clock* clock, std::shared_ptr<CapBoard> board, Logger* log) {
  return ControllerDeps{.clock = clock, .logger = log, .board = board};
}

CallOutcome Ok(absl::Time started, bool waited) {
  return CallOutcome{.kind = CallOutcome::Kind::kOk,
                     .started = started,
                     .latency = absl::Seconds(1),
                     .waited = waited};
}

TEST(ConcurrencyController, AddsOnlyWhileCallsWaitAndCutsAtOnceOn429) {
  SimulatedClock clock;
  CapturingLogger log;
  std::shared_ptr<CapBoard> board = NewInProcessCapBoard(&clock);
  ConcurrencyController c("p", {.static_cap = 4}, Deps(&clock, board, &log));
  EXPECT_EQ(c.Tick().cap, 4);  // no demand: no increase
  c.Observe(Ok(clock.Now(), /*waited=*/true));
  EXPECT_EQ(c.Tick().cap, 5);
  EXPECT_EQ(**board->Read("p"), 5);
  clock.Advance(absl::Seconds(1));
  // A 429 without headers: halve at once, before any tick.
  c.Observe({.kind = CallOutcome::Kind::kRateLimited, .started = clock.Now()});
  EXPECT_EQ(**board->Read("p"), 2);
  EXPECT_EQ(log.Count(LogLevel::kInfo, "llm concurrency: provider p cap 5 -> 2 at once"), 1);
  // A second 429 from a call sent before the cut does not cut again.
  c.Observe({.kind = CallOutcome::Kind::kRateLimited, .started = clock.Now() - absl::Seconds(1)});
  EXPECT_EQ(**board->Read("p"), 2);
  // Within telemetry_ttl the 429's cap - 1 is a ceiling AIMD does not pass.
  for (int i = 0; i < 5; ++i) {
    c.Observe(Ok(clock.Now(), true));
    clock.Advance(absl::Seconds(1));
    EXPECT_LE(c.Tick().cap, 4);
  }
}

TEST(ConcurrencyController, ErrorsCutByAFactor) {
  SimulatedClock clock;
  std::shared_ptr<CapBoard> board = NewInProcessCapBoard(&clock);
  ConcurrencyController c("p", {.static_cap = 10}, Deps(&clock, board, NullLogger()));
  for (int i = 0; i < 5; ++i) {
    c.Observe({.kind = CallOutcome::Kind::kError, .started = clock.Now()});
  }
  EXPECT_EQ(c.Tick().cap, 8);  // 10 * 0.8
}

class FixedCpu final : public CpuLoad {
 public:
  explicit FixedCpu(double busy) : busy_(busy) {}
  std::optional<double> Busy() override { return busy_; }

 private:
  double busy_;
};

TEST(ConcurrencyController, TheLowestLimiterWins) {
  SimulatedClock clock;
  std::shared_ptr<CapBoard> board = NewInProcessCapBoard(&clock);
  FixedCpu cpu(0.99);
  int in_flight = 40;
  ControllerDeps deps = Deps(&clock, board, NullLogger());
  deps.cpu = &cpu;
  deps.in_flight = [&in_flight] { return in_flight; };
  ConcurrencyController c("p", {.static_cap = 100}, deps);
  CapLimits l = c.Tick();
  EXPECT_EQ(l.cpu, 36);  // 40 * 0.9 / 0.99
  EXPECT_EQ(l.cap, 36);
  EXPECT_EQ(l.aimd, 37);  // held within one step of the binding limiter
  EXPECT_TRUE(l.leader);
  EXPECT_EQ(l.in_flight, 40);
  in_flight = 10;
  EXPECT_EQ(c.Tick().cap, 9);
  // Telemetry: 600 per minute at 1 s per call is 10 in flight.
  FixedCpu idle(0.1);
  deps.cpu = &idle;
  ConcurrencyController t("q", {.static_cap = 100}, deps);
  t.Observe({.kind = CallOutcome::Kind::kOk,
             .started = clock.Now(),
             .latency = absl::Seconds(1),
             .telemetry = {.limit_requests = 600}});
  EXPECT_EQ(t.Tick().telemetry, 10);
  EXPECT_EQ(t.limits().cap, 10);
  clock.Advance(absl::Seconds(11));  // telemetry_ttl passed
  EXPECT_FALSE(t.Tick().telemetry.has_value());
}

// 002: "the pool limiter, not the provider, is the binding constraint in
// practice". It measures the store's pool: its size alone limits nothing;
// acquisitions that waited for a connection, or gave up, cut the cap from
// the calls in flight; ticks without pool pressure let it rise again.
TEST(ConcurrencyController, ThePoolLimiterFollowsMeasuredWaitsNotThePoolSize) {
  SimulatedClock clock;
  std::shared_ptr<CapBoard> board = NewInProcessCapBoard(&clock);
  int in_flight = 40;
  PoolUse pool{.size = 2, .acquires = 1000, .waited = 900};  // before the controller: not counted
  ControllerDeps deps = Deps(&clock, board, NullLogger());
  deps.in_flight = [&in_flight] { return in_flight; };
  deps.pool = [&pool] { return pool; };
  ConcurrencyController c("p", {.static_cap = 60}, deps);
  c.Tick();  // the first reading: the baseline
  pool.acquires += 100;
  pool.waited += 10;
  CapLimits l = c.Tick();
  EXPECT_FALSE(l.pool.has_value());  // 2 connections, 40 calls: nothing waited much
  EXPECT_EQ(l.cap, 60);
  // Most acquisitions waited for a connection: the pool binds at 0.95 times
  // the calls in flight.
  pool.acquires += 100;
  pool.waited += 90;
  pool.wait += absl::Seconds(3);
  l = c.Tick();
  EXPECT_EQ(l.pool, 38);
  EXPECT_EQ(l.cap, 38);
  // One acquisition gave up: cut again, from the limit in force.
  pool.acquires += 10;
  pool.exhausted += 1;
  EXPECT_EQ(c.Tick().pool, 36);
  // Calm: it rises by one a tick (and AIMD stays within a step of it).
  pool.acquires += 100;
  pool.waited += 10;
  l = c.Tick();
  EXPECT_EQ(l.pool, 37);
  EXPECT_EQ(l.cap, 37);
  EXPECT_EQ(l.aimd, 37);  // no demand: AIMD does not rise on its own
  // A pool reset (the counters went back): read as new, not as negative.
  pool = PoolUse{.size = 2, .acquires = 5};
  EXPECT_EQ(c.Tick().pool, 38);
}

// Two controllers (two processes in production) on one board make one cap:
// the lease holder decides from both processes' reports, the other only
// reports and follows; when the holder stops, the other takes over within
// the lease and starts from the cap in force, not from the static cap.
TEST(ConcurrencyController, TwoProcessesMakeOneCapAndTheSecondTakesOver) {
  SimulatedClock clock;
  CapturingLogger log;
  std::shared_ptr<CapBoard> board = NewInProcessCapBoard(&clock);
  ConcurrencyOptions o{.static_cap = 4, .lease = absl::Seconds(3)};
  ConcurrencyController a("p", o, {.clock = &clock, .logger = &log, .board = board, .id = "a"});
  ConcurrencyController b("p", o, {.clock = &clock, .logger = &log, .board = board, .id = "b"});
  EXPECT_TRUE(a.Tick().leader);
  EXPECT_FALSE(b.Tick().leader);
  EXPECT_EQ(log.Count(LogLevel::kInfo, "provider p: a decides the cap now"), 1);
  // Only B's calls wait for a slot: A grows the cap on B's report.
  for (int i = 1; i <= 5; ++i) {
    clock.Advance(absl::Seconds(1));
    b.Observe(Ok(clock.Now(), /*waited=*/true));
    CapLimits follower = b.Tick();
    EXPECT_FALSE(follower.leader);
    CapLimits leader = a.Tick();
    EXPECT_EQ(leader.cap, 4 + i);
    EXPECT_EQ(**board->Read("p"), 4 + i);
  }
  // B's own view is the published cap, and B cannot publish one.
  EXPECT_EQ(b.Tick().cap, 9);
  EXPECT_EQ(board->Publish("p", "b", 100, absl::Seconds(5)).value_or(true), false);
  EXPECT_EQ(**board->Read("p"), 9);
  // A 429 in B cuts the cap at once, for every process; A's next decision
  // starts from the cut, not from its own 9.
  clock.Advance(absl::Seconds(1));
  b.Observe({.kind = CallOutcome::Kind::kRateLimited, .started = clock.Now()});
  EXPECT_EQ(**board->Read("p"), 4);
  b.Tick();
  EXPECT_LE(a.Tick().cap, 4);
  // A stops ticking (its process died). Within the lease B still follows;
  // after it, B decides, from the cap in force.
  clock.Advance(absl::Seconds(2));
  EXPECT_FALSE(b.Tick().leader);
  clock.Advance(absl::Seconds(2));
  b.Observe(Ok(clock.Now(), /*waited=*/false));
  CapLimits took = b.Tick();
  EXPECT_TRUE(took.leader);
  EXPECT_EQ(took.cap, 4);
  EXPECT_EQ(log.Count(LogLevel::kInfo, "provider p: this process decides the cap now (b)"), 1);
  // A comes back: it follows B now.
  EXPECT_FALSE(a.Tick().leader);
  EXPECT_EQ(a.limits().cap, 4);
}

// Slots of provider "p" (static cap 6) following a started controller that
// publishes on an in-process board with a 5 s TTL.
struct ControlledSlots {
  ControlledSlots() {
    slots.Attach(board, controller);
    controller->Start();
  }
  SimulatedClock clock;
  CapturingLogger log;
  std::shared_ptr<CapBoard> board = NewInProcessCapBoard(&clock);
  ConcurrencyOptions o{.static_cap = 6, .ttl = absl::Seconds(5)};
  std::shared_ptr<ConcurrencyController> controller =
      std::make_shared<ConcurrencyController>("p", o, Deps(&clock, board, &log));
  LlmSlots slots{"p", o, &log};
};

TEST(LlmSlots, FallBackToTheStaticCapWhenTheControllerStops) {
  ControlledSlots c;
  SimulatedClock& clock = c.clock;
  CapturingLogger& log = c.log;
  LlmSlots& slots = c.slots;
  ConcurrencyController* controller = c.controller.get();
  // A 429 cuts the published cap to 3; executors follow it.
  {
    std::optional<LlmSlots::Slot> s = slots.TryAcquire(&clock);
    ASSERT_TRUE(s.has_value());
    s->Finish(CallOutcome::Kind::kRateLimited, {});
  }
  EXPECT_EQ(slots.Cap(&clock), 3);
  std::vector<LlmSlots::Slot> held;
  while (std::optional<LlmSlots::Slot> s = slots.TryAcquire(&clock)) held.push_back(std::move(*s));
  EXPECT_EQ(held.size(), 3u);

  controller->Stop();
  clock.Advance(absl::Seconds(4));  // the last publication is still fresh
  EXPECT_EQ(slots.Cap(&clock), 3);
  clock.Advance(absl::Seconds(2));  // past its TTL: nobody renewed it
  EXPECT_EQ(slots.Cap(&clock), 6);
  while (std::optional<LlmSlots::Slot> s = slots.TryAcquire(&clock)) held.push_back(std::move(*s));
  EXPECT_EQ(held.size(), 6u);
  EXPECT_EQ(log.Count(LogLevel::kWarning,
                      "provider p: no fresh cap on in-process; using the "
                      "static cap 6"),
            1);
  held.clear();
  EXPECT_EQ(slots.in_flight(), 0);
  // Started again, the controller publishes at once and executors follow.
  controller->Start();
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(slots.Cap(&clock), 3);
  EXPECT_EQ(log.Count(LogLevel::kInfo, "following the published cap again (3)"), 1);
  controller->Stop();
}

// A 429 the provider retries while the call keeps its slot cuts the cap at
// once (Slot::Report); a stop or a bad request says nothing about load.
TEST(LlmSlots, ARetriedAnswerReachesTheControllerWhileTheSlotIsHeld) {
  ControlledSlots c;
  std::optional<LlmSlots::Slot> s = c.slots.TryAcquire(&c.clock);
  ASSERT_TRUE(s.has_value());
  s->Report(absl::CancelledError("stopped"), {});
  s->Report(absl::InvalidArgumentError("bad request"), {});
  EXPECT_EQ(c.slots.Cap(&c.clock), 6);
  s->Report(absl::ResourceExhaustedError("HTTP 429"), {});
  EXPECT_EQ(c.slots.in_flight(), 1);
  EXPECT_EQ(c.slots.Cap(&c.clock), 3);
  s->Finish(absl::OkStatus(), {});
  EXPECT_EQ(c.slots.in_flight(), 0);
  c.controller->Stop();
}

TEST(LlmSlots, AcquireWaitsForARelease) {
  LlmSlots slots("p", {.static_cap = 1});
  TestStepContext ctx(RealClock());
  absl::StatusOr<LlmSlots::Slot> first = slots.Acquire(ctx);
  ASSERT_OK(first);
  std::atomic<bool> got{false};
  std::thread t([&] {
    absl::StatusOr<LlmSlots::Slot> second = slots.Acquire(ctx);
    EXPECT_OK(second);
    got = true;
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(got);
  first->Finish(CallOutcome::Kind::kOk, {});
  t.join();
  EXPECT_TRUE(got);
  EXPECT_EQ(slots.in_flight(), 0);
}

// On fibers (core/fiber.h) a caller that finds every slot taken suspends
// instead of blocking its thread: twelve fibers on ONE thread share a cap of
// 2. Were the waiters to block the thread, the holders (suspended in their
// sleeps on that same thread) could never release: the test would hang.
TEST(LlmSlots, FibersWaitingForASlotGiveTheirThreadBack) {
  LlmSlots slots("p", {.static_cap = 2});
  runloom::testing::FiberHost host;
  std::atomic<int> done{0};
  std::atomic<int> peak{0};
  for (int i = 0; i < 12; ++i) {
    host.Spawn([&] {
      TestStepContext ctx(RealClock());
      absl::StatusOr<LlmSlots::Slot> slot = slots.Acquire(ctx);
      if (!slot.ok()) return;
      peak = std::max(peak.load(), slots.in_flight());
      RealClock()->SleepFor(absl::Milliseconds(20));  // suspends, holding the slot
      slot->Finish(CallOutcome::Kind::kOk, {});
      ++done;
    });
  }
  host.Run(1);
  EXPECT_EQ(done.load(), 12);
  EXPECT_EQ(peak.load(), 2);
  EXPECT_EQ(slots.in_flight(), 0);
}

TEST(LlmSlots, AcquireEndsOnStopAndAtTheDeadline) {
  LlmSlots slots("p", {.static_cap = 1, .refresh = absl::Milliseconds(10)});
  TestStepContext ctx(RealClock());
  absl::StatusOr<LlmSlots::Slot> held = slots.Acquire(ctx);
  ASSERT_OK(held);
  TestStepContext late(RealClock());
  late.set_deadline(RealClock()->Now() + absl::Milliseconds(30));
  EXPECT_THAT(slots.Acquire(late),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("concurrency cap 1")));
  TestStepContext stopped(RealClock());
  stopped.Stop();
  EXPECT_THAT(slots.Acquire(stopped), StatusIs(absl::StatusCode::kCancelled));
}

}  // namespace
}  // namespace runloom
