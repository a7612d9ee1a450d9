// `runloom bench --llm`: LLM-shaped load on one worker process (issue 27,
// acceptance 2). --runs runs of a workflow of three llm steps on the fake
// provider, each call taking --llm-latency (2 s by default), are created as
// fast as they commit and executed by this process with --executors threads
// and up to --runs-in-flight runs held at once. A waiting call holds no
// thread (core/fiber.h): the wall time from the first creation to the last
// completion approaches three latencies, not runs * 3 * latency / executors.
// The fake provider's concurrency cap is set to the runs held. Reported:
// that wall time, the runs' own durations (created to finished, by
// the store's clock), peak RSS, and the process's peak thread count and runs
// held, sampled every 50 ms.
#include "runloom/engine.h"

#include "cli/bench_runs.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "core/duration.h"
#include "llm/llm_concurrency.h"
#include "llm/provider.h"
#include "steps/builtin_steps.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

namespace runloom::cli {
// A namespace of its own: the unity build puts this file beside bench.cc.
namespace llm_bench {
namespace {

// The workflow: three model calls in a row, each on the previous reply.
std::string WorkflowYaml(const std::string& latency) {
  return absl::StrCat(R"(
name: bench-llm
steps:
  - {id: draft, kind: llm, prompt: "draft", fake: {latency: )",
                      latency, R"(}}
  - {id: critique, kind: llm, prompt: "critique {{ steps.draft.output.text }}", fake: {latency: )",
                      latency, R"(}}
  - {id: final, kind: llm, prompt: "final {{ steps.critique.output.text }}", fake: {latency: )",
                      latency, R"(}}
)");
}

// The process's threads now (/proc/self/status), -1 when unreadable.
int Threads() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  }
  return -1;
}

}  // namespace
}  // namespace llm_bench

int LlmBenchCommand(const BenchFlags& f) {
  using namespace llm_bench;  // NOLINT(google-build-using-namespace): this file's helpers
  if (f.runs < 1 || f.executors < 1 || f.producers < 0) {
    return BadInput("--llm needs --runs and --executors of at least 1");
  }
  if (absl::Status s = CheckRunsInFlight(f.runs_in_flight); !s.ok()) {
    return BadInput(std::string(s.message()));
  }
  if (f.workers != 1) return BadInput("--llm measures one worker process: --workers must be 1");
  absl::StatusOr<absl::Duration> latency = ParseDuration(f.llm_latency);
  if (!latency.ok() || *latency < absl::ZeroDuration() || *latency > absl::Minutes(10)) {
    return BadInput(absl::StrCat("--llm-latency '", f.llm_latency,
                                 "' is not a duration from 0s to 10m (e.g. 2s, 500ms)"));
  }
  const int producers = f.producers == 0 ? kBenchProducersPerWorker : f.producers;
  if (absl::Status s = CheckQueueUrl(BenchBackendFlags(f)); !s.ok()) {
    return BadInput(std::string(s.message()));
  }
  absl::StatusOr<std::unique_ptr<BenchDb>> db = BenchDb::Create(BenchBackendFlags(f));
  if (!db.ok()) return Failure(std::string(db.status().message()));
  // The fake provider's concurrency cap is the runs held, its CPU and pool
  // limiters off (the bench's own writes would cut it on a busy machine), so
  // that the executors and the fibers bound the calls in flight, not the cap.
  const int held = std::max(f.executors, f.runs_in_flight);
  auto providers = LlmProviderRegistry::WithFake();
  auto caps = std::make_shared<LlmConcurrency>();
  if (absl::StatusOr<std::shared_ptr<LlmProvider>> fake = providers->Resolve("fake"); fake.ok()) {
    caps->Add("fake", fake->get(), ConcurrencyOptions{.static_cap = held,
                                                       .max_cap = held,
                                                       .pool_wait_high = 2.0,  // > 1: never
                                                       .cpu_high = 1e9});
  }
  auto registry = std::shared_ptr<StepRegistry>(StepRegistry::WithLocalBuiltins());
  registry->Register("llm", NewLlmStep(std::move(providers), std::move(caps)));
  EngineOptions eo;
  eo.executors = f.executors;
  eo.runs_in_flight = f.runs_in_flight;
  eo.registry = std::move(registry);
  eo.idle_poll = absl::Milliseconds(20);
  absl::StatusOr<std::unique_ptr<Engine>> engine = OpenBenchEngine(**db, std::move(eo));
  if (!engine.ok()) return Failure(std::string(engine.status().message()));
  Engine& e = **engine;
  absl::StatusOr<Workflow> wf =
      LoadWorkflowYaml(WorkflowYaml(runloom::FormatDuration(*latency)), "bench-llm.yaml");
  absl::StatusOr<WorkflowVersion> version =
      wf.ok() ? e.RegisterWorkflow(*wf) : absl::StatusOr<WorkflowVersion>(wf.status());
  if (!version.ok()) return Failure(std::string(version.status().message()));

  Clock* clock = RealClock();
  std::atomic<bool> done{false};
  std::atomic<int> peak_threads{0};
  std::atomic<int> peak_held{0};
  std::thread sampler([&] {
    while (!done.load()) {
      peak_threads = std::max(peak_threads.load(), Threads());
      peak_held = std::max(peak_held.load(), e.ActiveRuns());
      clock->SleepFor(absl::Milliseconds(50));
    }
  });
  const absl::Time t0 = clock->Now();
  e.Start();
  const std::vector<std::string> ids =
      BenchStartRuns(e, *version, f.runs, producers, [](int) { return nlohmann::json::object(); });
  const absl::Time created = clock->Now();
  // Every run ends within a generous bound: three calls each, at most
  // runs-in-flight at a time.
  const absl::Duration bound = absl::Seconds(60) + 3 * *latency * f.runs /
                                                       std::max(f.executors, f.runs_in_flight);
  while (e.stats().runs_finished < static_cast<int64_t>(ids.size()) && clock->Now() < t0 + bound) {
    clock->SleepFor(absl::Milliseconds(20));
  }
  const absl::Time t1 = clock->Now();
  done = true;
  sampler.join();
  std::vector<double> run_s;
  int completed = 0;
  for (const std::string& id : ids) {
    absl::StatusOr<RunRecord> r = e.GetRun(id);
    if (!r.ok() || r->status != RunStatus::kCompleted) continue;
    ++completed;
    run_s.push_back(absl::ToDoubleSeconds(r->finished_at.value_or(r->updated_at) - r->created_at));
  }
  e.Stop();
  const double wall = absl::ToDoubleSeconds(t1 - t0);
  nlohmann::json out = {
      {"runs", f.runs},
      {"completed", completed},
      {"calls_per_run", 3},
      {"llm_latency_s", absl::ToDoubleSeconds(*latency)},
      {"executors", f.executors},
      {"runs_in_flight", held},
      {"wall_s", wall},
      {"created_s", absl::ToDoubleSeconds(created - t0)},
      {"ideal_s", absl::ToDoubleSeconds(3 * *latency)},
      {"run_p50_s", BenchPercentile(run_s, 0.50)},
      {"run_p99_s", BenchPercentile(run_s, 0.99)},
      {"peak_runs_held", peak_held.load()},
      {"peak_threads", peak_threads.load()},
      {"peak_rss_mb", BenchPeakRssMb()},
      {"db", RedactedUrl((*db)->flags().db)},
  };
  if (f.json) {
    std::cout << out.dump() << "\n";
  } else {
    std::cout << absl::StrFormat(
        "%d of %d runs completed (3 model calls of %s each) in %.2f s (ideal %.1f s; created in "
        "%.2f s); run duration p50 %.2f s, p99 %.2f s\n"
        "%d executors, up to %d runs held (peak %d); peak %d threads, peak RSS %.1f MiB\n",
        completed, f.runs, runloom::FormatDuration(*latency), wall,
        absl::ToDoubleSeconds(3 * *latency), absl::ToDoubleSeconds(created - t0),
        BenchPercentile(run_s, 0.5), BenchPercentile(run_s, 0.99), f.executors,
        held, peak_held.load(), peak_threads.load(),
        BenchPeakRssMb());
  }
  engine->reset();
  return completed == f.runs ? 0 : 1;
}

}  // namespace runloom::cli
