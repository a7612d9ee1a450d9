// Concurrency keys, fair dequeue and priority (issue 23), for every backend:
// the limit is a compare-and-set at the lease (never more running runs of a
// key than its limit, under concurrent claimers on separate handles), a run
// over its limit spends no attempt and holds no lease, a freed slot lets the
// next run go, claims take the keys' heads round-robin (B's runs do not wait
// behind A's backlog), one claim finds every key's head beside a big
// backlog (and runs of differing limits under one key, and a running run's
// recovery message, are offered as before), and priority orders the runs
// of one key.
#include "runloom/mutex.h"
#include "conformance_fixture.h"

#include "absl/strings/match.h"

#include <algorithm>
#include <map>
#include <set>
#include <thread>

namespace runloom::conformance {
namespace {

using ::runloom::testing::IsOkAndHolds;
using ::runloom::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::testing::UnorderedElementsAreArray;

class ConcurrencyConformanceTest : public ConformanceTest {
 protected:
  // A new queued run with concurrency key `key` ("" = none), `limit` and
  // `priority`.
  std::string CreateKeyed(const std::string& key, int limit, int priority = 0) {
    NewRun n = MakeRun();
    n.concurrency_key = key;
    n.concurrency_limit = limit;
    n.priority = priority;
    absl::StatusOr<CreateRunResult> r = store_->CreateRun(n, {Ev("run.created")});
    EXPECT_OK(r);
    if (r.ok()) {
      EXPECT_EQ(r->run.concurrency_key, key);
      EXPECT_EQ(r->run.priority, priority);
    }
    return r.ok() ? r->run.id : "";
  }

  absl::StatusOr<Lease> TryLease(Store& store, const std::string& run_id) {
    return store.AcquireLease(run_id, "worker-a", absl::Seconds(30), {Ev("run.started")});
  }

  void Complete(Store& store, const Lease& lease) {
    RunWrite w = ExecutorWrite(lease);
    w.new_status = RunStatus::kCompleted;
    w.events = {Ev("run.completed")};
    EXPECT_OK(store.Commit(w));
  }

