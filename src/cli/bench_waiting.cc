// `runloom bench --waiting`: many runs waiting at once without a worker
// (issue 23, acceptance 5). Half the runs wait for a signal (a `wait` step
// with no timeout), half sleep long enough to park at a timer; all of them
// are created and parked, then counted while they all wait: the process's
// memory, the runs holding a lease (executors held), the waiting runs. Then
// the timers come due and are measured late against their wake times, and a
// sample of the signal waits is resolved one signal at a time and measured
// from the signal's commit to its wait step's success. Every time is read
// back from the durable events (the store's clock), not from in-memory
// timers.
#include "runloom/engine.h"

#include "cli/bench_runs.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "core/duration.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iostream>
#include <thread>
#include <unistd.h>

namespace runloom::cli {
// A namespace of its own: the unity build puts this file beside bench.cc.
namespace waiting_bench {
namespace {

constexpr char kTimerWorkflow[] = R"(
name: bench-timer
inputs:
  delay: {type: string}
steps:
  - {id: nap, kind: sleep, duration: "{{ inputs.delay }}"}
  - {id: done, kind: noop}
)";

constexpr char kSignalWorkflow[] = R"(
name: bench-signal
steps:
  - {id: w, kind: wait, signal: go}
  - {id: done, kind: noop}
)";

// How many signal waits are resolved and measured, one at a time.
constexpr int kSignalSample = 2000;
// How many timers come due per second, spread evenly: below what the
// engine runs a second, so lateness measures the wake-up, not a backlog
// (a burst of due timers is run at the engine's throughput).
constexpr int kTimersDuePerSecond = 1000;

double RssMb() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

double Pct(std::vector<double> v, double p) { return BenchPercentile(v, p); }

// Runs of `status` now, counted page by page.
int64_t CountRuns(Engine& e, RunStatus status) {
  int64_t n = 0;
  RunQuery q;
  q.status = status;
  q.limit = kMaxReadLimit;
  while (true) {
    absl::StatusOr<RunPage> page = e.ListRuns(q);
    if (!page.ok()) return -1;
    n += static_cast<int64_t>(page->runs.size());
    if (page->next_cursor.empty()) return n;
    q.cursor = page->next_cursor;
  }
}

// The first event of `type` in `events` (of the wait step's `path`, when set).
const Event* Find(const std::vector<Event>& events, const std::string& type,
                  const std::string& path = "") {
  for (const Event& ev : events) {
    if (ev.type == type && (path.empty() || ev.data.value("path", "") == path)) return &ev;
  }
  return nullptr;
}

}  // namespace
}  // namespace waiting_bench

