// The backend-independent fixture of the Store/Transport conformance suite.
//
// Every backend provides a BackendUnderTest: a backend URL that the backend
// registry (BuiltinBackends(), runloom/backend.h) opens, and a time control.
// The suites in this folder are instantiated once per backend under test
// (SQLite file, SQLite :memory:, PostgreSQL, PostgreSQL + Redis Streams), so
// they test the backend exactly as the engine and the CLI open it. Time moves only when a test says so (TimeControl), so lease expiry and
// visibility timeouts are tested without sleeping.
#pragma once

#include "runloom/backend.h"
#include "runloom/clock.h"
#include "runloom/store.h"
#include "runloom/transport.h"

#include "core/ids.h"
#include "store/event_check.h"
#include "testing/status_matchers.h"

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <unistd.h>
#include <vector>

namespace runloom::conformance {

// Moves a backend's time authority (Store::Now()) forward. A backend with a
// client clock (SQLite) gets a SimulatedClock through BackendOptions; a
// backend with a server clock implements Advance by moving the time its
// server reports (PostgreSQL: the test database's runloom_now()), and
// Configure passes what it needs.
class TimeControl {
 public:
  virtual ~TimeControl() = default;
  // Sets what a backend opened under this control needs in `options`.
  virtual void Configure(BackendOptions& options) = 0;
  // Moves the backend's time forward by `d`, waking its waiters.
  virtual void Advance(absl::Duration d) = 0;
};

// Time for client-clock backends: a SimulatedClock.
class SimulatedTimeControl final : public TimeControl {
 public:
  void Configure(BackendOptions& options) override { options.clock = &clock_; }
  void Advance(absl::Duration d) override { clock_.Advance(d); }

 private:
  SimulatedClock clock_;
};

struct BackendUnderTest {
  std::string name;
  // Two Open() calls with the same location reach the same data (a file or
  // a server), as two processes would.
  bool shared_location = false;
  // The URL of the backend whose data lives at `location` (a fresh per-test
  // directory; a backend may use it or derive a schema name from it).
  std::function<std::string(const std::string& location)> url;
  // The time control of the backend at `url` (what url() returned).
  std::function<std::unique_ptr<TimeControl>(const std::string& url)> time =
      [](const std::string&) { return std::make_unique<SimulatedTimeControl>(); };
  // When set, wraps the opened store (to run a default path of the
  // interface over a real backend).
  std::function<std::unique_ptr<Store>(std::unique_ptr<Store>)> wrap_store;
};

// gtest prints the factory by name.
inline void PrintTo(const BackendUnderTest& f, std::ostream* os) { *os << f.name; }

// Every backend this build has (backends.cc): SQLite file and :memory:,
// PostgreSQL (on the test server, src/testing/test_servers.h).
std::vector<BackendUnderTest> AllBackendsUnderTest();

class ConformanceTest : public ::testing::TestWithParam<BackendUnderTest> {
 protected:
  void SetUp() override {
    // Synthetic events: this suite tests the store, not the event format.
    store_internal::TEST_SetEventCheckOnWrite(false);
    static std::atomic<int> counter{0};
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = absl::StrCat("runloom_conf_", getpid(), "_", counter++, "_", info->name());
    for (char& c : name) {
      if (c == '/') c = '_';
    }
    dir_ = std::filesystem::path(::testing::TempDir()) / name;
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    url_ = GetParam().url(dir_.string());
    time_ = GetParam().time(url_);
    absl::StatusOr<Backend> b = Open();
    ASSERT_OK(b);
    store_ = std::move(b->store);
    transport_ = std::move(b->transport);
  }

