// What the benchmarks that measure one engine on a fresh database share
// (bench_waiting.cc, bench_fairness.cc): the database, and starting runs
// from several client threads.
//
// Thread-safety: BenchStartRuns calls Engine::StartRun from its own threads;
// BenchDb is used by one thread.
#pragma once

#include "runloom/engine.h"

#include "cli/cli_common.h"

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace runloom::cli {

// A benchmark's backend: `flags.db`, or (when that is "") a fresh SQLite
// file in a temp directory that the destructor removes.
class BenchDb {
 public:
  // kInternal when no temp directory can be made.
  static absl::StatusOr<std::unique_ptr<BenchDb>> Create(CommonFlags flags);
  // Create() makes `dir` (removed by the destructor; "" = none).
  BenchDb(CommonFlags flags, std::string dir) : flags_(std::move(flags)), dir_(std::move(dir)) {}
  BenchDb(const BenchDb&) = delete;
  BenchDb& operator=(const BenchDb&) = delete;
  ~BenchDb();

  // The flags with the database filled in.
  const CommonFlags& flags() const { return flags_; }

 private:
  const CommonFlags flags_;
  const std::string dir_;  // "" = none made
};

// An engine with `options` over the backend of `db` (not started). Errors
// are OpenDb's and Engine::Open's.
absl::StatusOr<std::unique_ptr<Engine>> OpenBenchEngine(const BenchDb& db, EngineOptions options);

// Starts `n` runs of catalog workflow `wf` on `producers` threads, run i
// with inputs(i); the ids of those admitted (a refused run is left out).
std::vector<std::string> BenchStartRuns(Engine& e, const WorkflowVersion& wf, int n,
                                        int producers,
                                        const std::function<nlohmann::json(int)>& inputs);

}  // namespace runloom::cli
