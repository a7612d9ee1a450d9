// `runloom bench --fairness`: fair dequeue across concurrency keys (issue
// 23, acceptance 4). --runs runs of key A are queued first, then
// kSmallRuns of key B, all of one workflow with `concurrency:` (each key's
// limit the executors, so either key alone could fill them); then the
// executors start. For each B run the bench reports its start latency (its
// run.started event against the executors' start, both by the store's
// clock) and how many A runs started before it. The same is measured again
// with the key left out of the workflow (one FIFO queue) as the baseline.
// Comparing --runs 1000 with --runs 10000 shows whether B's start grows
// with A's backlog. Every time is read back from the durable events.
#include "runloom/engine.h"

#include "cli/bench_runs.h"
#include "cli/cli_common.h"
#include "cli/commands.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <algorithm>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace runloom::cli {
// A namespace of its own: the unity build puts this file beside bench.cc.
namespace fairness_bench {
namespace {

// B's runs, queued after A's backlog.
constexpr int kSmallRuns = 10;
// Each run's work: long enough that A's backlog is still queued when B's
// runs are claimed, as in a service whose steps wait on models and tools.
constexpr char kWork[] = "20ms";

std::string WorkflowYaml(bool keyed, int limit) {
  return absl::StrCat("name: bench-fair", keyed ? "" : "-fifo", "\n",
                      keyed ? absl::StrCat("concurrency: {key: \"{{ inputs.tenant }}\", limit: ",
                                           limit, "}\n")
                            : std::string(),
                      "inputs:\n  tenant: {type: string}\n"
                      "steps:\n  - {id: work, kind: sleep, duration: ",
                      kWork, "}\n");
}

struct Sample {
  std::vector<double> b_start_ms;  // each B run's start, after the executors started
  std::vector<int> a_before;       // A runs started before each B run
  double queue_s = 0;              // creating the backlog
  bool ok = false;
};

// When `run_id` was first leased (its first run.started), by the store's clock.
std::optional<absl::Time> StartedAt(Engine& e, const std::string& run_id) {
  absl::StatusOr<std::vector<Event>> evs = e.ListEvents(run_id, 0, 10);
  if (!evs.ok()) return std::nullopt;
  for (const Event& ev : *evs) {
    if (ev.type == "run.started") return ev.at;
  }
  return std::nullopt;
}

// One measurement: on a fresh temp file, or on the database of --db, whose
// runs left unfinished are cancelled afterwards (an admin reset).
Sample MeasureOnce(const BenchFlags& f, bool keyed, std::string* error) {
  Sample m;
  absl::StatusOr<std::unique_ptr<BenchDb>> db = BenchDb::Create(BenchBackendFlags(f));
  if (!db.ok()) {
    *error = std::string(db.status().message());
    return m;
  }
  EngineOptions eo;
  eo.executors = f.executors;
  eo.idle_poll = absl::Milliseconds(20);
  auto engine = OpenBenchEngine(**db, std::move(eo));
  if (!engine.ok()) {
    *error = std::string(engine.status().message());
    return m;
  }
  Engine& e = **engine;
  absl::StatusOr<Workflow> wf = LoadWorkflowYaml(WorkflowYaml(keyed, f.executors), "bench.yaml");
  absl::StatusOr<WorkflowVersion> v =
      wf.ok() ? e.RegisterWorkflow(*wf) : absl::StatusOr<WorkflowVersion>(wf.status());
  if (!v.ok()) {
    *error = std::string(v.status().message());
    return m;
  }
  const int producers = f.producers == 0 ? kBenchProducersPerWorker : f.producers;
  Clock* clock = RealClock();
  const absl::Time created_from = clock->Now();
  const std::vector<std::string> a = BenchStartRuns(
      e, *v, f.runs, producers, [](int) { return nlohmann::json{{"tenant", "A"}}; });
  const std::vector<std::string> b = BenchStartRuns(
      e, *v, kSmallRuns, 1, [](int) { return nlohmann::json{{"tenant", "B"}}; });
  m.queue_s = absl::ToDoubleSeconds(clock->Now() - created_from);
  absl::StatusOr<absl::Time> t0 = e.Now();
  e.Start();
  // Until every B run finished (or a bound that only a stall reaches).
  const absl::Time give_up = clock->Now() + absl::Seconds(60) + absl::Milliseconds(30) * f.runs;
  while (clock->Now() < give_up) {
    int done = 0;
    for (const std::string& id : b) {
      absl::StatusOr<RunRecord> r = e.GetRun(id);
      done += r.ok() && IsTerminal(r->status) ? 1 : 0;
    }
    if (done == static_cast<int>(b.size())) break;
    clock->SleepFor(absl::Milliseconds(10));
  }
  e.Stop();
  std::vector<absl::Time> a_started;
  for (const std::string& id : a) {
    absl::StatusOr<RunRecord> r = e.GetRun(id);
    if (!r.ok() || r->attempts == 0) continue;
    if (std::optional<absl::Time> at = StartedAt(e, id); at.has_value()) a_started.push_back(*at);
  }
  std::sort(a_started.begin(), a_started.end());
  for (const std::string& id : b) {
    std::optional<absl::Time> at = StartedAt(e, id);
    if (!at.has_value() || !t0.ok()) continue;
    m.b_start_ms.push_back(absl::ToDoubleMilliseconds(*at - *t0));
    m.a_before.push_back(static_cast<int>(
        std::lower_bound(a_started.begin(), a_started.end(), *at) - a_started.begin()));
  }
  m.ok = static_cast<int>(a.size()) == f.runs && static_cast<int>(b.size()) == kSmallRuns &&
         static_cast<int>(m.b_start_ms.size()) == kSmallRuns;
  if (!m.ok) *error = "not every run was created and every B run started";
  (void)e.ResetAll("bench --fairness");  // what it left queued; on a temp file, moot
  engine->reset();
  return m;
}

nlohmann::json SampleJson(Sample& m) {
  std::vector<double> before(m.a_before.begin(), m.a_before.end());
  return {{"queue_s", m.queue_s},
          {"b_start_p50_ms", BenchPercentile(m.b_start_ms, 0.5)},
          {"b_start_max_ms", BenchPercentile(m.b_start_ms, 1.0)},
          {"a_started_before_b_max", BenchPercentile(before, 1.0)},
          {"a_started_before_b_p50", BenchPercentile(before, 0.5)}};
}

}  // namespace
}  // namespace fairness_bench