  void TearDown() override {
    store_.reset();
    transport_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Opens the backend of this test from the registry by its URL, with
  // `transport_options_`. Call again to get a second handle on the same data
  // (when shared_location).
  absl::StatusOr<Backend> Open() {
    BackendOptions o;
    o.transport = transport_options_;
    time_->Configure(o);
    absl::StatusOr<Backend> b = BuiltinBackends().Open(url_, o);
    if (b.ok() && GetParam().wrap_store) b->store = GetParam().wrap_store(std::move(b->store));
    return b;
  }

  // Reopens store_ and transport_ (e.g. with other transport options).
  void Reopen() {
    store_.reset();
    transport_.reset();
    absl::StatusOr<Backend> b = Open();
    ASSERT_OK(b);
    store_ = std::move(b->store);
    transport_ = std::move(b->transport);
  }

  // The backend's time, and moving it.
  absl::Time Now() {
    absl::StatusOr<absl::Time> now = store_->Now();
    EXPECT_OK(now);
    return now.value_or(absl::InfinitePast());
  }
  void Advance(absl::Duration d) { time_->Advance(d); }

  NewRun MakeRun(const std::string& workflow = "wf", const std::string& key = "") {
    NewRun r;
    r.id = NewRunId(Now(), gen_);
    r.workflow_name = workflow;
    r.workflow_version = 1;
    r.workflow_digest = "sha256:abc";
    r.inputs = {{"topic", "lanterns"}};
    r.inputs_digest = "sha256:def";
    r.idempotency_key = key;
    r.max_attempts = 3;
    r.phase = "fresh_generation";
    return r;
  }

  static Event Ev(const std::string& type, nlohmann::json data = nlohmann::json::object()) {
    Event e;
    e.type = type;
    e.data = std::move(data);
    return e;
  }

  // A new queued run with one "run.created" event.
  std::string Create(const std::string& workflow = "wf") {
    absl::StatusOr<CreateRunResult> r = store_->CreateRun(MakeRun(workflow), {Ev("run.created")});
    EXPECT_OK(r);
    return r.ok() ? r->run.id : "";
  }

  Lease Acquire(const std::string& run_id, absl::Duration ttl = absl::Seconds(30)) {
    absl::StatusOr<Lease> l = store_->AcquireLease(run_id, "worker-a", ttl, {Ev("run.started")});
    EXPECT_OK(l);
    return l.ok() ? *l : Lease{};
  }

  // An executor write from the current lease holder.
  RunWrite ExecutorWrite(const Lease& lease) {
    RunWrite w;
    w.run_id = lease.run_id;
    w.party = Party::kExecutor;
    w.lease_token = lease.token;
    return w;
  }

  // A run in status `s`. For running, `lease` receives the live lease.
  std::string DriveTo(RunStatus s, Lease* lease = nullptr) {
    std::string id = Create();
    if (s == RunStatus::kQueued) return id;
    Lease l = Acquire(id);
    if (lease != nullptr) *lease = l;
    if (s == RunStatus::kRunning) return id;
    RunWrite w = ExecutorWrite(l);
    w.new_status = s;
    if (s == RunStatus::kWaiting) w.wake_at = Now() + absl::Minutes(1);
    EXPECT_OK(store_->Commit(w)) << "driving " << id << " to " << ToString(s);
    return id;
  }

  RunStatus StatusOf(const std::string& run_id) {
    absl::StatusOr<RunRecord> r = store_->GetRun(run_id);
    EXPECT_OK(r);
    return r.ok() ? r->status : RunStatus::kQueued;
  }

  std::vector<QueueMessage> ClaimAll(const std::string& consumer = "c1",
                                     absl::Duration visibility = absl::Seconds(60)) {
    absl::StatusOr<std::vector<QueueMessage>> m = transport_->Claim(consumer, 1000, visibility);
    EXPECT_OK(m);
    return m.ok() ? *m : std::vector<QueueMessage>{};
  }

  std::filesystem::path dir_;
  std::string url_;  // the backend's URL (one per test; shared by every Open())
  std::unique_ptr<TimeControl> time_;
  TransportOptions transport_options_;
  absl::BitGen gen_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Transport> transport_;
};

inline std::string FactoryName(const ::testing::TestParamInfo<BackendUnderTest>& info) {
  return info.param.name;
}

}  // namespace runloom::conformance
