#include "cli/bench_runs.h"

#include "absl/status/status.h"

#include <filesystem>
#include <thread>
#include <unistd.h>
#include <utility>

namespace runloom::cli {

absl::StatusOr<std::unique_ptr<BenchDb>> BenchDb::Create(CommonFlags flags) {
  std::string dir;
  if (flags.db.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "runloom-bench-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) return absl::InternalError("cannot create a temp dir");
    dir = tmpl;
    flags.db = dir + "/bench.db";
  }
  return std::make_unique<BenchDb>(std::move(flags), std::move(dir));
}

absl::StatusOr<std::unique_ptr<Engine>> OpenBenchEngine(const BenchDb& db, EngineOptions options) {
  absl::StatusOr<Backend> backend = OpenDb(db.flags());
  if (!backend.ok()) return backend.status();
  return Engine::Open(std::move(options), *std::move(backend));
}

BenchDb::~BenchDb() {
  if (!dir_.empty()) {
    std::error_code ec;  // best effort: a temp directory left behind is harmless
    std::filesystem::remove_all(dir_, ec);
  }
}

std::vector<std::string> BenchStartRuns(Engine& e, const WorkflowVersion& wf, int n,
                                        int producers,
                                        const std::function<nlohmann::json(int)>& inputs) {
  std::vector<std::vector<std::string>> ids(producers);
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      for (int i = p; i < n; i += producers) {
        StartRunRequest req;
        req.workflow_name = wf.name;
        req.workflow_version = wf.version;
        req.inputs = inputs(i);
        absl::StatusOr<CreateRunResult> r = e.StartRun(req);
        if (r.ok()) ids[p].push_back(r->run.id);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<std::string> out;
  for (auto& list : ids) out.insert(out.end(), list.begin(), list.end());
  return out;
}

}  // namespace runloom::cli
