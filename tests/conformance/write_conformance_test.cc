// Store conformance for the write-operations ledger (runloom/write_ledger.h):
// intent before result, fenced by the lease, first result wins, a digest
// per key; for every backend of AllBackendsUnderTest().
#include "conformance_fixture.h"

#include <atomic>
#include <thread>
#include <vector>

namespace runloom::conformance {
namespace {

using ::runloom::testing::StatusIs;

class WriteConformanceTest : public ConformanceTest {
 protected:
  WriteIntent Intent(const Lease& lease, const std::string& action = "open_ticket",
                     const std::string& digest = "sha256:aaa") {
    WriteIntent i;
    i.key = {.run_id = lease.run_id, .step_path = "apply", .action = action};
    i.lease_token = lease.token;
    i.idempotency_key = DeriveIdempotencyKey(i.key);
    i.request_digest = digest;
    return i;
  }
  static WriteResult Result(int status, nlohmann::json body, const std::string& source = "sent") {
    return WriteResult{.http_status = status, .response = std::move(body), .source = source};
  }
};

TEST_P(WriteConformanceTest, IntentThenResult) {
  Lease lease;
  const std::string id = DriveTo(RunStatus::kRunning, &lease);
  const absl::Time before = Now();
  absl::StatusOr<BeginWriteResult> b = store_->BeginWrite(Intent(lease));
  ASSERT_OK(b);
  EXPECT_TRUE(b->created);
  EXPECT_EQ(b->op.state, WriteState::kIntent);
  EXPECT_EQ(b->op.begins, 0);
  EXPECT_EQ(b->op.result, std::nullopt);
  EXPECT_GE(b->op.created_at, before);
  EXPECT_EQ(b->op.idempotency_key, DeriveIdempotencyKey(b->op.key));

  absl::StatusOr<WriteOperation> f =
      store_->FinishWrite(b->op.key, Result(201, {{"ticket", "T-1"}}));
  ASSERT_OK(f);
  EXPECT_EQ(f->state, WriteState::kDone);
  ASSERT_TRUE(f->result.has_value());
  EXPECT_EQ(f->result->http_status, 201);
  EXPECT_EQ(f->result->response, (nlohmann::json{{"ticket", "T-1"}}));
  EXPECT_EQ(f->result->source, "sent");
  EXPECT_TRUE(f->finished_at.has_value());

  absl::StatusOr<std::vector<WriteOperation>> all = store_->ListWrites(id);
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].key.action, "open_ticket");
  EXPECT_EQ((*all)[0].state, WriteState::kDone);
  EXPECT_EQ((*all)[0].created_at, b->op.created_at);
}

// A second begin of the key (a retry, a resumed execution) writes no new
// intent: it sees the first one, with or without its result.
TEST_P(WriteConformanceTest, SecondBeginSeesTheRowAndCounts) {
  Lease lease;
  DriveTo(RunStatus::kRunning, &lease);
  ASSERT_OK(store_->BeginWrite(Intent(lease)));
  absl::StatusOr<BeginWriteResult> again = store_->BeginWrite(Intent(lease));
  ASSERT_OK(again);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->op.state, WriteState::kIntent);
  EXPECT_EQ(again->op.begins, 1);
  ASSERT_OK(store_->FinishWrite(again->op.key, Result(200, "ok")));
  absl::StatusOr<BeginWriteResult> third = store_->BeginWrite(Intent(lease));
  ASSERT_OK(third);
  EXPECT_FALSE(third->created);
  EXPECT_EQ(third->op.begins, 2);
  ASSERT_TRUE(third->op.result.has_value());
  EXPECT_EQ(third->op.result->response, "ok");
}

TEST_P(WriteConformanceTest, FirstResultWins) {
  Lease lease;
  DriveTo(RunStatus::kRunning, &lease);
  absl::StatusOr<BeginWriteResult> b = store_->BeginWrite(Intent(lease));
  ASSERT_OK(b);
  ASSERT_OK(store_->FinishWrite(b->op.key, Result(201, {{"n", 1}})));
  absl::StatusOr<WriteOperation> late =
      store_->FinishWrite(b->op.key, Result(200, {{"n", 2}}, "lookup"));
  ASSERT_OK(late);
  EXPECT_EQ(late->result->http_status, 201);
  EXPECT_EQ(late->result->response, (nlohmann::json{{"n", 1}}));
  EXPECT_EQ(late->result->source, "sent");
}