  // Claims up to `max` messages and acks them; their run ids in claim order.
  std::vector<std::string> ClaimIds(int max) {
    absl::StatusOr<std::vector<QueueMessage>> m = transport_->Claim("c1", max, absl::Minutes(5));
    EXPECT_OK(m);
    std::vector<std::string> ids;
    if (!m.ok()) return ids;
    for (const QueueMessage& q : *m) {
      ids.push_back(q.run_id);
      EXPECT_OK(transport_->Ack(q));
    }
    return ids;
  }
};

TEST_P(ConcurrencyConformanceTest, CreateRunRefusesBadConcurrencyFields) {
  NewRun n = MakeRun();
  n.concurrency_key = std::string(kMaxConcurrencyKeyBytes + 1, 'k');
  n.concurrency_limit = 1;
  EXPECT_THAT(store_->CreateRun(n, {Ev("run.created")}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  n = MakeRun();
  n.concurrency_key = "tenant-a";
  n.concurrency_limit = 0;
  EXPECT_THAT(store_->CreateRun(n, {Ev("run.created")}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  n = MakeRun();
  n.priority = kMaxPriority + 1;
  EXPECT_THAT(store_->CreateRun(n, {Ev("run.created")}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  RunFilter any;
  any.limit = 0;
  EXPECT_THAT(store_->ListRuns(any), IsOkAndHolds(IsEmpty()));
}

TEST_P(ConcurrencyConformanceTest, OverTheLimitALeaseIsRefusedAndSpendsNothing) {
  const std::string a1 = CreateKeyed("tenant-a", 2);
  const std::string a2 = CreateKeyed("tenant-a", 2);
  const std::string a3 = CreateKeyed("tenant-a", 2);
  const std::string b1 = CreateKeyed("tenant-b", 2);
  absl::StatusOr<Lease> l1 = TryLease(*store_, a1);
  absl::StatusOr<Lease> l2 = TryLease(*store_, a2);
  ASSERT_OK(l1);
  ASSERT_OK(l2);
  EXPECT_THAT(TryLease(*store_, a3), StatusIs(absl::StatusCode::kResourceExhausted));
  // With a first write too: refused as a whole, nothing of it written.
  RunWrite first;
  first.events = {Ev("step.started")};
  first.phase = "research";
  EXPECT_THAT(store_->AcquireLease(a3, "worker-b", absl::Seconds(30), {Ev("run.started")}, &first),
              StatusIs(absl::StatusCode::kResourceExhausted));
  absl::StatusOr<RunRecord> r = store_->GetRun(a3);
  ASSERT_OK(r);
  EXPECT_EQ(r->status, RunStatus::kQueued);
  EXPECT_EQ(r->attempts, 0);
  EXPECT_EQ(r->lease_token, "");
  EXPECT_EQ(r->lease_owner, "");
  EXPECT_EQ(r->last_event_seq, 1);  // run.created only
  EXPECT_EQ(r->phase, "fresh_generation");
  EXPECT_THAT(store_->ListEvents(a3, 0, 0), IsOkAndHolds(SizeIs(1)));
  // It keeps a pending message: the reconciler finds nothing to repair.
  absl::StatusOr<MessagePresence> p = transport_->FindMessages({a3});
  ASSERT_OK(p);
  EXPECT_THAT(p->pending, ElementsAre(a3));
  // Another key is not held back.
  EXPECT_OK(TryLease(*store_, b1));
  // A takeover of a running run of the full key is not a new slot: allowed.
  Advance(absl::Seconds(31));
  absl::StatusOr<Lease> again = TryLease(*store_, a1);
  ASSERT_OK(again);
  EXPECT_EQ(again->attempt, 2);
  // Still two of tenant-a running: a3 is still refused.
  EXPECT_THAT(TryLease(*store_, a3), StatusIs(absl::StatusCode::kResourceExhausted));
  // A freed slot lets it go, on its first attempt.
  Complete(*store_, *again);
  absl::StatusOr<Lease> l3 = TryLease(*store_, a3);
  ASSERT_OK(l3);
  EXPECT_EQ(l3->attempt, 1);
}

TEST_P(ConcurrencyConformanceTest, ClaimsHoldBackRunsOverTheirLimitUntilASlotFrees) {
  const std::string a1 = CreateKeyed("tenant-a", 1);
  const std::string a2 = CreateKeyed("tenant-a", 1);
  const std::string a3 = CreateKeyed("tenant-a", 1);
  // Only as many of a key as it has room for in one claim.
  EXPECT_THAT(ClaimIds(10), ElementsAre(a1));
  absl::StatusOr<Lease> l1 = TryLease(*store_, a1);
  ASSERT_OK(l1);
  // The key is full: nothing of it is claimable, however often one asks.
  EXPECT_THAT(ClaimIds(10), IsEmpty());
  Advance(absl::Minutes(10));  // past any visibility timeout
  EXPECT_THAT(ClaimIds(10), IsEmpty());
  // The slot frees: the next run of the key goes.
  Complete(*store_, *l1);
  EXPECT_THAT(ClaimIds(10), ElementsAre(a2));
  absl::StatusOr<Lease> l2 = TryLease(*store_, a2);
  ASSERT_OK(l2);
  // A pause frees the slot too.
  RunWrite pause = ExecutorWrite(*l2);
  pause.new_status = RunStatus::kPaused;
  ASSERT_OK(store_->Commit(pause));
  EXPECT_THAT(ClaimIds(10), ElementsAre(a3));
}

TEST_P(ConcurrencyConformanceTest, ARefusedRunIsOfferedAgainWhenItsKeyHasRoom) {
  const std::string a1 = CreateKeyed("tenant-a", 1);
  const std::string a2 = CreateKeyed("tenant-a", 1);
  ASSERT_THAT(ClaimIds(1), ElementsAre(a1));
  absl::StatusOr<Lease> l1 = TryLease(*store_, a1);
  ASSERT_OK(l1);
  // A lease that did not come from a claim (a duplicate or a late message).
  EXPECT_THAT(TryLease(*store_, a2), StatusIs(absl::StatusCode::kResourceExhausted));
  // The refusal kept a2 queued with a message, held back while a1 runs.
  EXPECT_THAT(ClaimIds(10), IsEmpty());
  Complete(*store_, *l1);
  EXPECT_THAT(ClaimIds(10), ElementsAre(a2));
  absl::StatusOr<Lease> l2 = TryLease(*store_, a2);
  ASSERT_OK(l2);
  EXPECT_EQ(l2->attempt, 1);
}

// Each key's next run, key after key, as slots free (every run of both
// keys queued while a run of each held the key's one slot, so on a stream
// transport nothing of them was published before the slots freed).
TEST_P(ConcurrencyConformanceTest, ClaimsTakeTheKeysHeadsRoundRobin) {
  std::vector<std::string> a, b;
  a.push_back(CreateKeyed("tenant-a", 1));
  b.push_back(CreateKeyed("tenant-b", 1));
  std::vector<Lease> held;
  for (const std::string& id : ClaimIds(10)) {
    absl::StatusOr<Lease> l = TryLease(*store_, id);
    ASSERT_OK(l);
    held.push_back(*l);
  }
  ASSERT_THAT(held, SizeIs(2));
  for (int i = 0; i < 3; ++i) a.push_back(CreateKeyed("tenant-a", 1));
  for (int i = 0; i < 2; ++i) b.push_back(CreateKeyed("tenant-b", 1));
  std::vector<std::string> order;
  while (!held.empty()) {
    for (const Lease& l : held) Complete(*store_, l);
    held.clear();
    for (const std::string& id : ClaimIds(10)) {
      absl::StatusOr<Lease> l = TryLease(*store_, id);
      ASSERT_OK(l);
      held.push_back(*l);
      order.push_back(id);
    }
  }
  EXPECT_THAT(order, ElementsAre(a[1], b[1], a[2], b[2], a[3]));
}

// B's runs are not queued behind A's backlog: with executors that lease
// what they claim and finish it, every B run starts among the first
// 2 x (kSmall + kLimit), not after A's kBacklog.
TEST_P(ConcurrencyConformanceTest, ASmallKeyIsNotQueuedBehindABigBacklog) {
  constexpr int kBacklog = 300;
  constexpr int kSmall = 10;
  constexpr int kLimit = 4;
  std::set<std::string> small;
  for (int i = 0; i < kBacklog; ++i) CreateKeyed("tenant-a", kLimit);
  for (int i = 0; i < kSmall; ++i) small.insert(CreateKeyed("tenant-b", kLimit));
  std::vector<std::string> leased;
  int small_leased = 0;
  for (int round = 0; round < 100 && small_leased < kSmall; ++round) {
    std::vector<Lease> held;
    for (const std::string& id : ClaimIds(kLimit)) {
      absl::StatusOr<Lease> l = TryLease(*store_, id);
      if (!l.ok()) continue;  // over a limit: kept queued
      held.push_back(*l);
      leased.push_back(id);
      small_leased += static_cast<int>(small.count(id));
    }
    for (const Lease& l : held) Complete(*store_, l);
  }
  EXPECT_EQ(small_leased, kSmall);
  EXPECT_LE(leased.size(), static_cast<size_t>(2 * kSmall + 2 * kLimit));
}

TEST_P(ConcurrencyConformanceTest, PriorityOrdersTheRunsOfAKey) {
  // The key's one slot is held while its runs are queued.
  const std::string blocker = CreateKeyed("tenant-a", 1);
  ASSERT_THAT(ClaimIds(10), ElementsAre(blocker));
  absl::StatusOr<Lease> held = TryLease(*store_, blocker);
  ASSERT_OK(held);
  const std::string p0 = CreateKeyed("tenant-a", 1, 0);
  const std::string p5 = CreateKeyed("tenant-a", 1, 5);
  const std::string p9 = CreateKeyed("tenant-a", 1, 9);
  const std::string p5b = CreateKeyed("tenant-a", 1, 5);
  std::vector<std::string> got;
  for (int i = 0; i < 4; ++i) {
    Complete(*store_, *held);
    std::vector<std::string> ids = ClaimIds(10);
    ASSERT_THAT(ids, SizeIs(1));
    got.push_back(ids[0]);
    held = TryLease(*store_, ids[0]);
    ASSERT_OK(held);
  }
  EXPECT_THAT(got, ElementsAre(p9, p5, p5b, p0));
}

// Without a key, priority orders the keyless group the same way. (A stream
// transport publishes a run with no limit as soon as it is queued, so its
// order is the order they were queued in: the table queues only.)
TEST_P(ConcurrencyConformanceTest, PriorityOrdersTheKeylessRunsOfATableQueue) {
  if (absl::StrContains(GetParam().name, "Redis")) GTEST_SKIP() << "a stream transport";
  const std::string n0 = CreateKeyed("", 0, 0);
  const std::string n7 = CreateKeyed("", 0, 7);
  const std::string n3 = CreateKeyed("", 0, 3);
  EXPECT_THAT(ClaimIds(3), ElementsAre(n7, n3, n0));
}

// Fairness in time: a claim finds the head of every key by index probes
// (each key walked only as far as it could offer a message), so with a big
// backlog of one key and many small keys, one claim takes the big key's
// room and every small key's head, in the fair order.
TEST_P(ConcurrencyConformanceTest, OneClaimFindsEveryKeysHeadBesideABigBacklog) {
  constexpr int kBacklog = 1000;
  constexpr int kKeys = 30;
  std::vector<std::string> a;
  for (int i = 0; i < kBacklog; ++i) a.push_back(CreateKeyed("tenant-a", 2));
  std::vector<std::string> heads;
  for (int k = 0; k < kKeys; ++k) {
    heads.push_back(CreateKeyed(absl::StrCat("small-", k), 1));
    CreateKeyed(absl::StrCat("small-", k), 1);  // its second: over the key's limit
  }
  // Rank 1 of every key (A's first, then the small keys' heads, by age),
  // then A's second: A has room for 2, each small key for 1. (A stream
  // transport published A's two before the small keys were queued: the
  // same runs, in another order.)
  std::vector<std::string> want = {a[0]};
  want.insert(want.end(), heads.begin(), heads.end());
  want.push_back(a[1]);
  if (absl::StrContains(GetParam().name, "Redis")) {
    EXPECT_THAT(ClaimIds(100), UnorderedElementsAreArray(want));
  } else {
    EXPECT_THAT(ClaimIds(100), ElementsAreArray(want));
  }
  // Nothing more is claimable until a slot frees: every key's room is spent
  // by runs claimed (and on a stream transport, published) but not leased.
  // Leasing them holds the slots.
  for (const std::string& id : want) ASSERT_OK(TryLease(*store_, id));
  EXPECT_THAT(ClaimIds(100), IsEmpty());
}

// A key whose runs have different limits (two workflows sharing a key): a
// run of rank n is offered when n is within its own limit less the key's
// running runs, even behind runs of a lower limit that are not, and even
// when the claim asks for fewer than n messages.
TEST_P(ConcurrencyConformanceTest, ARunOfAHigherLimitIsNotHeldBehindLowerOnesOfItsKey) {
  const std::string low1 = CreateKeyed("tenant-a", 1);
  ASSERT_THAT(ClaimIds(1), ElementsAre(low1));
  ASSERT_OK(TryLease(*store_, low1));
  // Queued while low1 runs: low2 (rank 1, limit 1) is held back; high (rank
  // 2, limit 3) is not.
  const std::string low2 = CreateKeyed("tenant-a", 1);
  const std::string high = CreateKeyed("tenant-a", 3);
  EXPECT_THAT(ClaimIds(1), ElementsAre(high));
  ASSERT_OK(TryLease(*store_, high));
  // Two running: low2 (limit 1) is still held back.
  EXPECT_THAT(ClaimIds(10), IsEmpty());
}

// A running run taken back for recovery (its lease expired, the sweeper
// enqueued it) holds its key's slot already: its message is in the keyless
// group, claimed even while the key is full.
TEST_P(ConcurrencyConformanceTest, ARunningRunsMessageIsNotHeldBackByItsKey) {
  const std::string a1 = CreateKeyed("tenant-a", 1);
  ASSERT_THAT(ClaimIds(10), ElementsAre(a1));
  ASSERT_OK(TryLease(*store_, a1));
  const std::string a2 = CreateKeyed("tenant-a", 1);  // queued while the key is full
  EXPECT_THAT(ClaimIds(10), IsEmpty());
  Advance(absl::Seconds(31));  // a1's lease expires
  ASSERT_OK(store_->Enqueue(a1, {Ev("run.lease_expired")}));
  EXPECT_THAT(ClaimIds(10), ElementsAre(a1));
  absl::StatusOr<Lease> again = TryLease(*store_, a1);
  ASSERT_OK(again);
  EXPECT_EQ(again->attempt, 2);
  Complete(*store_, *again);
  EXPECT_THAT(ClaimIds(10), ElementsAre(a2));
}

TEST_P(ConcurrencyConformanceTest, TheLimitHoldsUnderConcurrentClaimers) {
  constexpr int kRuns = 24;
  constexpr int kLimit = 2;
  constexpr int kWorkers = 4;
  std::vector<std::string> ids;
  for (int i = 0; i < kRuns; ++i) ids.push_back(CreateKeyed("tenant-a", kLimit));
  // Each worker its own handle when the backend is shared (as processes).
  std::vector<std::unique_ptr<Store>> stores;
  std::vector<std::unique_ptr<Transport>> transports;
  for (int w = 0; w < kWorkers; ++w) {
    if (!GetParam().shared_location) break;
    absl::StatusOr<Backend> b = Open();
    ASSERT_OK(b);
    stores.push_back(std::move(b->store));
    transports.push_back(std::move(b->transport));
  }
  std::atomic<int> held{0};
  std::atomic<int> most{0};
  std::atomic<int> done{0};
  std::atomic<int> refused{0};
  std::atomic<int> errors{0};
  std::atomic<int> over_in_store{0};
  auto work = [&](int w) {
    Store& store = stores.empty() ? *store_ : *stores[w];
    Transport& transport = transports.empty() ? *transport_ : *transports[w];
    for (int spins = 0; done.load() < kRuns && spins < 200000; ++spins) {
      absl::StatusOr<std::vector<QueueMessage>> m =
          transport.Claim(absl::StrCat("w", w), 1, absl::Minutes(5));
      if (!m.ok()) {
        ++errors;
        return;
      }
      if (m->empty()) {
        std::this_thread::yield();  // another worker holds the key's slots
        continue;
      }
      const QueueMessage q = (*m)[0];
      absl::StatusOr<Lease> l =
          store.AcquireLease(q.run_id, absl::StrCat("w", w), absl::Minutes(5), {Ev("run.started")});
      if (!transport.Ack(q).ok()) ++errors;
      if (!l.ok()) {
        if (l.status().code() == absl::StatusCode::kResourceExhausted) {
          ++refused;
        } else if (l.status().code() != absl::StatusCode::kFailedPrecondition) {
          ++errors;  // FailedPrecondition: a duplicate message of a finished run
        }
        continue;
      }
      // The store's own state: never more running runs of the key than its limit.
      RunFilter running;
      running.status = RunStatus::kRunning;
      running.limit = 0;
      absl::StatusOr<std::vector<RunRecord>> in_store = store.ListRuns(running);
      if (!in_store.ok() || static_cast<int>(in_store->size()) > kLimit) ++over_in_store;
      const int now_held = ++held;
      int prev = most.load();
      while (now_held > prev && !most.compare_exchange_weak(prev, now_held)) {
      }
      std::this_thread::yield();
      --held;
      RunWrite fin = ExecutorWrite(*l);
      fin.new_status = RunStatus::kCompleted;
      fin.events = {Ev("run.completed")};
      if (store.Commit(fin).ok()) {
        ++done;
      } else {
        ++errors;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) threads.emplace_back(work, w);
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(done.load(), kRuns);
  EXPECT_LE(most.load(), kLimit);
  EXPECT_EQ(over_in_store.load(), 0);
  // Every run completed on its first attempt: a refusal spent none.
  for (const std::string& id : ids) {
    absl::StatusOr<RunRecord> r = store_->GetRun(id);
    ASSERT_OK(r);
    EXPECT_EQ(r->status, RunStatus::kCompleted) << id;
    EXPECT_EQ(r->attempts, 1) << id;
  }
  RecordProperty("refused_leases", refused.load());
}

INSTANTIATE_TEST_SUITE_P(Backends, ConcurrencyConformanceTest,
                         ::testing::ValuesIn(AllBackendsUnderTest()), FactoryName);

}  // namespace
}  // namespace runloom::conformance
