// The backend-independent fixture of the Store/Transport conformance suite.
//
// Every backend provides a BackendFactory; the suites in this folder are
// instantiated once per factory (SQLite file, SQLite :memory:; PostgreSQL and
// Redis later). Time is a SimulatedClock, so lease expiry and visibility
// timeouts are tested without sleeping.
#pragma once

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

struct Backend {
  std::unique_ptr<Store> store;
  std::unique_ptr<Transport> transport;
};

struct BackendFactory {
  std::string name;
  // Two Open() calls with the same location reach the same data (a file or
  // a server), as two processes would.
  bool shared_location = false;
  // Opens the backend whose data lives at `location` (a fresh per-test
  // directory; a backend may use it or derive a schema name from it).
  std::function<absl::StatusOr<Backend>(const std::string& location, Clock* clock)> open;
};

// gtest prints the factory by name.
inline void PrintTo(const BackendFactory& f, std::ostream* os) { *os << f.name; }

// Every backend this build has (backends.cc): SQLite file and :memory:.
std::vector<BackendFactory> AllBackendFactories();

class ConformanceTest : public ::testing::TestWithParam<BackendFactory> {
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

  absl::StatusOr<Backend> Open() { return GetParam().open(dir_.string(), &clock_); }

  NewRun MakeRun(const std::string& workflow = "wf", const std::string& key = "") {
    NewRun r;
    r.id = NewRunId(clock_.Now(), gen_);
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
  SimulatedClock clock_;
  absl::BitGen gen_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Transport> transport_;
};

inline std::string FactoryName(const ::testing::TestParamInfo<BackendFactory>& info) {
  return info.param.name;
}

}  // namespace runloom::conformance
