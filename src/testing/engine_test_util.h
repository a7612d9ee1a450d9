// Shared fixtures for engine tests: a real SQLite store in a temp dir, the
// built-in step kinds, and a "count" kind that counts executions and can
// block until the test releases it.
#pragma once

#include "runloom/engine.h"
#include "runloom/mutex.h"
#include "runloom/sqlite.h"

#include "testing/status_matchers.h"

#include "gtest/gtest.h"

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <sched.h>
#include <string>
#include <unistd.h>
#include <vector>

namespace runloom {

// A workflow paused at an approval gate between two "count" steps, with a
// revision phase: the API's and the MCP server's tests decide on it.
inline constexpr char kGatedYaml[] = R"(
name: gated
steps:
  - id: draft
    kind: count
    phase: drafting
  - id: review
    kind: approval
    phase: review
    proposal: {text: "draft {{ steps.draft.output.n }}"}
    revision_phase: drafting
  - id: after
    kind: count
    phase: finish
)";

inline std::string TempDb() {
  static std::atomic<int> n{0};
  auto dir = std::filesystem::temp_directory_path() /
             ("runloom-engine-test-" + std::to_string(getpid()) + "-" + std::to_string(n++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return (dir / "t.db").string();
}

// A step kind that counts executions and can block until released.
class CountingKind final : public StepKind {
 public:
  absl::Status Validate(const StepDef&) const override { return absl::OkStatus(); }
  absl::StatusOr<StepOutput> Execute(StepContext& ctx, const nlohmann::json& config) override {
    int n = ++count;
    if (config.value("block", false)) {
      entered.Notify();
      // Waits in real time, not on ctx's clock: on a SimulatedClock that
      // nobody advances any more, a sleep that began after the test's last
      // Advance would never end, and the release would go unseen (a rare
      // hang of Engine.StaleExecutorIsFencedAndStops under ASan).
      while (!release.WaitForNotificationWithTimeout(absl::Milliseconds(5))) {
        if (ctx.Stopping()) return absl::CancelledError("stopped");
      }
    }
    StepOutput out;
    out.output = {{"n", n},
                  {"echo", config.value("echo", nlohmann::json(nullptr))},
                  {"sched_policy", sched_getscheduler(0)}};  // the executing thread's
    return out;
  }
  std::atomic<int> count{0};
  runloom::Notification entered;
  runloom::Notification release;
};

// An engine on a new SQLite file, with `opts` as the caller set them (its
// registry, for instance); null (and a test failure) when it cannot open.
inline std::unique_ptr<Engine> OpenTestEngine(EngineOptions opts) {
  auto backend = OpenSqlite(TempDb(), {});
  EXPECT_OK(backend);
  if (!backend.ok()) return nullptr;
  auto engine = Engine::Open(std::move(opts), *std::move(backend));
  EXPECT_OK(engine);
  return engine.ok() ? *std::move(engine) : nullptr;
}

// One of several "processes" sharing the SQLite file `path`: an engine
// whose store's time authority is `clock`, with no sweeper, so the test
// decides who sweeps and fires schedules. Null (and a test failure) when it
// cannot open.
inline std::unique_ptr<Engine> OpenSharedTestEngine(const std::string& path, Clock* clock) {
  SqliteOptions so;
  so.clock = clock;
  absl::StatusOr<Backend> backend = OpenSqlite(path, so);
  EXPECT_OK(backend);
  if (!backend.ok()) return nullptr;
  EngineOptions opts;
  opts.enable_sweeper = false;
  absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Open(std::move(opts), *std::move(backend));
  EXPECT_OK(e);
  return e.ok() ? *std::move(e) : nullptr;
}

struct Harness {
  // `wrap_store`, when set, wraps the SQLite store the engine gets (tests
  // inject races with a StoreWrapper); `wrap_transport` likewise wraps its
  // transport. `clock` is the store's, which the engine uses unless
  // opts.env.clock is set.
  using WrapStore = std::function<std::unique_ptr<Store>(std::unique_ptr<Store>)>;
  using WrapTransport = std::function<std::unique_ptr<Transport>(std::unique_ptr<Transport>)>;
  explicit Harness(EngineOptions opts = {}, Clock* clock = nullptr,
                   const WrapStore& wrap_store = nullptr,
                   const WrapTransport& wrap_transport = nullptr) {
    kind = std::make_shared<CountingKind>();
    // The built-ins, and any kind the test registered in opts.registry.
    if (opts.registry == nullptr) opts.registry = StepRegistry::WithBuiltins();
    opts.registry->Register("count", kind);
    SqliteOptions so;
    so.clock = clock;
    path = TempDb();
    auto backend = OpenSqlite(path, so);
    EXPECT_OK(backend);
    if (backend.ok() && wrap_store) backend->store = wrap_store(std::move(backend->store));
    if (backend.ok() && wrap_transport) {
      backend->transport = wrap_transport(std::move(backend->transport));
    }
    auto e = Engine::Open(std::move(opts), *std::move(backend));
    EXPECT_OK(e);
    engine = *std::move(e);
  }

  RunRecord RunYaml(const std::string& yaml, nlohmann::json inputs = nlohmann::json::object()) {
    auto wf = LoadWorkflowYaml(yaml, "test.yaml");
    EXPECT_OK(wf);
    StartRunRequest req;
    req.workflow = *wf;
    req.inputs = std::move(inputs);
    auto started = engine->StartRun(req);
    EXPECT_OK(started);
    auto done = engine->ExecuteRun(started->run.id);
    EXPECT_OK(done);
    return *done;
  }

  // The run's row as the store has it now (an empty record on an error).
  RunRecord Run(const std::string& run_id) {
    absl::StatusOr<RunRecord> r = engine->store()->GetRun(run_id);
    EXPECT_OK(r);
    return r.ok() ? *r : RunRecord{};
  }

  std::map<std::string, StepRecord> Steps(const std::string& run_id) {
    std::map<std::string, StepRecord> out;
    auto steps = engine->store()->ListSteps(run_id, std::nullopt);
    EXPECT_OK(steps);
    for (auto& s : *steps) out[s.path] = s;
    return out;
  }

  std::vector<Event> Events(const std::string& run_id) {
    auto evs = engine->store()->ListEvents(run_id, 0, 10000);
    EXPECT_OK(evs);
    return *evs;
  }

  std::shared_ptr<CountingKind> kind;
  std::string path;
  std::unique_ptr<Engine> engine;
};

// Waits (real time, bounded) until the run's newest event has type `type`.
inline void AwaitLastEvent(Store* store, const std::string& run_id, const std::string& type) {
  for (int i = 0; i < 1000; ++i) {
    auto evs = store->ListEvents(run_id, 0, 1000);
    if (evs.ok() && !evs->empty() && evs->back().type == type) return;
    RealClock()->SleepFor(absl::Milliseconds(5));
  }
}

// The llm steps of `run_id` that succeeded; each other llm step fails the
// test with its path and error.
inline int SucceededLlmSteps(Store* store, const std::string& run_id) {
  absl::StatusOr<std::vector<StepRecord>> steps = store->ListSteps(run_id, std::nullopt);
  EXPECT_OK(steps);
  if (!steps.ok()) return -1;
  int ok = 0;
  for (const StepRecord& s : *steps) {
    if (s.kind != "llm") continue;
    EXPECT_EQ(s.state, StepState::kSucceeded) << s.path << ": " << s.error;
    ok += s.state == StepState::kSucceeded ? 1 : 0;
  }
  return ok;
}

}  // namespace runloom
