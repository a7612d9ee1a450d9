// OutboxRelay over a real transport (SQLite :memory:) and an in-memory outbox.
#include "transport/outbox_relay.h"

#include "runloom/sqlite.h"

#include "testing/status_matchers.h"
#include "testing/transport_wrapper.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace runloom {
namespace {

using ::runloom::testing::IsOkAndHolds;
using ::runloom::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// An outbox kept in memory, as a store's outbox table would be.
class MemoryOutbox final : public Outbox {
 public:
  void Add(const std::string& id, const std::string& run_id) { rows_[id] = run_id; }

  absl::StatusOr<std::vector<OutboxRow>> Pending(int max) override {
    if (!readable) return absl::UnavailableError("outbox down");
    std::vector<OutboxRow> out;
    for (const auto& [id, run] : rows_) {
      if (static_cast<int>(out.size()) >= max) break;
      if (failed.count(id) == 0) out.push_back(OutboxRow{id, run});
    }
    return out;
  }
  absl::Status MarkPublished(const std::vector<std::string>& ids) override {
    for (const std::string& id : ids) {
      rows_.erase(id);
      published.push_back(id);
    }
    return absl::OkStatus();
  }
  absl::Status MarkFailed(const std::string& id, const std::string& reason) override {
    failed[id] = reason;
    return absl::OkStatus();
  }

  bool readable = true;
  std::vector<std::string> published;
  std::map<std::string, std::string> failed;

 private:
  std::map<std::string, std::string> rows_;  // id -> run id, oldest (smallest id) first
};

// The SQLite transport, with Publish refused for the runs in `refuse`.
class RefusingTransport final : public ::runloom::testing::TransportWrapper {
 public:
  using TransportWrapper::TransportWrapper;
  absl::Status Publish(const std::string& run_id) override {
    if (refuse.count(run_id) > 0) return absl::UnavailableError("stream full");
    return TransportWrapper::Publish(run_id);
  }

  std::set<std::string> refuse;
};

class OutboxRelayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SqliteOptions o;
    o.clock = &clock_;
    absl::StatusOr<Backend> b = OpenSqlite(":memory:", o);
    ASSERT_OK(b);
    backend_ = *std::move(b);
  }

  // A run whose own queue message was claimed and acked: the transport has
  // nothing for it until the relay publishes.
  std::string RunWithoutMessage(const std::string& id) {
    NewRun n;
    n.id = id;
    n.workflow_name = "wf";
    EXPECT_OK(backend_.store->CreateRun(n, {}));
    absl::StatusOr<std::vector<QueueMessage>> m =
        backend_.transport->Claim("c", 10, absl::Seconds(60));
    EXPECT_OK(m);
    for (const QueueMessage& q : *m) EXPECT_OK(backend_.transport->Ack(q));
    return id;
  }

  SimulatedClock clock_;
  Backend backend_;
};

TEST_F(OutboxRelayTest, SameTableRelayHasNothingToMove) {
  std::unique_ptr<OutboxRelay> relay = NewSameTableRelay();
  absl::StatusOr<RelayResult> r = relay->RelayOnce();
  ASSERT_OK(r);
  EXPECT_EQ(r->published, 0);
  EXPECT_EQ(r->failed, 0);
}

TEST_F(OutboxRelayTest, PublishesInBatchesAndMarksPublished) {
  MemoryOutbox outbox;
  outbox.Add("1", RunWithoutMessage("r_a"));
  outbox.Add("2", RunWithoutMessage("r_b"));
  outbox.Add("3", RunWithoutMessage("r_c"));
  std::unique_ptr<OutboxRelay> relay = NewOutboxRelay(&outbox, backend_.transport.get(), 2);
  absl::StatusOr<RelayResult> r = relay->RelayOnce();
  ASSERT_OK(r);
  EXPECT_EQ(r->published, 2);
  EXPECT_THAT(outbox.published, ElementsAre("1", "2"));
  r = relay->RelayOnce();
  ASSERT_OK(r);
  EXPECT_EQ(r->published, 1);
  EXPECT_THAT(relay->RelayOnce(), IsOkAndHolds(Field(&RelayResult::published, 0)));
  absl::StatusOr<std::vector<QueueMessage>> m =
      backend_.transport->Claim("c", 10, absl::Seconds(60));
  ASSERT_OK(m);
  std::vector<std::string> runs;
  for (const QueueMessage& q : *m) runs.push_back(q.run_id);
  EXPECT_THAT(runs, UnorderedElementsAre("r_a", "r_b", "r_c"));
}

TEST_F(OutboxRelayTest, ARowThatCannotBePublishedIsRecordedAndSkipped) {
  MemoryOutbox outbox;
  outbox.Add("1", RunWithoutMessage("r_bad"));
  outbox.Add("2", RunWithoutMessage("r_good"));
  RefusingTransport transport(backend_.transport.get());
  transport.refuse.insert("r_bad");
  std::unique_ptr<OutboxRelay> relay = NewOutboxRelay(&outbox, &transport, 10);
  absl::StatusOr<RelayResult> r = relay->RelayOnce();
  ASSERT_OK(r);
  EXPECT_EQ(r->published, 1);
  EXPECT_EQ(r->failed, 1);
  EXPECT_THAT(outbox.published, ElementsAre("2"));
  ASSERT_EQ(outbox.failed.count("1"), 1u);
  EXPECT_THAT(outbox.failed["1"], HasSubstr("r_bad"));
  EXPECT_THAT(outbox.failed["1"], HasSubstr("stream full"));
  absl::StatusOr<std::vector<QueueMessage>> m =
      backend_.transport->Claim("c", 10, absl::Seconds(60));
  ASSERT_OK(m);
  EXPECT_THAT(*m, ElementsAre(Field(&QueueMessage::run_id, "r_good")));
}

TEST_F(OutboxRelayTest, AnOutboxThatCannotBeReadIsTheRelaysError) {
  MemoryOutbox outbox;
  outbox.readable = false;
  std::unique_ptr<OutboxRelay> relay = NewOutboxRelay(&outbox, backend_.transport.get(), 10);
  EXPECT_THAT(relay->RelayOnce(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(outbox.published, IsEmpty());
}

}  // namespace
}  // namespace runloom
