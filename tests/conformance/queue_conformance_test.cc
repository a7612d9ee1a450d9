// Transport conformance (claim, visibility, redelivery, ack, dead letters
// and redrive, the reconciler's question, publish, waiting) and concurrency
// of the store, for every backend.
#include "runloom/mutex.h"
#include "conformance_fixture.h"

#include <algorithm>
#include <set>
#include <thread>

namespace runloom::conformance {
namespace {

using ::runloom::testing::IsOkAndHolds;
using ::runloom::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;
using ::testing::UnorderedElementsAre;

// Real time a test waits for a thread that should finish at once.
constexpr absl::Duration kWatchdog = absl::Seconds(10);

class QueueConformanceTest : public ConformanceTest {
 protected:
  // Advances the simulated clock in small steps until `done` or the watchdog.
  bool AdvanceUntil(runloom::Notification& done, absl::Duration step) {
    for (int i = 0; i < 2000; ++i) {
      if (done.WaitForNotificationWithTimeout(absl::Milliseconds(2))) return true;
      Advance(step);
    }
    return done.HasBeenNotified();
  }

  // Reopens the transport with a delivery cap of `cap`, creates `runs` runs
  // and delivers each of them `cap` times (5 s visibility each), so the next
  // claim dead-letters them all. Returns the run ids in creation order.
  std::vector<std::string> CreateAndExhaust(int cap, int runs) {
    transport_options_.max_deliveries = cap;
    Reopen();
    std::vector<std::string> ids;
    for (int i = 0; i < runs; ++i) ids.push_back(Create());
    for (int d = 0; d < cap; ++d) {
      EXPECT_THAT(ClaimAll("c", absl::Seconds(5)), SizeIs(runs)) << "delivery " << d + 1;
      Advance(absl::Seconds(5));
    }
    return ids;
  }
};

TEST_P(QueueConformanceTest, ClaimHidesRedeliversAndAcks) {
  std::string a = Create();
  std::string b = Create();
  std::string c = Create();
  absl::StatusOr<std::vector<QueueMessage>> first = transport_->Claim("c1", 2, absl::Seconds(10));
  ASSERT_OK(first);
  ASSERT_THAT(*first,
              ElementsAre(Field(&QueueMessage::run_id, a), Field(&QueueMessage::run_id, b)));
  EXPECT_EQ((*first)[0].deliveries, 1);
  EXPECT_NE((*first)[0].id, (*first)[1].id);
  EXPECT_THAT(transport_->Claim("c2", 10, absl::Seconds(10)),
              IsOkAndHolds(ElementsAre(Field(&QueueMessage::run_id, c))));
  EXPECT_THAT(transport_->Claim("c2", 10, absl::Seconds(10)), IsOkAndHolds(IsEmpty()));
  Advance(absl::Seconds(9));
  EXPECT_THAT(transport_->Claim("c2", 10, absl::Seconds(10)), IsOkAndHolds(IsEmpty()));

  Advance(absl::Seconds(1));  // visibility over: every message comes back
  absl::StatusOr<std::vector<QueueMessage>> again = transport_->Claim("c3", 10, absl::Seconds(10));
  ASSERT_OK(again);
  ASSERT_THAT(*again, SizeIs(3));
  EXPECT_EQ((*again)[0].id, (*first)[0].id);
  EXPECT_EQ((*again)[0].deliveries, 2);
  ASSERT_OK(transport_->Ack((*again)[0]));
  ASSERT_OK(transport_->Ack((*again)[0]));  // twice is fine
  ASSERT_OK(transport_->Ack((*first)[1]));  // an ack by an earlier claimer also removes it
  Advance(absl::Seconds(10));
  EXPECT_THAT(transport_->Claim("c3", 10, absl::Seconds(10)),
              IsOkAndHolds(ElementsAre(Field(&QueueMessage::run_id, c))));

  EXPECT_THAT(transport_->Ack(QueueMessage{"not-an-id", a, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(transport_->Claim("", 1, absl::Seconds(1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(transport_->Claim("c", 0, absl::Seconds(1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(transport_->Claim("c", 1, absl::ZeroDuration()),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// Release promises only "visible again soon": at once on SQLite, at worst
// after the visibility timeout on a stream.
TEST_P(QueueConformanceTest, ReleaseMakesAClaimedMessageVisibleAgainSoon) {
  std::string a = Create();
  absl::StatusOr<std::vector<QueueMessage>> first = transport_->Claim("c1", 1, absl::Seconds(60));
  ASSERT_OK(first);
  ASSERT_THAT(*first, SizeIs(1));
  EXPECT_THAT(transport_->Claim("c2", 1, absl::Seconds(60)), IsOkAndHolds(IsEmpty()));
  ASSERT_OK(transport_->Release((*first)[0]));
  absl::StatusOr<std::vector<QueueMessage>> again = transport_->Claim("c2", 1, absl::Seconds(60));
  ASSERT_OK(again);
  if (again->empty()) {
    Advance(absl::Seconds(60));
    again = transport_->Claim("c2", 1, absl::Seconds(60));
    ASSERT_OK(again);
  }
  ASSERT_THAT(*again, SizeIs(1));
  EXPECT_EQ((*again)[0].run_id, a);
  EXPECT_LE((*again)[0].deliveries, 2);
  ASSERT_OK(transport_->Ack((*again)[0]));
  ASSERT_OK(transport_->Release((*again)[0]));  // gone: fine, and it stays gone
  Advance(absl::Seconds(60));
  EXPECT_THAT(transport_->Claim("c3", 1, absl::Seconds(60)), IsOkAndHolds(IsEmpty()));
}

TEST_P(QueueConformanceTest, DeadLettersAfterTooManyDeliveries) {
  std::string id = Create();
  std::string other = Create();
  ASSERT_OK(transport_->Ack(ClaimAll()[1]));  // only `id` keeps a message
  Advance(absl::Seconds(61));
  int deliveries = 1;
  for (; deliveries < 10; ++deliveries) {
    std::vector<QueueMessage> m = ClaimAll("c", absl::Seconds(5));
    ASSERT_THAT(m, SizeIs(1));
    EXPECT_EQ(m[0].deliveries, deliveries + 1);
    Advance(absl::Seconds(5));
  }
  EXPECT_THAT(ClaimAll("c", absl::Seconds(5)), IsEmpty())
      << "the 11th delivery is dead-lettered (default cap 10)";
  Advance(absl::Hours(1));
  EXPECT_THAT(ClaimAll("c", absl::Seconds(5)), IsEmpty());
  absl::StatusOr<std::vector<DeadLetter>> dl = transport_->ListDeadLetters(0);
  ASSERT_OK(dl);
  ASSERT_THAT(*dl, SizeIs(1));
  EXPECT_EQ((*dl)[0].run_id, id);
  EXPECT_EQ((*dl)[0].deliveries, 10);
  EXPECT_THAT((*dl)[0].reason, HasSubstr("10"));
  (void)other;
}

TEST_P(QueueConformanceTest, DeliveryCapIsConfigurable) {
  const std::string id = CreateAndExhaust(/*cap=*/2, /*runs=*/1)[0];
  EXPECT_THAT(ClaimAll("c", absl::Seconds(5)), IsEmpty()) << "the 3rd delivery is dead-lettered";
  absl::StatusOr<std::vector<DeadLetter>> dl = transport_->ListDeadLetters(0);
  ASSERT_OK(dl);
  ASSERT_THAT(*dl, SizeIs(1));
  EXPECT_EQ((*dl)[0].run_id, id);
  EXPECT_EQ((*dl)[0].deliveries, 2);
  EXPECT_THAT((*dl)[0].reason, HasSubstr("cap is 2"));
}

// A dead-lettered run is visible as such: in its events, and to the
// reconciler's question (so the sweeper never re-enqueues it silently).
TEST_P(QueueConformanceTest, DeadLetteredRunIsVisibleAndAccountedFor) {
  const std::string id = CreateAndExhaust(/*cap=*/1, /*runs=*/1)[0];
  EXPECT_THAT(ClaimAll("c", absl::Seconds(5)), IsEmpty());
  EXPECT_EQ(StatusOf(id), RunStatus::kQueued);
  absl::StatusOr<std::vector<Event>> ev = store_->ListEvents(id, 0, 0);
  ASSERT_OK(ev);
  ASSERT_FALSE(ev->empty());
  EXPECT_EQ(ev->back().type, "run.dead_lettered");
  EXPECT_EQ(ev->back().data["deliveries"], 1);
  EXPECT_THAT(ev->back().data["reason"].get<std::string>(), HasSubstr("cap is 1"));
  absl::StatusOr<MessagePresence> p = transport_->FindMessages({id});
  ASSERT_OK(p);
  EXPECT_THAT(p->pending, IsEmpty());
  EXPECT_THAT(p->dead_lettered, ElementsAre(id));
}

TEST_P(QueueConformanceTest, RedriveDeliversTheRunAgain) {
  const std::vector<std::string> ids = CreateAndExhaust(/*cap=*/1, /*runs=*/2);
  const std::string& a = ids[0];
  const std::string& b = ids[1];
  EXPECT_THAT(ClaimAll("c", absl::Seconds(5)), IsEmpty());
  absl::StatusOr<std::vector<DeadLetter>> dl = transport_->ListDeadLetters(0);
  ASSERT_OK(dl);
  ASSERT_THAT(*dl, SizeIs(2));
  EXPECT_THAT(transport_->ListDeadLetters(1), IsOkAndHolds(SizeIs(1)));
  EXPECT_THAT(transport_->CountDeadLetters(), IsOkAndHolds(2));
  const DeadLetter& first = (*dl)[0].run_id == a ? (*dl)[0] : (*dl)[1];

  ASSERT_OK(transport_->Redrive(first.id));
  EXPECT_THAT(transport_->Redrive(first.id), StatusIs(absl::StatusCode::kNotFound))
      << "a dead letter is redriven once";
  EXPECT_THAT(transport_->ListDeadLetters(0),
              IsOkAndHolds(ElementsAre(Field(&DeadLetter::run_id, b))));
  EXPECT_THAT(transport_->CountDeadLetters(), IsOkAndHolds(1)) << "a redriven one is not counted";
  absl::StatusOr<MessagePresence> p = transport_->FindMessages({a, b});
  ASSERT_OK(p);
  EXPECT_THAT(p->pending, ElementsAre(a));
  EXPECT_THAT(p->dead_lettered, ElementsAre(b));
  EXPECT_THAT(ClaimAll(), ElementsAre(AllOf(Field(&QueueMessage::run_id, a),
                                            Field(&QueueMessage::deliveries, 1))));

  EXPECT_THAT(transport_->RedriveAll(), IsOkAndHolds(1));
  EXPECT_THAT(transport_->RedriveAll(), IsOkAndHolds(0));
  EXPECT_THAT(transport_->ListDeadLetters(0), IsOkAndHolds(IsEmpty()));
  EXPECT_THAT(transport_->CountDeadLetters(), IsOkAndHolds(0));
  EXPECT_THAT(ClaimAll("c2"), ElementsAre(Field(&QueueMessage::run_id, b)));
}

TEST_P(QueueConformanceTest, RedriveOfARunThatMovedOnRunsNothing) {
  const std::string id = CreateAndExhaust(/*cap=*/1, /*runs=*/1)[0];
  EXPECT_THAT(ClaimAll("c", absl::Seconds(5)), IsEmpty());
  RunWrite cancel;
  cancel.run_id = id;
  cancel.party = Party::kCancel;
  cancel.new_status = RunStatus::kCancelled;
  ASSERT_OK(store_->Commit(cancel));
  EXPECT_THAT(transport_->RedriveAll(), IsOkAndHolds(1));
  EXPECT_THAT(transport_->ListDeadLetters(0), IsOkAndHolds(IsEmpty()));
  // A message may or may not follow (a transport apart from the store cannot
  // tell); taking the lease refuses a cancelled run either way.
  for (const QueueMessage& m : ClaimAll()) {
    EXPECT_EQ(m.run_id, id);
    EXPECT_THAT(store_->AcquireLease(id, "w", absl::Seconds(5), {}),
                StatusIs(absl::StatusCode::kFailedPrecondition));
  }
  EXPECT_THAT(transport_->Redrive("not-an-id"), StatusIs(absl::StatusCode::kInvalidArgument));
}

// The reconciler's question: pending means visible or claimed, not acked.
TEST_P(QueueConformanceTest, FindMessagesSeesVisibleAndClaimedMessages) {
  std::string visible = Create();
  std::string claimed = Create();
  std::string acked = Create();
  std::vector<QueueMessage> all = ClaimAll("c", absl::Seconds(60));
  ASSERT_THAT(all, SizeIs(3));
  for (const QueueMessage& m : all) {
    if (m.run_id == visible) {
      ASSERT_OK(transport_->Release(m));
    }
    if (m.run_id == acked) {
      ASSERT_OK(transport_->Ack(m));
    }
  }
  absl::StatusOr<MessagePresence> p =
      transport_->FindMessages({visible, claimed, acked, "r_unknown"});
  ASSERT_OK(p);
  EXPECT_THAT(p->pending, UnorderedElementsAre(visible, claimed));
  EXPECT_THAT(p->dead_lettered, IsEmpty());
  EXPECT_THAT(transport_->FindMessages({}),
              IsOkAndHolds(Field(&MessagePresence::pending, IsEmpty())));
}

// What an outbox relay does on a transport: at least one pending message.
TEST_P(QueueConformanceTest, PublishMakesAMessagePending) {
  std::string id = Create();
  ASSERT_OK(transport_->Ack(ClaimAll()[0]));
  ASSERT_OK(transport_->Publish(id));
  ASSERT_OK(transport_->Publish(id));  // at least once: a second is harmless
  std::vector<QueueMessage> m = ClaimAll();
  ASSERT_THAT(m, Not(IsEmpty()));
  for (const QueueMessage& q : m) EXPECT_EQ(q.run_id, id);
}

TEST_P(QueueConformanceTest, TwoConsumersNeverShareAMessage) {
  constexpr int kRuns = 150;
  for (int i = 0; i < kRuns; ++i) Create();
  std::unique_ptr<Transport> second_owner;
  Transport* second = transport_.get();
  std::unique_ptr<Store> second_store;
  if (GetParam().shared_location) {  // a second handle, as another process would have
    absl::StatusOr<Backend> b = Open();
    ASSERT_OK(b);
    second_store = std::move(b->store);
    second_owner = std::move(b->transport);
    second = second_owner.get();
  }
  std::vector<std::string> got[2];
  auto consume = [&](Transport* t, int who) {
    while (true) {
      absl::StatusOr<std::vector<QueueMessage>> m =
          t->Claim(absl::StrCat("consumer-", who), 7, absl::Minutes(5));
      ASSERT_OK(m);
      if (m->empty()) return;
      for (const QueueMessage& q : *m) got[who].push_back(q.run_id);
    }
  };
  std::thread t0(consume, transport_.get(), 0);
  std::thread t1(consume, second, 1);
  t0.join();
  t1.join();
  std::set<std::string> all(got[0].begin(), got[0].end());
  for (const std::string& id : got[1]) {
    EXPECT_TRUE(all.insert(id).second) << id << " was claimed twice";
  }
  EXPECT_EQ(all.size(), static_cast<size_t>(kRuns));
}

TEST_P(QueueConformanceTest, ConcurrentWritersAllCommit) {
  constexpr int kThreads = 8;
  constexpr int kRunsPerThread = 8;
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  std::vector<std::string> ids[kThreads];
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      absl::BitGen gen;
      for (int i = 0; i < kRunsPerThread; ++i) {
        NewRun n = MakeRun();
        n.id = NewRunId(Now(), gen);
        absl::StatusOr<CreateRunResult> r = store_->CreateRun(n, {Ev("run.created")});
        if (!r.ok()) {
          ++errors;
          continue;
        }
        absl::StatusOr<Lease> l = store_->AcquireLease(n.id, absl::StrCat("w", t),
                                                       absl::Seconds(30), {Ev("run.started")});
        if (!l.ok()) {
          ++errors;
          continue;
        }
        RunWrite w = ExecutorWrite(*l);
        StepRecord s;
        s.path = "only";
        w.steps = {s};
        w.events = {Ev("step.succeeded")};
        if (!store_->Commit(w).ok()) ++errors;
        RunWrite done = ExecutorWrite(*l);
        done.new_status = RunStatus::kCompleted;
        done.events = {Ev("run.completed")};
        if (!store_->Commit(done).ok()) ++errors;
        ids[t].push_back(n.id);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors, 0);
  RunFilter completed;
  completed.status = RunStatus::kCompleted;
  completed.limit = 0;
  EXPECT_THAT(store_->ListRuns(completed), IsOkAndHolds(SizeIs(kThreads * kRunsPerThread)));
  for (const std::string& id : ids[3]) {
    absl::StatusOr<std::vector<Event>> ev = store_->ListEvents(id, 0, 0);
    ASSERT_OK(ev);
    ASSERT_THAT(*ev, SizeIs(4));
    for (int i = 0; i < 4; ++i) EXPECT_EQ((*ev)[i].seq, i + 1);
    EXPECT_THAT(store_->ListSteps(id, std::nullopt), IsOkAndHolds(SizeIs(1)));
  }
}

TEST_P(QueueConformanceTest, WaitReturnsAtOnceForLocalMessages) {
  Create();
  runloom::Notification done;
  std::thread waiter([&] {
    transport_->WaitForMessages(Now() + absl::Hours(1));
    done.Notify();
  });
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(kWatchdog));
  if (!done.HasBeenNotified()) transport_->Interrupt();
  waiter.join();
}

TEST_P(QueueConformanceTest, WaitWakesOnAMessageProducedLater) {
  runloom::Notification waiting_done;
  ASSERT_THAT(ClaimAll(), IsEmpty());
  transport_->WaitForMessages(Now());  // consume any earlier signal
  std::thread waiter([&] {
    transport_->WaitForMessages(Now() + absl::Hours(1));
    waiting_done.Notify();
  });
  // Let the waiter block, then produce a message in this process.
  EXPECT_FALSE(waiting_done.WaitForNotificationWithTimeout(absl::Milliseconds(20)));
  Create();
  EXPECT_TRUE(waiting_done.WaitForNotificationWithTimeout(kWatchdog));
  if (!waiting_done.HasBeenNotified()) transport_->Interrupt();
  waiter.join();
}

TEST_P(QueueConformanceTest, WaitEndsAtTheDeadline) {
  transport_->WaitForMessages(Now());  // consume any earlier signal
  runloom::Notification done;
  std::thread waiter([&] {
    transport_->WaitForMessages(Now() + absl::Seconds(1));
    done.Notify();
  });
  EXPECT_TRUE(AdvanceUntil(done, absl::Milliseconds(50)));
  if (!done.HasBeenNotified()) transport_->Interrupt();
  waiter.join();
}

TEST_P(QueueConformanceTest, InterruptWakesWaiters) {
  transport_->WaitForMessages(Now());
  runloom::Notification done;
  std::thread waiter([&] {
    transport_->WaitForMessages(Now() + absl::Hours(1));
    done.Notify();
  });
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(20)));
  transport_->Interrupt();
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(kWatchdog));
  waiter.join();
}

TEST_P(QueueConformanceTest, WaitPollsForMessagesOfOtherProcesses) {
  if (!GetParam().shared_location) GTEST_SKIP() << "needs a second handle on the same data";
  absl::StatusOr<Backend> other = Open();
  ASSERT_OK(other);
  transport_->WaitForMessages(Now());
  runloom::Notification done;
  std::thread waiter([&] {
    transport_->WaitForMessages(Now() + absl::Hours(1));
    done.Notify();
  });
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(20)));
  NewRun n = MakeRun();
  ASSERT_OK(other->store->CreateRun(n, {}));
  // Only polling can see it: step the clock past the poll interval.
  EXPECT_TRUE(AdvanceUntil(done, absl::Milliseconds(10)));
  if (!done.HasBeenNotified()) transport_->Interrupt();
  waiter.join();
  // The wake-up may come before the message is claimable: with a Redis
  // queue, the outbox relay moves it to the stream on a thread of its own
  // (seen under ASan on a loaded machine). It must become claimable.
  std::vector<QueueMessage> claimed = ClaimAll();
  for (int i = 0; i < 2000 && claimed.empty(); ++i) {
    RealClock()->SleepFor(absl::Milliseconds(2));
    Advance(absl::Milliseconds(10));
    claimed = ClaimAll();
  }
  EXPECT_THAT(claimed, ElementsAre(Field(&QueueMessage::run_id, n.id)));
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Backends, QueueConformanceTest, ::testing::ValuesIn(AllBackendsUnderTest()),
                         FactoryName);

}  // namespace runloom::conformance
