// runloom embedded in a program of one's own: the engine on an SQLite file
// (find_package(runloom COMPONENTS engine), runloom::engine_sqlite: no
// PostgreSQL, Redis, libcurl or Boost), a custom C++ step kind, a workflow
// with an approval gate, and a run that outlives the process executing it.
//
//   runloom-embed DB PIPELINE.yaml            start a run, print its id, carry it to its end
//   runloom-embed DB PIPELINE.yaml RUN_ID     carry an existing run to its end
//
// Kill the first form while `count` runs (RUNLOOM_EMBED_STEP_DELAY_MS makes
// it slow enough), then run the second: the engine sees that the run's
// lease holder is dead, takes the run back and finishes it. The approval
// gate is approved here in code, as a reviewer would through the API.
#include "runloom/backend.h"
#include "runloom/engine.h"
#include "runloom/gate.h"
#include "runloom/sqlite.h"
#include "runloom/step.h"
#include "runloom/workflow.h"

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

namespace {

// A custom step kind: counts the words of its resolved `text:`.
class WordCount : public runloom::StepKind {
 public:
  absl::Status Validate(const runloom::StepDef& def) const override {
    if (!def.config.contains("text") || !def.config["text"].is_string()) {
      return absl::InvalidArgumentError("word_count needs `text:`, a string");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<runloom::StepOutput> Execute(runloom::StepContext& ctx,
                                              const nlohmann::json& config) override {
    std::cerr << "word_count: started" << std::endl;
    // Slow on purpose when asked, so that the process can be killed mid-step.
    if (const char* delay = std::getenv("RUNLOOM_EMBED_STEP_DELAY_MS"); delay != nullptr) {
      if (!ctx.SleepUntil(ctx.clock()->Now() + absl::Milliseconds(std::atoi(delay)))) {
        return absl::CancelledError("stopping");
      }
    }
    const std::string text = config["text"].get<std::string>();
    int words = 0;
    for (absl::string_view w : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
      (void)w;
      ++words;
    }
    return runloom::StepOutput{.output = {{"words", words}}};
  }
};

int Fail(const absl::Status& s) {
  std::cerr << "runloom-embed: " << s << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::cerr << "usage: runloom-embed DB PIPELINE.yaml [RUN_ID]\n";
    return 2;
  }
  const std::string db = argv[1];

  runloom::BackendRegistry backends;
  if (absl::Status s = runloom::RegisterSqliteBackend(backends); !s.ok()) return Fail(s);
  absl::StatusOr<runloom::Backend> backend = backends.Open(db, {});
  if (!backend.ok()) return Fail(backend.status());

  std::shared_ptr<runloom::StepRegistry> kinds = runloom::StepRegistry::WithLocalBuiltins();
  kinds->Register("word_count", std::make_shared<WordCount>());
  runloom::EngineOptions options;
  options.registry = kinds;
  options.executors = 2;
  absl::StatusOr<std::unique_ptr<runloom::Engine>> opened =
      runloom::Engine::Open(std::move(options), *std::move(backend));
  if (!opened.ok()) return Fail(opened.status());
  runloom::Engine& engine = **opened;

  std::string run_id;
  if (argc == 4) {
    run_id = argv[3];
  } else {
    absl::StatusOr<runloom::Workflow> wf = runloom::LoadWorkflowFile(argv[2]);
    if (!wf.ok()) return Fail(wf.status());
    absl::StatusOr<runloom::CreateRunResult> started = engine.StartRun({.workflow = *wf});
    if (!started.ok()) return Fail(started.status());
    run_id = started->run.id;
  }
  std::cout << "run " << run_id << std::endl;

  // The executors claim queued runs; the sweeper takes back a run whose
  // holder died (at once when that holder was a process on this machine).
  engine.Start();
  int exit_code = 1;
  for (;;) {
    absl::StatusOr<runloom::RunRecord> run = engine.AwaitRun(run_id, absl::Now() + absl::Minutes(2));
    if (!run.ok()) {
      exit_code = Fail(run.status());
      break;
    }
    if (run->status == runloom::RunStatus::kPaused) {
      absl::StatusOr<std::optional<runloom::PendingGate>> gate = engine.GetPendingGate(run_id);
      if (!gate.ok() || !gate->has_value()) {
        exit_code = Fail(gate.ok() ? absl::NotFoundError("no pending gate") : gate.status());
        break;
      }
      std::cout << "gate " << (*gate)->step_path << ": " << (*gate)->proposal.dump() << std::endl;
      absl::StatusOr<runloom::RunRecord> decided = engine.Decide(
          run_id,
          {.proposal_digest = (*gate)->proposal_digest, .decision = runloom::Decision::kApprove},
          "embed-example");
      if (!decided.ok()) {
        exit_code = Fail(decided.status());
        break;
      }
      continue;
    }
    std::cout << "status " << runloom::ToString(run->status) << std::endl;
    if (run->status == runloom::RunStatus::kCompleted) exit_code = 0;
    break;
  }
  engine.Stop();
  return exit_code;
}