TEST_P(WriteConformanceTest, ResultWithoutIntentIsNotFound) {
  Lease lease;
  DriveTo(RunStatus::kRunning, &lease);
  WriteKey key{.run_id = lease.run_id, .step_path = "apply", .action = "never_begun"};
  EXPECT_THAT(store_->FinishWrite(key, Result(200, nullptr)),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(WriteConformanceTest, BeginIsFencedByTheLease) {
  Lease lease;
  const std::string id = DriveTo(RunStatus::kRunning, &lease);
  WriteIntent stale = Intent(lease);
  stale.lease_token = "not-the-token";
  EXPECT_THAT(store_->BeginWrite(stale), StatusIs(absl::StatusCode::kAborted));
  WriteIntent none = Intent(lease);
  none.lease_token = "";
  EXPECT_THAT(store_->BeginWrite(none), StatusIs(absl::StatusCode::kAborted));
  // An expired lease sends nothing either: another executor may hold the run.
  Advance(absl::Seconds(31));
  EXPECT_THAT(store_->BeginWrite(Intent(lease)), StatusIs(absl::StatusCode::kAborted));
  absl::StatusOr<std::vector<WriteOperation>> all = store_->ListWrites(id);
  ASSERT_OK(all);
  EXPECT_TRUE(all->empty());
  // The next holder may begin it.
  Lease next = Acquire(id);
  EXPECT_OK(store_->BeginWrite(Intent(next)));
}

TEST_P(WriteConformanceTest, BeginOnARunNotRunningIsAborted) {
  Lease lease;
  const std::string paused = DriveTo(RunStatus::kPaused, &lease);
  EXPECT_THAT(store_->BeginWrite(Intent(lease)), StatusIs(absl::StatusCode::kAborted));
  WriteIntent missing = Intent(lease);
  missing.key.run_id = "r_missing";
  EXPECT_THAT(store_->BeginWrite(missing), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_OK(store_->ListWrites(paused));
}

TEST_P(WriteConformanceTest, AnotherRequestUnderTheSameKeyIsRefused) {
  Lease lease;
  const std::string id = DriveTo(RunStatus::kRunning, &lease);
  ASSERT_OK(store_->BeginWrite(Intent(lease, "open_ticket", "sha256:aaa")));
  EXPECT_THAT(store_->BeginWrite(Intent(lease, "open_ticket", "sha256:bbb")),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  // Nothing was written by the refusal (not even the count).
  absl::StatusOr<std::vector<WriteOperation>> all = store_->ListWrites(id);
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].begins, 0);
  EXPECT_EQ((*all)[0].request_digest, "sha256:aaa");
  // Another action is another write.
  absl::StatusOr<BeginWriteResult> other = store_->BeginWrite(Intent(lease, "page_oncall"));
  ASSERT_OK(other);
  EXPECT_TRUE(other->created);
}

// The key names the decision a write carries out: the same step and action
// under another decision is another write (its own intent, its own
// Idempotency-Key, another request allowed); under the same decision it is
// the same write.
TEST_P(WriteConformanceTest, AnotherDecisionIsAnotherWrite) {
  Lease lease;
  const std::string id = DriveTo(RunStatus::kRunning, &lease);
  WriteIntent first = Intent(lease, "open_ticket", "sha256:aaa");
  first.key.decision = WriteDecision("review", 1, "sha256:p1");
  first.idempotency_key = DeriveIdempotencyKey(first.key);
  ASSERT_OK(store_->BeginWrite(first));
  ASSERT_OK(store_->FinishWrite(first.key, Result(201, {{"ticket", "T-1"}})));
  WriteIntent second = Intent(lease, "open_ticket", "sha256:bbb");
  second.key.decision = WriteDecision("review", 2, "sha256:p1");
  second.idempotency_key = DeriveIdempotencyKey(second.key);
  EXPECT_NE(second.idempotency_key, first.idempotency_key);
  absl::StatusOr<BeginWriteResult> b = store_->BeginWrite(second);
  ASSERT_OK(b);
  EXPECT_TRUE(b->created);
  EXPECT_EQ(b->op.key.decision, "review@2:sha256:p1");
  // A retry of the first decision finds its result.
  absl::StatusOr<BeginWriteResult> again = store_->BeginWrite(first);
  ASSERT_OK(again);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->op.state, WriteState::kDone);
  absl::StatusOr<std::vector<WriteOperation>> all = store_->ListWrites(id);
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].key.decision, "review@1:sha256:p1");
  EXPECT_EQ((*all)[1].key.decision, "review@2:sha256:p1");
  // Without a decision the Idempotency-Key is derived as it always was.
  EXPECT_EQ(
      DeriveIdempotencyKey({.run_id = "r_1", .step_path = "a", .action = "b"}),
      DeriveIdempotencyKey({.run_id = "r_1", .step_path = "a", .action = "b", .decision = ""}));
}

