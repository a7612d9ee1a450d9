#include "runloom/event_bus.h"

#include "runloom/clock.h"

#include "runloom/mutex.h"
#include "runloom/mutex.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace runloom {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

RunChange Change(const std::string& run, RunStatus status, int64_t seq) {
  return RunChange{run, status, seq};
}

TEST(EventBusTest, DeliversToTheRunAndToAllRuns) {
  std::unique_ptr<EventBus> bus = NewInProcessEventBus();
  std::vector<std::string> a_seen, all_seen;
  auto a = bus->Subscribe("a", [&](const RunChange& c) { a_seen.push_back(c.run_id); });
  auto all = bus->Subscribe("", [&](const RunChange& c) { all_seen.push_back(c.run_id); });
  bus->Publish({Change("a", RunStatus::kRunning, 2), Change("b", RunStatus::kQueued, 1)});
  EXPECT_THAT(a_seen, ElementsAre("a"));
  EXPECT_THAT(all_seen, ElementsAre("a", "b"));
}

TEST(EventBusTest, CarriesStatusAndSeq) {
  std::unique_ptr<EventBus> bus = NewInProcessEventBus();
  RunChange got;
  auto sub = bus->Subscribe("a", [&](const RunChange& c) { got = c; });
  bus->Publish({Change("a", RunStatus::kPaused, 7)});
  EXPECT_EQ(got.run_id, "a");
  EXPECT_EQ(got.status, RunStatus::kPaused);
  EXPECT_EQ(got.last_event_seq, 7);
}

TEST(EventBusTest, NothingAfterUnsubscribe) {
  std::unique_ptr<EventBus> bus = NewInProcessEventBus();
  int calls = 0;
  auto sub = bus->Subscribe("a", [&](const RunChange&) { ++calls; });
  bus->Publish({Change("a", RunStatus::kRunning, 1)});
  sub.reset();
  bus->Publish({Change("a", RunStatus::kRunning, 2)});
  EXPECT_EQ(calls, 1);
}

TEST(EventBusTest, HasSubscribersAndInterest) {
  std::unique_ptr<EventBus> bus = NewInProcessEventBus();
  EXPECT_FALSE(bus->HasSubscribers());
  EXPECT_FALSE(bus->CurrentInterest().all_runs);
  EXPECT_THAT(bus->CurrentInterest().run_ids, IsEmpty());
  auto b = bus->Subscribe("b", [](const RunChange&) {});
  auto a1 = bus->Subscribe("a", [](const RunChange&) {});
  auto a2 = bus->Subscribe("a", [](const RunChange&) {});
  EXPECT_TRUE(bus->HasSubscribers());
  EXPECT_THAT(bus->CurrentInterest().run_ids, ElementsAre("a", "b"));
  EXPECT_FALSE(bus->CurrentInterest().all_runs);
  {
    auto all = bus->Subscribe("", [](const RunChange&) {});
    EXPECT_TRUE(bus->CurrentInterest().all_runs);
  }
  EXPECT_FALSE(bus->CurrentInterest().all_runs);
  a1.reset();
  EXPECT_THAT(bus->CurrentInterest().run_ids, ElementsAre("a", "b"));
  a2.reset();
  b.reset();
  EXPECT_THAT(bus->CurrentInterest().run_ids, IsEmpty());
  EXPECT_FALSE(bus->HasSubscribers());
}

TEST(EventBusTest, PublishWithoutSubscribersIsANoOp) {
  std::unique_ptr<EventBus> bus = NewInProcessEventBus();
  bus->Publish({});
  bus->Publish({Change("a", RunStatus::kRunning, 1)});
  SUCCEED();
}

// Destroying a subscription waits for its running callback to return, so
// the callback's captures may die right after.
TEST(EventBusTest, UnsubscribeWaitsForARunningCallback) {
  std::unique_ptr<EventBus> bus = NewInProcessEventBus();
  runloom::Notification entered, release;
  std::atomic<bool> returned{false};
  auto sub = bus->Subscribe("a", [&](const RunChange&) {
    entered.Notify();
    release.WaitForNotification();
    returned = true;
  });
  std::thread publisher([&] { bus->Publish({Change("a", RunStatus::kRunning, 1)}); });
  entered.WaitForNotification();
  std::atomic<bool> destroyed{false};
  std::thread unsubscriber([&] {
    sub.reset();
    destroyed = true;
  });
  RealClock()->SleepFor(absl::Milliseconds(20));
  EXPECT_FALSE(destroyed.load());  // still inside the callback
  release.Notify();
  unsubscriber.join();
  publisher.join();
  EXPECT_TRUE(returned.load());
  EXPECT_TRUE(destroyed.load());
}

// Subscriptions come and go while publishers run; a callback never runs
// after its subscription is gone (its captures are destroyed with it), and
// callbacks of one subscription never overlap.
TEST(EventBusTest, SubscribeAndUnsubscribeRacingPublish) {
  std::unique_ptr<EventBus> bus = NewInProcessEventBus();
  constexpr int kPublishers = 3;
  constexpr int kChurners = 3;
  constexpr int kRounds = 2000;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> delivered{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < kPublishers; ++p) {
    threads.emplace_back([&, p] {
      int64_t seq = 0;
      while (!stop.load()) {
        bus->Publish({Change(p % 2 == 0 ? "a" : "b", RunStatus::kRunning, ++seq)});
        std::this_thread::yield();  // leave the churners some of the machine's cores
      }
    });
  }
  std::atomic<int> violations{0};
  for (int c = 0; c < kChurners; ++c) {
    threads.emplace_back([&, c] {
      for (int i = 0; i < kRounds; ++i) {
        // Owned by this iteration: the callback touches it, and it dies
        // right after the subscription.
        auto alive = std::make_unique<std::atomic<int>>(1);
        std::atomic<int> in_callback{0};
        auto sub =
            bus->Subscribe((c + i) % 3 == 0 ? "" : (i % 2 == 0 ? "a" : "b"), [&](const RunChange&) {
              if (in_callback.fetch_add(1) != 0) ++violations;
              if (alive->load() != 1) ++violations;
              delivered.fetch_add(1);
              in_callback.fetch_sub(1);
            });
        std::this_thread::yield();
        sub.reset();
        alive->store(0);
        alive.reset();
      }
    });
  }
  for (int i = kPublishers; i < kPublishers + kChurners; ++i) threads[i].join();
  stop = true;
  for (int i = 0; i < kPublishers; ++i) threads[i].join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_FALSE(bus->HasSubscribers());
  EXPECT_GT(delivered.load(), 0);
}

}  // namespace
}  // namespace runloom
