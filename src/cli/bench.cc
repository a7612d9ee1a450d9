// `runloom bench`: N runs of a 3-step noop workflow, on a fresh SQLite file
// or the backend --db/--queue name, in one process or several (--workers).
//
// Measures the whole path a real run takes: admission (run row + event +
// queue message in one transaction), claim, lease, three fenced step starts
// and step records, and the terminal write. Latency is read back from the
// durable events (run.created -> first step.started), not from in-memory
// timers, so it covers the queue wait.
#include "runloom/engine.h"

#include "cli/cli_common.h"
#include "cli/commands.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char** environ;

namespace runloom::cli {
namespace {

Workflow NoopWorkflow() {
  Workflow wf;
  wf.name = "bench-noop";
  for (const char* id : {"a", "b", "c"}) {
    StepDef s;
    s.id = id;
    s.kind = "noop";
    wf.steps.push_back(s);
  }
  return wf;
}

// What the durable events say about the runs: how many completed, and each
// run's latency from creation to its first step.start.
struct Measured {
  int completed = 0;
  std::vector<double> start_latency_ms;
};

Measured MeasureFromEvents(Engine& e, const std::vector<std::vector<std::string>>& ids) {
  Measured m;
  for (const auto& list : ids) {
    for (const std::string& id : list) {
      auto evs = e.ListEvents(id, 0, 100);
      if (!evs.ok()) continue;
      absl::Time created_at, started_at;
      bool have_c = false, have_s = false, done = false;
      for (const Event& ev : *evs) {
        if (ev.type == "run.created") {
          created_at = ev.at;
          have_c = true;
        }
        if (ev.type == "step.started" && !have_s) {
          started_at = ev.at;
          have_s = true;
        }
        if (ev.type == "run.finished" && ev.data.value("status", "") == "completed") done = true;
      }
      if (have_c && have_s) {
        m.start_latency_ms.push_back(absl::ToDoubleMilliseconds(started_at - created_at));
      }
      if (done) ++m.completed;
    }
  }
  return m;
}

// Prints the measurements (one JSON object with --json); returns how many
// runs completed.
int Report(const BenchFlags& f, const std::string& db, Measured m, double elapsed) {
  const int completed = m.completed;
  std::vector<double>& lat = m.start_latency_ms;
  const double runs_per_s = completed / elapsed;
  nlohmann::json out = {
      {"runs", f.runs},
      {"completed", completed},
      {"steps", completed * 3},
      {"executors", f.executors},
      {"runs_in_flight", std::max(f.executors, f.runs_in_flight)},
      {"producers", f.producers},
      {"workers", f.workers},
      {"rate_per_s", f.rate},
      {"synchronous", f.sync},
      {"elapsed_s", elapsed},
      {"runs_per_s", runs_per_s},
      {"steps_per_s", runs_per_s * 3},
      {"p50_ms", BenchPercentile(lat, 0.50)},
      {"p99_ms", BenchPercentile(lat, 0.99)},
      {"peak_rss_mb", BenchPeakRssMb()},
      {"db", RedactedUrl(db)},
      {"queue", f.queue},
  };
  if (f.json) {
    std::cout << out.dump() << "\n";
  } else {
    std::cout << absl::StrFormat(
        "%d runs (%d completed) in %.2f s: %.0f runs/s, %.0f steps/s; enqueue->step start p50 "
        "%.2f ms, p99 %.2f ms; peak RSS %.1f MiB (synchronous=%s, %d executors%s)\n",
        f.runs, completed, elapsed, runs_per_s, runs_per_s * 3, BenchPercentile(lat, 0.5),
        BenchPercentile(lat, 0.99), BenchPeakRssMb(), f.sync, f.executors,
        f.rate > 0 ? absl::StrFormat(", created at %.0f runs/s", f.rate) : "");
  }
  return completed;
}

// Starts `runloom worker` children on the bench's backend (argv only, no
// shell). Returns their pids; on failure, the ones started so far.
std::vector<pid_t> StartWorkers(const BenchFlags& f, const std::string& db) {
  std::vector<pid_t> pids;
  std::vector<std::string> args = {"runloom", "worker",      "--db",
                                   db,        "--executors", absl::StrCat(f.executors)};
  if (!f.queue.empty()) {
    args.push_back("--queue");
    args.push_back(f.queue);
  }
  if (f.runs_in_flight > 0) {
    args.push_back("--runs-in-flight");
    args.push_back(absl::StrCat(f.runs_in_flight));
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (int i = 1; i < f.workers; ++i) {
    pid_t pid = 0;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ) != 0) {
      PrintStderr(LogLevel::kError, "runloom: error: cannot start a worker process");
      break;
    }
    pids.push_back(pid);
  }
  return pids;
}

void StopWorkers(const std::vector<pid_t>& pids) {
  for (pid_t p : pids) kill(p, SIGTERM);
  for (pid_t p : pids) waitpid(p, nullptr, 0);
}

// True when no run is queued or running (every process's work is done).
bool AllRunsFinished(Engine& e) {
  for (RunStatus s : {RunStatus::kQueued, RunStatus::kRunning}) {
    RunQuery q;
    q.status = s;
    q.limit = 1;
    absl::StatusOr<RunPage> page = e.ListRuns(q);
    if (!page.ok() || !page->runs.empty()) return false;
  }
  return true;
}

}  // namespace

