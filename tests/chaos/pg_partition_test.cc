// Issue 9, acceptance 3: a network partition between one worker and
// PostgreSQL. Worker A reaches the database through a TcpProxy the test
// cuts while A runs a step; worker B reaches it directly. A stops executing
// once its lease cannot be renewed, B takes the run over and finishes it,
// and after the proxy heals A's late writes (with its old lease token) are
// refused by the fence, so nothing is recorded twice.
#include "runloom/engine.h"
#include "runloom/postgres.h"

#include "testing/capturing_logger.h"
#include "testing/status_matchers.h"
#include "testing/tcp_proxy.h"
#include "testing/test_servers.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace runloom::chaos {
namespace {

constexpr absl::Duration kLeaseTtl = absl::Seconds(1);
constexpr absl::Duration kWait =
    absl::Seconds(20);  // bound of every wait; never reached when green

// Every step execution of both workers, in order: (worker, step id).
class Ledger {
 public:
  void Append(const std::string& worker, const std::string& step) {
    runloom::MutexLock l(&mu_);
    entries_.emplace_back(worker, step);
  }
  int Count(const std::string& worker, const std::string& step) const {
    runloom::MutexLock l(&mu_);
    int n = 0;
    for (const auto& [w, s] : entries_) n += w == worker && s == step ? 1 : 0;
    return n;
  }

 private:
  mutable runloom::Mutex mu_;
  std::vector<std::pair<std::string, std::string>> entries_ ABSL_GUARDED_BY(mu_);
};

// One worker's step kind: appends to the ledger, outputs the worker's name,
// and on a step with `block: true` waits until the test releases it or the
// execution is stopped (a lost lease stops it).
class LedgerKind final : public StepKind {
 public:
  LedgerKind(std::string worker, Ledger* ledger) : worker_(std::move(worker)), ledger_(ledger) {}
  absl::Status Validate(const StepDef&) const override { return absl::OkStatus(); }
  absl::StatusOr<StepOutput> Execute(StepContext& ctx, const nlohmann::json& config) override {
    ledger_->Append(worker_, config.value("name", ""));
    if (config.value("block", false)) {
      entered.Notify();
      while (!release.HasBeenNotified()) {
        if (ctx.Stopping()) {
          stopped.Notify();
          return absl::CancelledError("stopped");
        }
        ctx.SleepUntil(ctx.clock()->Now() + absl::Milliseconds(5));
      }
    }
    StepOutput out;
    out.output = {{"worker", worker_}};
    return out;
  }
  runloom::Notification entered;
  runloom::Notification stopped;
  runloom::Notification release;

 private:
  const std::string worker_;
  Ledger* const ledger_;
};

struct Worker {
  std::shared_ptr<LedgerKind> kind;
  testing::CapturingLogger log;
  std::unique_ptr<Engine> engine;
};

// Opens worker `name` on `url` (through the proxy or not).
void OpenWorker(const std::string& name, const std::string& url, Ledger* ledger, Worker& w) {
  PostgresOptions po;
  // Fail fast while cut off, so the lease keeper sees the failures in time.
  po.acquire_timeout = absl::Milliseconds(300);
  po.connect_timeout = absl::Seconds(1);
  po.logger = &w.log;
  absl::StatusOr<Backend> backend = OpenPostgres(url, po);
  ASSERT_OK(backend);
  w.kind = std::make_shared<LedgerKind>(name, ledger);
  std::shared_ptr<StepRegistry> registry = StepRegistry::WithBuiltins();
  registry->Register("ledger", w.kind);
  EngineOptions eo;
  eo.registry = registry;
  eo.owner = name;
  eo.executors = 1;
  eo.lease_ttl = kLeaseTtl;
  eo.sweep_interval = absl::Milliseconds(100);
  eo.idle_poll = absl::Milliseconds(50);
  eo.drain_timeout = absl::Seconds(1);
  eo.env.logger = &w.log;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Open(eo, *std::move(backend));
  ASSERT_OK(engine);
  w.engine = *std::move(engine);
}

// `url` (postgres://user@127.0.0.1:PORT/db) with another port.
std::string WithPort(const std::string& url, int port) {
  const size_t colon = url.rfind(':');
  const size_t slash = url.find('/', colon);
  return absl::StrCat(url.substr(0, colon + 1), port, url.substr(slash));
}

int PortOf(const std::string& url) {
  const size_t colon = url.rfind(':');
  int port = 0;
  EXPECT_TRUE(absl::SimpleAtoi(url.substr(colon + 1, url.find('/', colon) - colon - 1), &port))
      << url;
  return port;
}

TEST(PgPartition, CutOffWorkerStopsOtherFinishesLateWritesAreFenced) {
  absl::StatusOr<std::string> url = testing::CreateTestPostgresDatabase("partition");
  ASSERT_OK(url);
  absl::StatusOr<std::unique_ptr<testing::TcpProxy>> proxy =
      testing::TcpProxy::Start("127.0.0.1", PortOf(*url));
  ASSERT_OK(proxy);
  Ledger ledger;
  Worker a;
  Worker b;
  ASSERT_NO_FATAL_FAILURE(OpenWorker("worker-a", WithPort(*url, (*proxy)->port()), &ledger, a));
  ASSERT_NO_FATAL_FAILURE(OpenWorker("worker-b", *url, &ledger, b));

  absl::StatusOr<Workflow> wf = LoadWorkflowYaml(R"(
name: partitioned
steps:
  - {id: s1, kind: ledger, name: s1}
  - {id: s2, kind: ledger, name: s2, block: true}
  - {id: s3, kind: ledger, name: s3}
)",
                                                 "partitioned.yaml");
  ASSERT_OK(wf);
  absl::StatusOr<CreateRunResult> started = a.engine->StartRun({.workflow = *wf});
  ASSERT_OK(started);
  const std::string run_id = started->run.id;