TEST_P(WriteConformanceTest, BadArgumentsAreInvalid) {
  Lease lease;
  DriveTo(RunStatus::kRunning, &lease);
  WriteIntent no_action = Intent(lease, "");
  EXPECT_THAT(store_->BeginWrite(no_action), StatusIs(absl::StatusCode::kInvalidArgument));
  WriteIntent no_digest = Intent(lease, "a", "");
  EXPECT_THAT(store_->BeginWrite(no_digest), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->FinishWrite(WriteKey{}, Result(200, nullptr)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_P(WriteConformanceTest, ListIsPerRunOldestFirst) {
  Lease a;
  const std::string run_a = DriveTo(RunStatus::kRunning, &a);
  Lease b;
  const std::string run_b = DriveTo(RunStatus::kRunning, &b);
  ASSERT_OK(store_->BeginWrite(Intent(a, "first")));
  Advance(absl::Milliseconds(5));
  ASSERT_OK(store_->BeginWrite(Intent(a, "second")));
  ASSERT_OK(store_->BeginWrite(Intent(b, "other")));
  absl::StatusOr<std::vector<WriteOperation>> all = store_->ListWrites(run_a);
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].key.action, "first");
  EXPECT_EQ((*all)[1].key.action, "second");
  absl::StatusOr<std::vector<WriteOperation>> none = store_->ListWrites("r_unknown");
  ASSERT_OK(none);
  EXPECT_TRUE(none->empty());
}

// Concurrent begins of one key from threads (as two executors racing a
// takeover would): exactly one creates the intent.
TEST_P(WriteConformanceTest, ConcurrentBeginsCreateOnce) {
  Lease lease;
  const std::string id = DriveTo(RunStatus::kRunning, &lease);
  constexpr int kThreads = 8;
  std::atomic<int> created{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      absl::StatusOr<BeginWriteResult> r = store_->BeginWrite(Intent(lease));
      if (!r.ok()) {
        ++failed;
      } else if (r->created) {
        ++created;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(created.load(), 1);
  absl::StatusOr<std::vector<WriteOperation>> all = store_->ListWrites(id);
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].begins, kThreads - 1);
}

// A JSON response with every kind of value round-trips.
TEST_P(WriteConformanceTest, ResponseRoundTrips) {
  Lease lease;
  const std::string id = DriveTo(RunStatus::kRunning, &lease);
  absl::StatusOr<BeginWriteResult> b = store_->BeginWrite(Intent(lease));
  ASSERT_OK(b);
  const nlohmann::json body = {{"s", "ünï \"q\""}, {"n", 1.5}, {"a", {1, nullptr, true}}};
  ASSERT_OK(store_->FinishWrite(b->op.key, Result(200, body, "resent")));
  absl::StatusOr<std::vector<WriteOperation>> all = store_->ListWrites(id);
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].result->response, body);
  EXPECT_EQ((*all)[0].result->source, "resent");
}

INSTANTIATE_TEST_SUITE_P(Backends, WriteConformanceTest,
                         ::testing::ValuesIn(AllBackendsUnderTest()), FactoryName);

}  // namespace
}  // namespace runloom::conformance