double BenchPeakRssMb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // ru_maxrss is KiB on Linux
}

double BenchPercentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t k = static_cast<size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

CommonFlags BenchBackendFlags(const BenchFlags& f) {
  CommonFlags c;
  c.db = f.db;
  c.db_from = "--db";
  c.queue = f.queue;
  c.queue_from = "--queue";
  c.sync = f.sync;
  return c;
}

int BenchCommand(const BenchFlags& flags) {
  if (flags.runs < 1 || flags.executors < 1 || flags.producers < 0 || flags.workers < 1) {
    PrintStderr(LogLevel::kError,
                "runloom: error: --runs, --executors and --workers must be at least 1, "
                "--producers at least 0 (0: 8 per worker process)");
    return kExitBadInput;
  }
  if (absl::Status s = CheckRunsInFlight(flags.runs_in_flight); !s.ok()) {
    return BadInput(std::string(s.message()));
  }
  if (!(flags.rate >= 0 && flags.rate <= 1e7)) {
    return BadInput(absl::StrCat("--rate is runs per second, from 0 (as fast as possible) to "
                                 "10000000, got ", flags.rate));
  }
  BenchFlags f = flags;
  if (f.producers == 0) f.producers = kBenchProducersPerWorker * f.workers;
  // Each worker is a process with its own connections: a typo must not start
  // thousands of them.
  constexpr int kMaxWorkers = 64;
  if (f.workers > kMaxWorkers) {
    return BadInput(absl::StrCat("--workers is at most ", kMaxWorkers, ", got ", f.workers));
  }
  if (f.workers > 1 && f.db.empty()) {
    return BadInput("--workers above 1 needs --db: worker processes share it");
  }
  CommonFlags c = BenchBackendFlags(f);
  if (absl::Status s = CheckQueueUrl(c); !s.ok()) return BadInput(std::string(s.message()));
  std::string dir;
  if (c.db.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "runloom-bench-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      PrintStderr(LogLevel::kError, "runloom: error: cannot create a temp dir");
      return 1;
    }
    dir = tmpl;
    c.db = dir + "/bench.db";
  }
  const std::string& db = c.db;
  auto backend = OpenDb(c, {}, /*long_lived=*/true);
  if (!backend.ok()) {
    if (!dir.empty()) std::filesystem::remove_all(dir);
    return DbOpenFailure(c, backend.status());
  }
  EngineOptions eo;
  eo.executors = f.executors;
  eo.runs_in_flight = f.runs_in_flight;
  eo.idle_poll = absl::Milliseconds(20);
  auto engine = Engine::Open(std::move(eo), *std::move(backend));
  if (!engine.ok()) {
    PrintStderr(LogLevel::kError, absl::StrCat("runloom: error: ", engine.status().ToString()));
    return 1;
  }
  Engine* e = engine->get();
  Workflow wf = NoopWorkflow();
  auto registered = e->RegisterWorkflow(wf);
  if (!registered.ok()) {
    PrintStderr(LogLevel::kError, absl::StrCat("runloom: error: ", registered.status().ToString()));
    return 1;
  }
  Clock* clock = RealClock();
  const std::vector<pid_t> workers = StartWorkers(f, db);
  std::vector<std::vector<std::string>> ids(f.producers);
  std::atomic<int> create_errors{0};
  const absl::Time t0 = clock->Now();
  e->Start();
  std::vector<std::thread> producers;
  for (int p = 0; p < f.producers; ++p) {
    producers.emplace_back([&, p] {
      int n = f.runs / f.producers + (p < f.runs % f.producers ? 1 : 0);
      ids[p].reserve(n);
      for (int i = 0; i < n; ++i) {
        if (f.rate > 0) {
          // Run k = i * producers + p is due k / rate seconds after t0.
          const double k = static_cast<double>(i) * f.producers + p;
          const absl::Time due = t0 + absl::Seconds(k / f.rate);
          if (clock->Now() < due) clock->SleepUntil(due);
        }
        StartRunRequest req;
        req.workflow_name = wf.name;
        req.workflow_version = registered->version;  // pinned, as a service would
        auto r = e->StartRun(req);
        if (r.ok()) {
          ids[p].push_back(r->run.id);
        } else {
          ++create_errors;
        }
      }
    });
  }
  for (std::thread& t : producers) t.join();
  const int created = f.runs - create_errors.load();
  if (workers.empty()) {
    while (e->stats().runs_finished < created) clock->SleepFor(absl::Milliseconds(2));
  } else {
    while (!AllRunsFinished(*e)) clock->SleepFor(absl::Milliseconds(20));
  }
  const absl::Time t1 = clock->Now();
  e->Stop();
  StopWorkers(workers);
  const double elapsed = absl::ToDoubleSeconds(t1 - t0);

  const int completed = Report(f, db, MeasureFromEvents(*e, ids), elapsed);
  engine->reset();
  if (!dir.empty()) std::filesystem::remove_all(dir);
  return completed == f.runs ? 0 : 1;
}

}  // namespace runloom::cli
