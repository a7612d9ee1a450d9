// Store conformance for the budget ledger (runloom/budget_ledger.h):
// reservations are a compare-and-set on what the tenant and the run have
// left, fenced by the lease; settles book the real cost once; recovery
// releases what a dead executor reserved. For every backend of
// AllBackendsUnderTest().
#include "conformance_fixture.h"

#include <atomic>
#include <thread>
#include <vector>

namespace runloom::conformance {
namespace {

using ::runloom::testing::StatusIs;

class BudgetTest : public ConformanceTest {
 protected:
  static BudgetRequest Request(const Lease& lease, int64_t amount,
                               const std::string& path = "draft", int64_t attempt = 1,
                               const std::string& tenant = "acme",
                               std::optional<int64_t> run_limit = std::nullopt) {
    return BudgetRequest{.key = {.run_id = lease.run_id,
                                 .step_path = path,
                                 .attempt = attempt,
                                 .lease_token = lease.token},
                         .tenant = tenant,
                         .run_limit_micros = run_limit,
                         .amount_micros = amount};
  }
  // The tenant's row, read both ways (one row by name, and from the list),
  // which must agree.
  BudgetFigures Tenant(const std::string& name) {
    absl::StatusOr<std::optional<TenantBudget>> one = store_->GetTenantBudget(name);
    EXPECT_OK(one);
    absl::StatusOr<std::vector<TenantBudget>> all = store_->ListTenantBudgets();
    EXPECT_OK(all);
    if (!all.ok() || !one.ok()) return {};
    for (const TenantBudget& t : *all) {
      if (t.tenant != name) continue;
      EXPECT_TRUE(one->has_value()) << name;
      if (one->has_value()) {
        EXPECT_EQ((*one)->tenant, t.tenant);
        EXPECT_EQ((*one)->figures.limit_micros, t.figures.limit_micros);
        EXPECT_EQ((*one)->figures.spent_micros, t.figures.spent_micros);
        EXPECT_EQ((*one)->figures.reserved_micros, t.figures.reserved_micros);
      }
      return t.figures;
    }
    ADD_FAILURE() << "no tenant " << name;
    return {};
  }
  BudgetFigures Run(const std::string& run_id) {
    absl::StatusOr<RunBudget> r = store_->GetRunBudget(run_id);
    EXPECT_OK(r);
    return r.ok() ? r->figures : BudgetFigures{};
  }
};

TEST_P(BudgetTest, ReserveThenSettleBooksTheRealCost) {
  ASSERT_OK(store_->SetTenantBudget("acme", 1000));
  Lease lease;
  const std::string id = DriveTo(RunStatus::kRunning, &lease);
  absl::StatusOr<ReserveResult> r = store_->Reserve(Request(lease, 300));
  ASSERT_OK(r);
  EXPECT_TRUE(r->granted);
  EXPECT_EQ(r->refused_by, "");
  EXPECT_EQ(r->tenant.limit_micros, 1000);
  EXPECT_EQ(r->tenant.reserved_micros, 0);  // the figures before this reservation
  ASSERT_TRUE(r->reservation.has_value());
  EXPECT_EQ(r->reservation->state, ReservationState::kReserved);
  EXPECT_EQ(r->reservation->amount_micros, 300);
  EXPECT_EQ(r->reservation->tenant, "acme");
  EXPECT_EQ(Tenant("acme").reserved_micros, 300);
  EXPECT_EQ(Tenant("acme").left_micros(), 700);
  EXPECT_EQ(Run(id).reserved_micros, 300);

  absl::StatusOr<Reservation> s = store_->SettleReservation(r->reservation->key, 120);
  ASSERT_OK(s);
  EXPECT_EQ(s->state, ReservationState::kSettled);
  EXPECT_EQ(s->cost_micros, 120);
  EXPECT_TRUE(s->finished_at.has_value());
  const BudgetFigures t = Tenant("acme");
  EXPECT_EQ(t.spent_micros, 120);
  EXPECT_EQ(t.reserved_micros, 0);
  EXPECT_EQ(t.left_micros(), 880);
  EXPECT_EQ(Run(id).spent_micros, 120);
  EXPECT_EQ(Run(id).reserved_micros, 0);

  // The first settle wins.
  absl::StatusOr<Reservation> again = store_->SettleReservation(r->reservation->key, 999);
  ASSERT_OK(again);
  EXPECT_EQ(again->cost_micros, 120);
  EXPECT_EQ(Tenant("acme").spent_micros, 120);
}

TEST_P(BudgetTest, TenantLimitRefusesAndReservesNothing) {
  ASSERT_OK(store_->SetTenantBudget("acme", 500));
  Lease lease;
  const std::string id = DriveTo(RunStatus::kRunning, &lease);
  ASSERT_OK(store_->Reserve(Request(lease, 400, "a")));
  // 100 left: 101 is refused, 100 is granted.
  absl::StatusOr<ReserveResult> over = store_->Reserve(Request(lease, 101, "b"));
  ASSERT_OK(over);
  EXPECT_FALSE(over->granted);
  EXPECT_EQ(over->refused_by, "tenant");
  EXPECT_EQ(over->tenant.reserved_micros, 400);
  EXPECT_EQ(over->tenant.left_micros(), 100);
  EXPECT_FALSE(over->reservation.has_value());
  EXPECT_EQ(Tenant("acme").reserved_micros, 400);
  absl::StatusOr<std::vector<Reservation>> all = store_->ListReservations(id);
  ASSERT_OK(all);
  EXPECT_EQ(all->size(), 1u);
  absl::StatusOr<ReserveResult> exact = store_->Reserve(Request(lease, 100, "c"));
  ASSERT_OK(exact);
  EXPECT_TRUE(exact->granted);
  EXPECT_EQ(Tenant("acme").left_micros(), 0);
}

TEST_P(BudgetTest, RunLimitRefusesWithinAnUnlimitedTenant) {
  Lease lease;
  const std::string id = DriveTo(RunStatus::kRunning, &lease);
  absl::StatusOr<ReserveResult> first =
      store_->Reserve(Request(lease, 60, "a", 1, "open", /*run_limit=*/100));
  ASSERT_OK(first);
  EXPECT_TRUE(first->granted);
  EXPECT_EQ(first->tenant.limit_micros, std::nullopt);  // tracked, not limited
  ASSERT_OK(store_->SettleReservation(first->reservation->key, 70));
  absl::StatusOr<ReserveResult> second = store_->Reserve(Request(lease, 31, "b", 1, "open"));
  ASSERT_OK(second);
  EXPECT_FALSE(second->granted);
  EXPECT_EQ(second->refused_by, "run");
  EXPECT_EQ(second->run.limit_micros, 100);
  EXPECT_EQ(second->run.spent_micros, 70);
  EXPECT_EQ(Tenant("open").spent_micros, 70);
  // The first reservation fixed the run's tenant and limit.
  absl::StatusOr<RunBudget> run = store_->GetRunBudget(id);
  ASSERT_OK(run);
  EXPECT_EQ(run->tenant, "open");
  EXPECT_EQ(run->figures.limit_micros, 100);
}

TEST_P(BudgetTest, RunWithoutTenantHasOnlyItsOwnBudget) {
  Lease lease;
  const std::string id = DriveTo(RunStatus::kRunning, &lease);
  absl::StatusOr<ReserveResult> r = store_->Reserve(Request(lease, 10, "a", 1, "", 5));
  ASSERT_OK(r);
  EXPECT_FALSE(r->granted);
  EXPECT_EQ(r->refused_by, "run");
  absl::StatusOr<std::vector<TenantBudget>> tenants = store_->ListTenantBudgets();
  ASSERT_OK(tenants);
  EXPECT_TRUE(tenants->empty());
  EXPECT_EQ(Run(id).limit_micros, 5);
  absl::StatusOr<std::optional<TenantBudget>> none = store_->GetTenantBudget("acme");
  ASSERT_OK(none);
  EXPECT_FALSE(none->has_value());
  EXPECT_THAT(store_->GetTenantBudget(""), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_P(BudgetTest, ReserveIsFencedByTheLease) {
  ASSERT_OK(store_->SetTenantBudget("acme", 1000));
  Lease lease;
  const std::string id = DriveTo(RunStatus::kRunning, &lease);
  BudgetRequest stale = Request(lease, 10);
  stale.key.lease_token = "not-the-token";
  EXPECT_THAT(store_->Reserve(stale), StatusIs(absl::StatusCode::kAborted));
  Advance(absl::Seconds(31));
  EXPECT_THAT(store_->Reserve(Request(lease, 10)), StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(Tenant("acme").reserved_micros, 0);
  BudgetRequest missing = Request(lease, 10);
  missing.key.run_id = "r_missing";
  EXPECT_THAT(store_->Reserve(missing), StatusIs(absl::StatusCode::kNotFound));
  Lease paused;
  DriveTo(RunStatus::kPaused, &paused);
  EXPECT_THAT(store_->Reserve(Request(paused, 10)), StatusIs(absl::StatusCode::kAborted));
  Lease next = Acquire(id);
  absl::StatusOr<ReserveResult> r = store_->Reserve(Request(next, 10));
  ASSERT_OK(r);
  EXPECT_TRUE(r->granted);
}

TEST_P(BudgetTest, SameKeyIsReservedOnce) {
  ASSERT_OK(store_->SetTenantBudget("acme", 1000));
  Lease lease;
  DriveTo(RunStatus::kRunning, &lease);
  ASSERT_OK(store_->Reserve(Request(lease, 300)));
  absl::StatusOr<ReserveResult> again = store_->Reserve(Request(lease, 300));
  ASSERT_OK(again);
  EXPECT_TRUE(again->granted);
  EXPECT_EQ(Tenant("acme").reserved_micros, 300);
  ASSERT_OK(store_->SettleReservation(again->reservation->key, 10));
  EXPECT_THAT(store_->Reserve(Request(lease, 300)),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

// A released reservation's call may have been answered and paid (its
// executor was killed after the answer, or stopped and settles late): it is
// charged its whole amount, its worst case, and a late settle corrects the
// charge to the real cost. The books never hold less than was paid.
TEST_P(BudgetTest, RecoveryChargesTheReleasedAmountAndALateSettleCorrectsIt) {
  ASSERT_OK(store_->SetTenantBudget("acme", 1000));
  Lease lease;
  const std::string id = DriveTo(RunStatus::kRunning, &lease);
  ASSERT_OK(store_->Reserve(Request(lease, 300, "a")));
  ASSERT_OK(store_->Reserve(Request(lease, 200, "b")));
  absl::StatusOr<ReserveResult> settled = store_->Reserve(Request(lease, 100, "c"));
  ASSERT_OK(settled);
  ASSERT_OK(store_->SettleReservation(settled->reservation->key, 50));
  absl::StatusOr<int64_t> released = store_->ReleaseReservations(id);
  ASSERT_OK(released);
  EXPECT_EQ(*released, 2);
  BudgetFigures t = Tenant("acme");
  EXPECT_EQ(t.reserved_micros, 0);
  EXPECT_EQ(t.spent_micros, 50 + 300 + 200);
  EXPECT_EQ(Run(id).reserved_micros, 0);
  EXPECT_EQ(Run(id).spent_micros, 550);
  absl::StatusOr<std::vector<Reservation>> all = store_->ListReservations(id);
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].state, ReservationState::kReleased);
  EXPECT_EQ((*all)[0].cost_micros, 300);  // what was charged
  EXPECT_EQ((*all)[1].state, ReservationState::kReleased);
  EXPECT_EQ((*all)[1].cost_micros, 200);
  EXPECT_EQ((*all)[2].state, ReservationState::kSettled);
  // Releasing again releases nothing; an unknown run has nothing.
  EXPECT_EQ(*store_->ReleaseReservations(id), 0);
  EXPECT_EQ(*store_->ReleaseReservations("r_unknown"), 0);
  // The stopped executor's call did finish: its real cost replaces the
  // charge, and a second settle changes nothing.
  const BudgetKey a{.run_id = id, .step_path = "a", .attempt = 1, .lease_token = lease.token};
  absl::StatusOr<Reservation> late = store_->SettleReservation(a, 80);
  ASSERT_OK(late);
  EXPECT_EQ(late->state, ReservationState::kSettled);
  EXPECT_EQ(late->cost_micros, 80);
  ASSERT_OK(store_->SettleReservation(a, 80));
  t = Tenant("acme");
  EXPECT_EQ(t.reserved_micros, 0);
  EXPECT_EQ(t.spent_micros, 50 + 80 + 200);
  EXPECT_EQ(Run(id).spent_micros, 330);
  // The next executor runs the step again from attempt 1: under its own
  // lease that is a new reservation.
  Advance(absl::Seconds(31));
  Lease next = Acquire(id);
  absl::StatusOr<ReserveResult> again = store_->Reserve(Request(next, 300, "a"));
  ASSERT_OK(again);
  EXPECT_TRUE(again->granted);
  EXPECT_EQ(Tenant("acme").reserved_micros, 300);
}

TEST_P(BudgetTest, SetTenantBudgetKeepsTheFigures) {
  ASSERT_OK(store_->SetTenantBudget("acme", 1000));
  Lease lease;
  DriveTo(RunStatus::kRunning, &lease);
  absl::StatusOr<ReserveResult> r = store_->Reserve(Request(lease, 300));
  ASSERT_OK(r);
  ASSERT_OK(store_->SettleReservation(r->reservation->key, 250));
  absl::StatusOr<TenantBudget> lowered = store_->SetTenantBudget("acme", 200);
  ASSERT_OK(lowered);
  EXPECT_EQ(lowered->figures.spent_micros, 250);
  EXPECT_EQ(lowered->figures.left_micros(), -50);
  EXPECT_FALSE(lowered->figures.Admits(0));
  absl::StatusOr<TenantBudget> unlimited = store_->SetTenantBudget("acme", std::nullopt);
  ASSERT_OK(unlimited);
  EXPECT_EQ(unlimited->figures.limit_micros, std::nullopt);
  EXPECT_EQ(unlimited->figures.spent_micros, 250);
  absl::StatusOr<std::vector<TenantBudget>> all = store_->ListTenantBudgets();
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].tenant, "acme");
}

TEST_P(BudgetTest, BadArgumentsAreInvalid) {
  Lease lease;
  DriveTo(RunStatus::kRunning, &lease);
  EXPECT_THAT(store_->SetTenantBudget("", 1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->SetTenantBudget("a", -1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->Reserve(Request(lease, -1)), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->Reserve(Request(lease, 1, "")), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->Reserve(Request(lease, 1, "a", 0)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  const BudgetKey key{
      .run_id = lease.run_id, .step_path = "never", .attempt = 1, .lease_token = lease.token};
  EXPECT_THAT(store_->SettleReservation(key, -5), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->SettleReservation(key, 5), StatusIs(absl::StatusCode::kNotFound));
  BudgetRequest no_token = Request(lease, 1);
  no_token.key.lease_token = "";
  EXPECT_THAT(store_->Reserve(no_token), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->GetRunBudget("r_unknown"), StatusIs(absl::StatusCode::kNotFound));
}

// Many concurrent reservations against one tenant (threads, as executors
// of several runs would): never more is reserved than the limit.
TEST_P(BudgetTest, ConcurrentReservationsNeverOverspend) {
  constexpr int kRuns = 4;
  constexpr int kPerRun = 6;
  constexpr int64_t kAmount = 100;
  constexpr int64_t kLimit = 1000;  // room for 10 of the 24
  ASSERT_OK(store_->SetTenantBudget("acme", kLimit));
  std::vector<Lease> leases(kRuns);
  for (Lease& l : leases) DriveTo(RunStatus::kRunning, &l);
  std::atomic<int> granted{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kRuns; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < kPerRun; ++k) {
        absl::StatusOr<ReserveResult> r =
            store_->Reserve(Request(leases[i], kAmount, absl::StrCat("s", k)));
        if (!r.ok()) {
          ++failed;
        } else if (r->granted) {
          ++granted;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(granted.load(), kLimit / kAmount);
  EXPECT_EQ(Tenant("acme").reserved_micros, kLimit);
  int64_t listed = 0;
  for (const Lease& l : leases) {
    absl::StatusOr<std::vector<Reservation>> all = store_->ListReservations(l.run_id);
    ASSERT_OK(all);
    for (const Reservation& r : *all) listed += r.amount_micros;
  }
  EXPECT_EQ(listed, kLimit);
}

INSTANTIATE_TEST_SUITE_P(Backends, BudgetTest, ::testing::ValuesIn(AllBackendsUnderTest()),
                         FactoryName);

}  // namespace
}  // namespace runloom::conformance