int WaitingBenchCommand(const BenchFlags& f) {
  using namespace waiting_bench;  // NOLINT(google-build-using-namespace): this file's helpers
  if (f.runs < 2 || f.executors < 1 || f.producers < 0) {
    return BadInput("--waiting needs --runs of at least 2 (half wait at a timer, half for a "
                    "signal), --executors of at least 1");
  }
  if (f.workers != 1) return BadInput("--waiting measures one process: --workers must be 1");
  const int producers = f.producers == 0 ? kBenchProducersPerWorker : f.producers;
  if (absl::Status s = CheckQueueUrl(BenchBackendFlags(f)); !s.ok()) {
    return BadInput(std::string(s.message()));
  }
  absl::StatusOr<std::unique_ptr<BenchDb>> db = BenchDb::Create(BenchBackendFlags(f));
  if (!db.ok()) return Failure(std::string(db.status().message()));
  const CommonFlags& c = (*db)->flags();
  auto backend = OpenDb(c);
  if (!backend.ok()) return DbOpenFailure(c, backend.status());
  EngineOptions eo;
  eo.executors = f.executors;
  eo.idle_poll = absl::Milliseconds(20);
  eo.park_sleeps_over = absl::Seconds(1);  // every timer of the bench parks
  auto engine = Engine::Open(std::move(eo), *std::move(backend));
  if (!engine.ok()) {
    return Failure(std::string(engine.status().message()));
  }
  Engine& e = **engine;
  std::vector<WorkflowVersion> versions;
  for (const char* yaml : {kTimerWorkflow, kSignalWorkflow}) {
    absl::StatusOr<Workflow> wf = LoadWorkflowYaml(yaml, "bench.yaml");
    absl::StatusOr<WorkflowVersion> v =
        wf.ok() ? e.RegisterWorkflow(*wf) : absl::StatusOr<WorkflowVersion>(wf.status());
    if (!v.ok()) {
      return Failure(std::string(v.status().message()));
    }
    versions.push_back(*v);
  }
  Clock* clock = RealClock();
  const int n_signal = f.runs / 2;
  const int n_timer = f.runs - n_signal;
  // Each timer is due at least this long after it parks: long enough for
  // every run to be created and parked first, at a few thousand runs a
  // second; then kTimersDuePerSecond come due each second.
  const absl::Duration delay = absl::Seconds(20) + absl::Microseconds(300) * f.runs;
  const absl::Duration window = absl::Seconds(1) * n_timer / kTimersDuePerSecond;
  const absl::Time t0 = clock->Now();
  e.Start();
  const std::vector<std::string> signal_ids =
      BenchStartRuns(e, versions[1], n_signal, producers, [](int) { return nlohmann::json::object(); });
  const std::vector<std::string> timer_ids =
      BenchStartRuns(e, versions[0], n_timer, producers, [&](int i) {
    return nlohmann::json{{"delay", runloom::FormatDuration(delay + window * i / n_timer)}};
  });
  // Every run parked: none queued or running.
  while (CountRuns(e, RunStatus::kQueued) + CountRuns(e, RunStatus::kRunning) > 0) {
    clock->SleepFor(absl::Milliseconds(100));
  }
  const absl::Time parked_at = clock->Now();
  const int64_t waiting = CountRuns(e, RunStatus::kWaiting);
  const int64_t held = CountRuns(e, RunStatus::kRunning);
  const double rss_waiting = RssMb();
  const bool all_at_once = parked_at < t0 + delay;  // no timer was due yet

  // The timers come due; each run ends right after its wake.
  while (e.stats().runs_finished < n_timer &&
         clock->Now() < parked_at + 2 * (delay + window)) {
    clock->SleepFor(absl::Milliseconds(200));
  }
  std::vector<double> late_ms;
  for (const std::string& id : timer_ids) {
    absl::StatusOr<std::vector<Event>> evs = e.ListEvents(id, 0, 100);
    if (!evs.ok()) continue;
    const Event* parked = Find(*evs, "run.waiting");
    if (parked == nullptr) continue;
    absl::StatusOr<absl::Time> until = ParseTimestamp(parked->data.value("until", ""));
    if (!until.ok()) continue;
    // The sleep's record starts once the run is leased again after its wake.
    for (const Event& ev : *evs) {
      if (ev.type == "step.started" && ev.data.value("path", "") == "nap" && ev.at >= *until) {
        late_ms.push_back(absl::ToDoubleMilliseconds(ev.at - *until));
        break;
      }
    }
  }

  // A sample of the signal waits, one signal at a time.
  const int sample = std::min<int>(kSignalSample, static_cast<int>(signal_ids.size()));
  for (int i = 0; i < sample; ++i) {
    (void)e.Signal(signal_ids[i], {.name = "go", .payload = i}, "bench");
    clock->SleepFor(absl::Milliseconds(2));
  }
  const absl::Time signals_sent = clock->Now();
  while (e.stats().runs_finished < n_timer + sample &&
         clock->Now() < signals_sent + absl::Seconds(60)) {
    clock->SleepFor(absl::Milliseconds(50));
  }
  std::vector<double> signal_ms;
  for (int i = 0; i < sample; ++i) {
    absl::StatusOr<std::vector<Event>> evs = e.ListEvents(signal_ids[i], 0, 100);
    if (!evs.ok()) continue;
    const Event* sent = Find(*evs, "signal.received");
    const Event* done = Find(*evs, "step.succeeded", "w");
    if (sent != nullptr && done != nullptr) {
      signal_ms.push_back(absl::ToDoubleMilliseconds(done->at - sent->at));
    }
  }
  const absl::Time t1 = clock->Now();
  e.Stop();
  nlohmann::json out = {
      {"runs", f.runs},
      {"timer_runs", n_timer},
      {"signal_runs", n_signal},
      {"executors", f.executors},
      {"parked_s", absl::ToDoubleSeconds(parked_at - t0)},
      {"waiting_at_once", waiting},
      {"all_waiting_at_once", all_at_once && waiting == f.runs},
      {"runs_holding_a_lease", held},
      {"rss_mb_while_waiting", rss_waiting},
      {"peak_rss_mb", BenchPeakRssMb()},
      {"timers_measured", late_ms.size()},
      {"timers_due_per_s", kTimersDuePerSecond},
      {"timer_late_p50_ms", Pct(late_ms, 0.50)},
      {"timer_late_p99_ms", Pct(late_ms, 0.99)},
      {"timer_late_max_ms", Pct(late_ms, 1.0)},
      {"signals_measured", signal_ms.size()},
      {"signal_p50_ms", Pct(signal_ms, 0.50)},
      {"signal_p99_ms", Pct(signal_ms, 0.99)},
      {"elapsed_s", absl::ToDoubleSeconds(t1 - t0)},
      {"db", RedactedUrl(c.db)},
  };
  if (f.json) {
    std::cout << out.dump() << "\n";
  } else {
    std::cout << absl::StrFormat(
        "%d runs waiting at once (%d at timers, %d for signals), parked in %.1f s; %d hold a "
        "lease; RSS %.1f MiB while waiting (peak %.1f MiB)\n"
        "due timers (%d a second): %d measured, late p50 %.0f ms, p99 %.0f ms, max %.0f ms\n"
        "signals: %d measured, commit to the wait's success p50 %.1f ms, p99 %.1f ms\n",
        static_cast<int>(waiting), n_timer, n_signal, absl::ToDoubleSeconds(parked_at - t0),
        static_cast<int>(held), rss_waiting, BenchPeakRssMb(), kTimersDuePerSecond,
        static_cast<int>(late_ms.size()),
        Pct(late_ms, 0.5), Pct(late_ms, 0.99), Pct(late_ms, 1.0),
        static_cast<int>(signal_ms.size()), Pct(signal_ms, 0.5), Pct(signal_ms, 0.99));
  }
  engine->reset();
  const bool ok = all_at_once && waiting == f.runs && held == 0 &&
                  static_cast<int>(late_ms.size()) == n_timer &&
                  static_cast<int>(signal_ms.size()) == sample;
  return ok ? 0 : 1;
}

}  // namespace runloom::cli