int FairnessBenchCommand(const BenchFlags& f) {
  using namespace fairness_bench;  // NOLINT(google-build-using-namespace): this file's helpers
  if (f.runs < 1 || f.executors < 1 || f.producers < 0) {
    return BadInput("--fairness needs --runs (key A's backlog) and --executors of at least 1");
  }
  if (f.workers != 1) return BadInput("--fairness measures one process: --workers must be 1");
  if (f.waiting) return BadInput("--fairness and --waiting are different benchmarks: give one");
  if (absl::Status s = CheckQueueUrl(BenchBackendFlags(f)); !s.ok()) {
    return BadInput(std::string(s.message()));
  }
  std::string error;
  Sample fair = MeasureOnce(f, /*keyed=*/true, &error);
  if (!fair.ok) return Failure(absl::StrCat("fair run: ", error));
  Sample fifo = MeasureOnce(f, /*keyed=*/false, &error);
  if (!fifo.ok) return Failure(absl::StrCat("FIFO run: ", error));
  nlohmann::json out = {{"db", f.db.empty() ? "a fresh SQLite file" : RedactedUrl(f.db)},
                        {"a_runs", f.runs},
                        {"b_runs", kSmallRuns},
                        {"executors", f.executors},
                        {"work", kWork},
                        {"fair", SampleJson(fair)},
                        {"fifo", SampleJson(fifo)}};
  if (f.json) {
    std::cout << out.dump() << "\n";
    return 0;
  }
  auto line = [](const char* what, const nlohmann::json& s) {
    return absl::StrFormat(
        "%s: B's runs started %.0f ms (p50) / %.0f ms (max) after the executors; A runs started "
        "before a B run: p50 %.0f, max %.0f\n",
        what, s["b_start_p50_ms"].get<double>(), s["b_start_max_ms"].get<double>(),
        s["a_started_before_b_p50"].get<double>(), s["a_started_before_b_max"].get<double>());
  };
  std::cout << absl::StrFormat("%d runs of key A queued, then %d of key B; %d executors, %s of "
                               "work per run\n",
                               f.runs, kSmallRuns, f.executors, kWork)
            << line("fair (concurrency key)", out["fair"])
            << line("FIFO (no key)", out["fifo"]);
  return 0;
}

}  // namespace runloom::cli