  // A takes the run and is inside s2 (s1 is recorded) before B starts.
  a.engine->Start();
  ASSERT_TRUE(a.kind->entered.WaitForNotificationWithTimeout(kWait));
  absl::StatusOr<RunRecord> held = b.engine->store()->GetRun(run_id);
  ASSERT_OK(held);
  ASSERT_EQ(held->lease_owner, "worker-a");
  const std::string a_token = held->lease_token;
  b.engine->Start();

  // The partition: A's renewals fail; once its lease has expired A stops
  // the step in flight and starts nothing more.
  (*proxy)->Cut();
  ASSERT_TRUE(a.kind->stopped.WaitForNotificationWithTimeout(kWait));
  EXPECT_GE(a.log.Count(LogLevel::kWarning, "lease renewal failed, stopping the execution"), 1);

  // B's sweeper finds the expired lease (on the server's clock) and B runs
  // the run from s2, the step that was in flight.
  ASSERT_TRUE(b.kind->entered.WaitForNotificationWithTimeout(kWait));
  absl::StatusOr<RunRecord> taken = b.engine->store()->GetRun(run_id);
  ASSERT_OK(taken);
  EXPECT_EQ(taken->lease_owner, "worker-b");
  EXPECT_EQ(taken->status, RunStatus::kRunning);

  // Heal while B holds the run: A's late writes go through the proxy again
  // and the fence refuses every one of them.
  (*proxy)->Heal();
  const int forwarded_before_heal = (*proxy)->forwarded();
  Store* a_store = a.engine->store();
  EXPECT_THAT(a_store->RenewLease(run_id, a_token, kLeaseTtl),
              testing::StatusIs(absl::StatusCode::kAborted));
  RunWrite late;
  late.run_id = run_id;
  late.party = Party::kExecutor;
  late.lease_token = a_token;
  StepRecord s2;
  s2.run_id = run_id;
  s2.path = "s2";
  s2.step_id = "s2";
  s2.kind = "ledger";
  s2.output = {{"worker", "worker-a"}};
  s2.started_at = s2.finished_at = a_store->Now();
  late.steps = {s2};
  const auto held_by_b =
      testing::StatusIs(absl::StatusCode::kAborted, ::testing::HasSubstr("held by 'worker-b'"));
  EXPECT_THAT(a_store->Commit(late), held_by_b);
  late.new_status = RunStatus::kCompleted;
  EXPECT_THAT(a_store->Commit(late), held_by_b);

  EXPECT_GT((*proxy)->forwarded(), forwarded_before_heal);  // the late writes came through it
  b.kind->release.Notify();
  absl::StatusOr<RunRecord> done = b.engine->AwaitRun(run_id, RealClock()->Now() + kWait);
  ASSERT_OK(done);
  EXPECT_EQ(done->status, RunStatus::kCompleted);
  // After the end too.
  late.new_status.reset();
  EXPECT_THAT(a_store->Commit(late),
              testing::StatusIs(absl::StatusCode::kAborted, ::testing::HasSubstr("is completed")));

  // One record per step: s1 by A, s2 and s3 by B; the only step that ran
  // twice is s2, the one in flight at the cut (its run on A was stopped and
  // never recorded); A never started s3.
  absl::StatusOr<std::vector<StepRecord>> steps =
      b.engine->store()->ListSteps(run_id, std::nullopt);
  ASSERT_OK(steps);
  std::map<std::string, std::string> by;
  for (const StepRecord& s : *steps) {
    EXPECT_EQ(by.count(s.path), 0u) << s.path << " recorded twice";
    by[s.path] = s.output.value("worker", "");
  }
  EXPECT_EQ(by, (std::map<std::string, std::string>{
                    {"s1", "worker-a"}, {"s2", "worker-b"}, {"s3", "worker-b"}}));
  EXPECT_EQ(ledger.Count("worker-a", "s1"), 1);
  EXPECT_EQ(ledger.Count("worker-b", "s1"), 0);
  EXPECT_EQ(ledger.Count("worker-a", "s2"), 1);
  EXPECT_EQ(ledger.Count("worker-b", "s2"), 1);
  EXPECT_EQ(ledger.Count("worker-a", "s3"), 0);
  EXPECT_EQ(ledger.Count("worker-b", "s3"), 1);

  absl::StatusOr<std::vector<Event>> events = b.engine->store()->ListEvents(run_id, 0, 10000);
  ASSERT_OK(events);
  std::map<std::string, int> types;
  for (const Event& e : *events) ++types[e.type];
  EXPECT_EQ(types["run.finished"], 1);
  EXPECT_EQ(types["step.succeeded"], 3);
  EXPECT_GE(a.engine->stats().leases_lost, 1);
  EXPECT_EQ(a.engine->stats().runs_finished, 0);
  EXPECT_EQ(b.engine->stats().runs_finished, 1);
  EXPECT_GE((*proxy)->refused(), 1);  // A tried to reconnect while cut off

  // What happened, for the log of the test run.
  for (const testing::CapturingLogger::Line& line : a.log.lines()) {
    if (line.level >= LogLevel::kInfo) std::cerr << "worker-a: " << line.message << "\n";
  }
  std::cerr << "proxy: " << (*proxy)->forwarded() << " connections forwarded, "
            << (*proxy)->refused() << " refused while cut\n";
  a.engine->Stop();
  b.engine->Stop();
}

}  // namespace
}  // namespace runloom::chaos
