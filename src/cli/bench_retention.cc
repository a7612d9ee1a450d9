// `runloom bench --retention` (issue 25): a steady workload with and
// without retention on a fresh SQLite file. --runs runs of a 3-step noop
// workflow are created in kRounds rounds by one client, each run as its own
// StartRun timed from the client (the creation latency); after each round,
// once every run of it has finished and the retention sweep had time to
// pass, the file is measured (the main file and its WAL apart, bytes). With retention the
// sweep keeps runs for kKeep, so the file should stop growing after the
// first rounds; without it, it grows with every round. Reported: the size
// after each round, bytes per finished run (the no-retention growth over
// the runs), and the p50/p99 creation latency of each pass.
#include "runloom/engine.h"

#include "cli/bench_runs.h"
#include "cli/cli_common.h"
#include "cli/commands.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

namespace runloom::cli {
// A namespace of its own: the unity build puts this file beside bench.cc.
namespace retention_bench {
namespace {

constexpr int kRounds = 10;
// How long the retention pass keeps a finished run, and how often it runs:
// a round's runs are gone two rounds later.
constexpr absl::Duration kKeep = absl::Seconds(1);
constexpr absl::Duration kPass = absl::Milliseconds(200);

constexpr char kWorkflow[] =
    "name: bench-retention\nsteps:\n  - {id: a, kind: noop}\n  - {id: b, kind: noop}\n"
    "  - {id: c, kind: noop}\n";

struct Pass {
  std::vector<int64_t> bytes;      // the main file after each round
  std::vector<int64_t> wal_bytes;  // its WAL then
  std::vector<double> create_ms;   // each StartRun, as the client waited for it
  int64_t finished = 0;
  bool ok = false;
};

int64_t FileBytes(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(size);
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

Pass MeasurePass(const BenchFlags& f, bool retention, std::string* error) {
  Pass m;
  BenchFlags fresh = f;
  fresh.db.clear();  // always a fresh temp file: the sizes compare
  absl::StatusOr<std::unique_ptr<BenchDb>> db = BenchDb::Create(BenchBackendFlags(fresh));
  if (!db.ok()) {
    *error = std::string(db.status().message());
    return m;
  }
  const std::string path = (*db)->flags().db;
  EngineOptions eo;
  eo.executors = f.executors;
  eo.idle_poll = absl::Milliseconds(20);
  if (retention) {
    eo.retention.keep_runs = kKeep;
    eo.retention.interval = kPass;
  }
  auto engine = OpenBenchEngine(**db, std::move(eo));
  if (!engine.ok()) {
    *error = std::string(engine.status().message());
    return m;
  }
  Engine& e = **engine;
  absl::StatusOr<Workflow> wf = LoadWorkflowYaml(kWorkflow, "bench.yaml");
  absl::StatusOr<WorkflowVersion> v =
      wf.ok() ? e.RegisterWorkflow(*wf) : absl::StatusOr<WorkflowVersion>(wf.status());
  if (!v.ok()) {
    *error = std::string(v.status().message());
    return m;
  }
  e.Start();
  Clock* clock = RealClock();
  const int per_round = std::max(1, f.runs / kRounds);
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::string> ids;
    for (int i = 0; i < per_round; ++i) {
      StartRunRequest req;
      req.workflow_name = v->name;
      req.workflow_version = v->version;
      const absl::Time t0 = clock->Now();
      absl::StatusOr<CreateRunResult> r = e.StartRun(req);
      m.create_ms.push_back(absl::ToDoubleMilliseconds(clock->Now() - t0));
      if (r.ok()) ids.push_back(r->run.id);
    }
    // Until the round's runs finished (a deleted one finished first).
    const absl::Time give_up = clock->Now() + absl::Seconds(60);
    for (size_t next = 0; next < ids.size() && clock->Now() < give_up;) {
      absl::StatusOr<RunRecord> r = e.GetRun(ids[next]);
      if (!r.ok() || IsTerminal(r->status)) {
        ++next;
        ++m.finished;
      } else {
        clock->SleepFor(absl::Milliseconds(5));
      }
    }
    clock->SleepFor(kKeep + 2 * kPass);  // the sweep's turn (idle without retention too)
    m.bytes.push_back(FileBytes(path));
    m.wal_bytes.push_back(FileBytes(path + "-wal"));
  }
  e.Stop();
  m.ok = true;
  return m;
}

}  // namespace
}  // namespace retention_bench

int RetentionBenchCommand(const BenchFlags& f) {
  using retention_bench::MeasurePass;
  using retention_bench::Pass;
  using retention_bench::Percentile;
  std::string error;
  const Pass kept = MeasurePass(f, false, &error);
  if (!kept.ok) return Failure(absl::StrCat("bench --retention: ", error));
  const Pass pruned = MeasurePass(f, true, &error);
  if (!pruned.ok) return Failure(absl::StrCat("bench --retention: ", error));
  // Bytes per finished run: what the rounds after the first added to the
  // main file, without retention, over their runs (the first round also
  // pays for the schema; the WAL is a bounded log, not the runs' home).
  const int64_t grown = kept.bytes.back() - kept.bytes.front();
  const int64_t runs_after_first =
      kept.finished * (retention_bench::kRounds - 1) / retention_bench::kRounds;
  const double bytes_per_run =
      runs_after_first > 0 ? static_cast<double>(grown) / static_cast<double>(runs_after_first) : 0;
  nlohmann::json out = {{"runs_per_pass", kept.finished},
                        {"rounds", retention_bench::kRounds},
                        {"bytes_per_run", bytes_per_run},
                        {"without_retention",
                         {{"bytes_after_round", kept.bytes},
                          {"wal_bytes_after_round", kept.wal_bytes},
                          {"create_p50_ms", Percentile(kept.create_ms, 0.5)},
                          {"create_p99_ms", Percentile(kept.create_ms, 0.99)}}},
                        {"with_retention",
                         {{"bytes_after_round", pruned.bytes},
                          {"wal_bytes_after_round", pruned.wal_bytes},
                          {"create_p50_ms", Percentile(pruned.create_ms, 0.5)},
                          {"create_p99_ms", Percentile(pruned.create_ms, 0.99)}}}};
  if (f.json) {
    std::cout << out.dump() << "\n";
    return 0;
  }
  auto sizes = [](const std::vector<int64_t>& b) {
    std::string s;
    for (int64_t n : b) absl::StrAppend(&s, s.empty() ? "" : " ", n / 1024);
    return s;
  };
  std::cout << absl::StrFormat(
      "retention bench: %d rounds of %d runs (3 noop steps), fresh SQLite file each pass\n"
      "  without retention: file KiB after each round: %s (WAL %s); create p50 %.3f ms p99 "
      "%.3f ms\n"
      "  with retention (keep 1s): file KiB after each round: %s (WAL %s); create p50 %.3f ms "
      "p99 %.3f ms\n"
      "  bytes per finished run (without retention, rounds 2..%d): %.0f\n",
      retention_bench::kRounds, kept.finished / retention_bench::kRounds, sizes(kept.bytes),
      sizes(kept.wal_bytes), Percentile(kept.create_ms, 0.5), Percentile(kept.create_ms, 0.99),
      sizes(pruned.bytes), sizes(pruned.wal_bytes), Percentile(pruned.create_ms, 0.5),
      Percentile(pruned.create_ms, 0.99), retention_bench::kRounds, bytes_per_run);
  return 0;
}

}  // namespace runloom::cli
