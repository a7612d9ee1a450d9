// Store faults swept over N: the N-th store write of a run fails, either
// before it reaches the database (nothing written) or after it committed (the
// caller sees an error for a write that happened: an indeterminate commit).
// A third sweep keeps every write from the N-th on failing until the store
// heals. The engine gives the run up, the lease expires, the sweeper
// re-queues it and an executor resumes it. Every time the same invariants hold:
//   - the run ends completed, with exactly one succeeded record and one
//     step.succeeded event per step;
//   - a step runs again only when its record was lost with the fault (at most
//     one extra execution per fault), never after its record was committed;
//   - leases are taken one after the other (run.started attempts 1, 2, ...),
//     and event sequence numbers have no gap.
#include "runloom/engine.h"
#include "runloom/store.h"

#include "testing/engine_test_util.h"
#include "testing/status_matchers.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include <atomic>
#include <map>
#include <string>

namespace runloom {
namespace {

enum class Fault {
  kBeforeWrite,  // the N-th write fails without reaching the database
  kAfterWrite,   // the N-th write commits, then reports an error
  kFromHereOn,   // every write from the N-th on fails (no effect) until Heal()
};

std::string FaultName(Fault f) {
  switch (f) {
    case Fault::kBeforeWrite:
      return "before";
    case Fault::kAfterWrite:
      return "after";
    case Fault::kFromHereOn:
      return "from-here-on";
  }
  return "?";
}

// Fails the `fail_at`-th lease or fenced write (1-based; 0 = never) with
// kUnavailable, as `fault` says, and counts the calls.
class FaultyStore final : public StoreWrapper {
 public:
  FaultyStore(std::unique_ptr<Store> target, int fail_at, Fault fault)
      : StoreWrapper(std::move(target)), fail_at_(fail_at), fault_(fault) {}

  using StoreWrapper::AcquireLease;
  absl::StatusOr<Lease> AcquireLease(LeaseRequest request) override {
    return Maybe([&] { return inner().AcquireLease(std::move(request)); });
  }
  absl::StatusOr<RunRecord> RenewLease(const std::string& run_id, const std::string& token,
                                       absl::Duration ttl) override {
    return Maybe([&] { return inner().RenewLease(run_id, token, ttl); });
  }
  absl::Status Commit(const RunWrite& write) override {
    return Maybe([&] { return inner().Commit(write); });
  }
  absl::Status Enqueue(const std::string& run_id, std::vector<Event> events) override {
    return Maybe([&] { return inner().Enqueue(run_id, std::move(events)); });
  }

  int calls() const { return calls_.load(); }
  bool fired() const { return fired_.load(); }
  void Heal() { healed_ = true; }

 private:
  template <typename F>
  auto Maybe(F&& call) -> decltype(call()) {
    const int n = ++calls_;
    const bool fail = fault_ == Fault::kFromHereOn
                          ? fail_at_ > 0 && n >= fail_at_ && !healed_.load()
                          : n == fail_at_;
    if (!fail) return call();
    fired_ = true;
    if (fault_ == Fault::kAfterWrite) (void)call();
    return absl::UnavailableError("injected store fault");
  }

  const int fail_at_;
  const Fault fault_;
  std::atomic<int> calls_{0};
  std::atomic<bool> fired_{false};
  std::atomic<bool> healed_{false};
};

constexpr char kWorkflow[] = R"(
name: chaos
steps:
  - {id: a, kind: count}
  - {id: b, kind: count}
  - {id: c, kind: count}
)";
constexpr int kSteps = 3;
constexpr absl::Duration kLeaseTtl = absl::Seconds(10);

struct Outcome {
  int store_calls = 0;  // lease and fenced writes made
  bool fired = false;
};

// Runs one run of kWorkflow to its end with the fault armed at `fail_at`,
// checking the invariants. Returns what the store saw.
Outcome RunWithFault(int fail_at, Fault fault) {
  SCOPED_TRACE(absl::StrCat("fault ", FaultName(fault), " write #", fail_at));
  SimulatedClock clock;
  EngineOptions opts;
  opts.lease_ttl = kLeaseTtl;
  opts.enable_sweeper = false;  // the test sweeps, on the simulated clock
  FaultyStore* faulty = nullptr;
  Harness h(opts, &clock, [&](std::unique_ptr<Store> real) {
    auto wrapped = std::make_unique<FaultyStore>(std::move(real), fail_at, fault);
    faulty = wrapped.get();
    return wrapped;
  });
  auto wf = LoadWorkflowYaml(kWorkflow, "chaos.yaml");
  EXPECT_OK(wf);
  auto created = h.engine->StartRun({.workflow = *wf});
  EXPECT_OK(created);
  if (!created.ok()) return {};
  const std::string id = created->run.id;

  RunRecord run;
  for (int round = 0; round < 6; ++round) {
    (void)h.engine->ExecuteRun(id);  // may fail: the fault stops the execution
    faulty->Heal();                  // a lasting fault ends with the first execution
    auto read = h.engine->store()->GetRun(id);
    EXPECT_OK(read);
    run = *read;
    if (IsTerminal(run.status)) break;
    // The abandoned lease expires; the sweeper re-queues the run.
    clock.Advance(kLeaseTtl + absl::Seconds(1));
    EXPECT_OK(h.engine->SweepOnce());
  }
  h.engine->Stop();

  EXPECT_EQ(run.status, RunStatus::kCompleted) << run.error;
  auto steps = h.Steps(id);
  EXPECT_EQ(steps.size(), static_cast<size_t>(kSteps));
  for (const auto& [path, rec] : steps) {
    EXPECT_EQ(rec.state, StepState::kSucceeded) << path;
  }
  std::map<std::string, int> succeeded;
  std::vector<int> attempts;
  int64_t seq = 0;
  for (const Event& e : h.Events(id)) {
    EXPECT_EQ(e.seq, ++seq) << "event sequence has a gap at " << e.type;
    if (e.type == "step.succeeded") ++succeeded[e.data.value("path", "")];
    if (e.type == "run.started") attempts.push_back(e.data.value("attempt", 0));
  }
  for (const char* path : {"a", "b", "c"}) EXPECT_EQ(succeeded[path], 1) << path;
  for (size_t i = 0; i < attempts.size(); ++i) {
    EXPECT_EQ(attempts[i], static_cast<int>(i) + 1) << "leases out of order";
  }
  const int faults = faulty->fired() ? 1 : 0;
  EXPECT_GE(h.kind->count.load(), kSteps);
  EXPECT_LE(h.kind->count.load(), kSteps + faults) << "a step ran again after its record";
  EXPECT_LE(static_cast<int>(attempts.size()), 1 + faults);
  return {faulty->calls(), faulty->fired()};
}

TEST(Chaos, EveryStoreWriteOfARunFailingOnceStillCompletesItExactlyOnce) {
  const Outcome clean = RunWithFault(0, Fault::kBeforeWrite);
  ASSERT_FALSE(clean.fired);
  ASSERT_GE(clean.store_calls, kSteps + 1) << "lease + step starts + terminal write";
  for (Fault fault : {Fault::kBeforeWrite, Fault::kAfterWrite, Fault::kFromHereOn}) {
    for (int n = 1; n <= clean.store_calls; ++n) {
      const Outcome o = RunWithFault(n, fault);
      EXPECT_TRUE(o.fired) << "write #" << n << " was never made";
      if (::testing::Test::HasFailure()) return;  // one sweep point is enough to read
    }
  }
}

}  // namespace
}  // namespace runloom
