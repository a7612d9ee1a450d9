// `runloom run`: admit a run, then execute it in this process (deciding at
// approval gates) until it ends or pauses, or, with --detach, leave it queued
// for a worker.
#include "runloom/engine.h"
#include "runloom/gate.h"

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "core/bounded_json.h"
#include "core/status_macros.h"
#include "engine/rules/child_signal.h"
#include "workflow/inputs.h"

#include "absl/strings/str_cat.h"
#include "wire/wire.h"

#include <atomic>
#include <iostream>
#include <optional>
#include <set>
#include <thread>
#include <unistd.h>

namespace runloom::cli {
namespace {

// Live progress from the run's events. On a terminal: symbols and colour;
// elsewhere: plain lines that are easy to grep.
class ProgressPrinter {
 public:
  ProgressPrinter(Engine* engine, std::string run_id)
      : engine_(engine), run_id_(std::move(run_id)), tty_(isatty(STDOUT_FILENO) != 0) {}

  void SkipTo(int64_t seq) { last_seq_ = seq; }
  int64_t last_seq() const { return last_seq_; }

  // Prints every event after the last one printed.
  void Poll() {
    auto evs = engine_->ListEvents(run_id_, last_seq_, kMaxReadLimit);
    if (!evs.ok()) return;
    for (const Event& e : *evs) {
      last_seq_ = e.seq;
      Print(e);
    }
    std::cout.flush();
  }

 private:
  std::string Paint(const char* color, const std::string& s) const {
    return tty_ ? absl::StrCat("\033[", color, "m", s, "\033[0m") : s;
  }

  void Print(const Event& e) {
    const nlohmann::json& d = e.data;
    const std::string path = d.value("path", "");
    if (e.type == "step.started") {
      std::cout << (tty_ ? Paint("36", "  ▸ ") : "step started   ") << path << " ("
                << d.value("kind", "") << ", attempt " << d.value("attempt", 1) << ")\n";
    } else if (e.type == "step.succeeded") {
      std::cout << (tty_ ? Paint("32", "  ✓ ") : "step succeeded ") << path << " ("
                << d.value("duration_ms", 0) << " ms)\n";
    } else if (e.type == "step.failed") {
      std::string tail = d.value("will_retry", false)
                             ? absl::StrCat(", retry in ", d.value("retry_in_ms", 0), " ms")
                             : "";
      std::cout << (tty_ ? Paint("31", "  ✗ ") : "step failed    ") << path << " ["
                << d.value("error_class", "") << tail << "]: " << FirstLine(d.value("error", ""))
                << "\n";
    } else if (e.type == "llm.call") {
      std::cout << (tty_ ? Paint("90", "    llm ") : "llm call       ") << path << ": "
                << d.value("model", "") << " via " << d.value("provider", "") << ", "
                << d.value("input_tokens", 0) << "+" << d.value("output_tokens", 0)
                << " tokens, cost " << d.value("cost_micros", 0) << " micro-units, "
                << d.value("latency_ms", 0) << " ms, " << d.value("outcome", "") << "\n";
    } else if (e.type == "step.skipped") {
      std::cout << (tty_ ? Paint("90", "  - ") : "step skipped   ") << path << ": "
                << d.value("reason", "") << "\n";
    } else if (e.type == "run.started") {
      std::cout << "run " << run_id_ << " " << d.value("entry", "fresh") << " (attempt "
                << d.value("attempt", 0) << ", revision " << d.value("revision", 1) << ")\n";
    } else if (e.type == "run.paused") {
      std::cout << (tty_ ? Paint("33", "  ⏸ ") : "run paused     ") << d.value("step_path", "")
                << " waits for a decision\n";
    } else if (e.type == "run.decided") {
      std::cout << (tty_ ? Paint("33", "  ✎ ") : "run decided    ") << d.value("step_path", "")
                << ": " << d.value("decision", "") << " by " << d.value("reviewer", "") << "\n";
    } else if (e.type == "run.released") {
      std::cout << "run " << run_id_ << " released: " << d.value("reason", "") << "\n";
    }
  }

  Engine* const engine_;
  const std::string run_id_;
  const bool tty_;
  int64_t last_seq_ = 0;
};

// A paused run on a terminal: show the proposal and ask. Returns the decision
// to submit, or nullopt to leave the run paused.
std::optional<DecisionRequest> AskForDecision(const PendingGate& gate) {
  std::cout << "\n── approval needed: " << gate.title << " (" << gate.step_path << ")\n"
            << gate.proposal.dump(2) << "\n"
            << "digest " << gate.proposal_digest << "\n";
  DecisionRequest d;
  d.proposal_digest = gate.proposal_digest;
  while (true) {
    std::cout << "[a]pprove, [r]eject, re[v]ise, [e]dit from a JSON file, [l]eave paused: "
              << std::flush;
    std::string line;
    if (!std::getline(std::cin, line)) return std::nullopt;
    if (line == "a" || line == "approve") {
      d.decision = Decision::kApprove;
      return d;
    }
    if (line == "r" || line == "reject") {
      d.decision = Decision::kReject;
      return d;
    }
    if (line == "l" || line == "leave") return std::nullopt;
    if (line == "v" || line == "revise") {
      d.decision = Decision::kRequestRevision;
      std::cout << "feedback: " << std::flush;
      std::getline(std::cin, d.feedback);
      std::cout << "rerun from phase [" << gate.revision_phase << "]: " << std::flush;
      std::getline(std::cin, d.from_phase);
      return d;
    }
    if (line == "e" || line == "edit") {
      std::cout << "JSON file with the edited proposal: " << std::flush;
      std::string path;
      std::getline(std::cin, path);
      absl::StatusOr<nlohmann::json> edited = ReadJsonFileBounded(path, "edited proposal");
      if (edited.ok()) {
        d.edited_proposal = *std::move(edited);
        d.decision = Decision::kEdit;
        return d;
      }
      std::cout << edited.status().message() << "\n";
    }
  }
}

// Prints the run's events after `after_seq` as they commit (woken by
// WatchEvents) until `*done`, then once more. The deadline bounds only how
// late `*done` is noticed when no event follows it.
std::thread ProgressThread(Engine* engine, const std::string& run_id, int64_t after_seq,
                           const std::atomic<bool>* done) {
  return std::thread([engine, run_id, after_seq, done] {
    ProgressPrinter printer(engine, run_id);
    printer.SkipTo(after_seq);
    while (!done->load()) {
      printer.Poll();
      (void)engine->WatchEvents(run_id, printer.last_seq(),
                                RealClock()->Now() + absl::Milliseconds(100), 1);
    }
    printer.Poll();
  });
}

int ExitFor(const RunRecord& run) {
  if (run.status == RunStatus::kCompleted) return kExitCompleted;
  if (run.status == RunStatus::kPaused) return kExitPaused;
  return kExitNotCompleted;
}

void PrintFinal(const RunRecord& run, bool json) {
  if (json) {
    std::cout << wire::RunToJson(run).dump() << "\n";
    return;
  }
  std::cout << "run " << run.id << " " << std::string(ToString(run.status));
  if (!run.error.empty()) std::cout << ": " << FirstLine(run.error);
  std::cout << "\n";
}

// How to go on with a run paused at a gate: the proposal and the commands.
void PrintPausedHint(const RunRecord& run, const CommonFlags& c) {
  const PendingGate gate = PendingGateOf(run).value_or(PendingGate{});
  std::cout << "run " << run.id << " paused at " << gate.step_path << " for a decision\n"
            << "proposal:\n"
            << gate.proposal.dump(2) << "\n"
            << "proposal digest: " << gate.proposal_digest << "\n"
            << "decide with: runloom decide " << run.id << BackendArgs(c) << " --digest "
            << gate.proposal_digest
            << " --approve   (or --reject, --edit FILE, --revise TEXT [--from PHASE])\n"
            << "then continue it with: runloom worker" << BackendArgs(c) << " --until-idle\n";
}

// A run's input, every part checked before the database is opened, so bad
// input writes nothing.
struct Prepared {
  Workflow workflow;
  EngineOptions options;  // ExecutingEngineOptions, with this run's lease TTL
  nlohmann::json inputs;
  std::optional<int64_t> budget_micros;
  std::optional<int> priority;
};

// kInvalidArgument (exit 2) for anything wrong with the workflow file, the
// inputs or the flags.
absl::StatusOr<Prepared> PrepareRun(const RunFlags& f) {
  Prepared p;
  RUNLOOM_ASSIGN_OR_RETURN(p.workflow, LoadWorkflowFile(f.file));
  EngineOptions base;
  base.enable_sweeper = false;  // this process runs one run; `runloom worker` recovers others
  RUNLOOM_ASSIGN_OR_RETURN(p.options, ExecutingEngineOptions(std::move(base), f.exec));
  RUNLOOM_RETURN_IF_ERROR(ValidateStepKinds(p.workflow, *p.options.registry));
  RUNLOOM_ASSIGN_OR_RETURN(p.inputs, ParseInputFlags(f.inputs, f.input_file));
  if (!f.budget.empty()) {
    RUNLOOM_ASSIGN_OR_RETURN(p.budget_micros, BudgetFlag("--budget", f.budget));
  }
  if (f.priority != -1) {
    if (f.priority < 0 || f.priority > kMaxPriority) {
      return absl::InvalidArgumentError(absl::StrCat("--priority is ", f.priority,
                                                     "; give 0 to ", kMaxPriority,
                                                     " (or -1 for the workflow's priority:)"));
    }
    p.priority = f.priority;
  }
  if (auto frozen = FreezeInputs(p.workflow, p.inputs); !frozen.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(f.file, ": ", frozen.status().message()));
  }
  for (const InputDef& in : p.workflow.inputs) {
    if (!in.secret || !p.inputs.contains(in.name) || SecretRefName(p.inputs[in.name])) continue;
    const std::string fix = absl::StrCat("give it as --input ", in.name,
                                         "=secret://NAME (with RUNLOOM_SECRET_NAME set for "
                                         "every worker)");
    if (f.detach) {
      // Only this process could resolve it, and it executes nothing.
      return absl::InvalidArgumentError(absl::StrCat(
          "secret input '", in.name, "' was given as a value, which a worker cannot resolve, and ",
          "a detached run is executed by a worker; ", fix));
    }
    PrintStderr(LogLevel::kWarning,
                absl::StrCat(
                    "runloom: secret input '", in.name, "' was given as a value: only this ",
                    "process can use it. If the run pauses or this process stops, a worker cannot ",
                    "resolve it; ", fix, " instead"));
  }
  RUNLOOM_ASSIGN_OR_RETURN(p.options.lease_ttl, PositiveDurationFlag("--lease-ttl", f.lease_ttl));
  RUNLOOM_RETURN_IF_ERROR(CheckSyncFlag(f.common));
  RUNLOOM_RETURN_IF_ERROR(CheckQueueUrl(f.common));
  return p;
}

// --detach: the run is admitted; say which, and how it will run.
int PrintDetached(const CreateRunResult& started, const RunFlags& f) {
  const RunRecord& run = started.run;
  if (f.json) {
    std::cout << nlohmann::json{{"id", run.id},
                                {"status", std::string(ToString(run.status))},
                                {"created", started.created}}
                     .dump()
              << "\n";
    return kExitCompleted;
  }
  // The id alone on stdout, for `id=$(runloom run FILE --detach)`.
  std::cout << run.id << "\n";
  PrintStderr(LogLevel::kInfo,
              absl::StrCat("run ", run.id, ": ", run.workflow_name, " v", run.workflow_version,
                           (started.created ? "" : " (existing run for this idempotency key)"),
                           " is ", std::string(ToString(run.status)),
                           "; a worker executes it: runloom worker", BackendArgs(f.common)));
  return kExitCompleted;
}

// A run parked at a long sleep or a wait for a signal: waits here until it
// is queued again: by the store's clock passing its wake time (this
// process's sweep, or any worker's), or by a signal sent from any process.
// Told once how to send the signal it waits for. false when interrupted
// first.
// The child run a run waits for at a `kind: run` step ("" = none): its wait
// signal is the child's end (engine/rules/child_signal.h).
std::string AwaitedChild(const RunRecord& r) {
  if (r.status != RunStatus::kWaiting) return "";
  return engine_internal::ChildOfSignal(r.wait_signal);
}

// Executes in this process the child `child_id` when it is queued, or the
// queued run at the bottom of its own chain of children (at most the
// depth limit): `runloom run` carries its run's children as it carries its
// run. A child that rests (paused, waiting) is left to whoever resumes it.
void DriveChild(Engine* e, const std::string& child_id) {
  std::string id = child_id;
  for (int depth = 0; depth < 16 && !id.empty(); ++depth) {
    absl::StatusOr<RunRecord> r = e->GetRun(id);
    if (!r.ok()) return;
    if (r->status == RunStatus::kQueued) {
      (void)e->ExecuteRun(id);
      return;
    }
    id = AwaitedChild(*r);
  }
}

bool AwaitWake(Engine* e, const RunRecord& parked, SignalWatcher& signals) {
  const std::string child = AwaitedChild(parked);
  if (!child.empty()) {
    PrintStderr(LogLevel::kInfo, absl::StrCat("run ", parked.id, " waits for its child run ", child,
                                              " (executed here; runloom status ", child, ")"));
  } else if (!parked.wait_signal.empty()) {
    PrintStderr(LogLevel::kInfo, absl::StrCat("run ", parked.id, " waits for signal ",
                                              parked.wait_signal, ": runloom signal ", parked.id,
                                              " ", parked.wait_signal, " --data JSON"));
  }
  while (!signals.signalled()) {
    absl::StatusOr<absl::Time> now = e->Now();
    if (now.ok() && parked.wake_at.has_value() && *now >= *parked.wake_at) (void)e->SweepOnce();
    if (!child.empty()) DriveChild(e, child);
    absl::StatusOr<RunRecord> r = e->GetRun(parked.id);
    if (!r.ok() || r->status != RunStatus::kWaiting) return true;
    RealClock()->SleepFor(absl::Milliseconds(100));
  }
  return false;
}

// Executes the admitted run in this process, deciding at gates (on a
// terminal, or with --auto-approve), until it ends, pauses or is
// interrupted; then reports it.
// How often a foreground run over its concurrency limit asks again.
constexpr absl::Duration kOverLimitRetry = absl::Milliseconds(200);

int ExecuteInForeground(Engine* e, const RunRecord& run, const RunFlags& f,
                        SignalWatcher& signals) {
  signals.OnSignal([e] { e->Stop(); });
  std::atomic<bool> done{false};
  std::thread progress;
  if (!f.json) {
    progress = ProgressThread(e, run.id, 0, &done);
  }
  const bool interactive = isatty(STDIN_FILENO) != 0 && isatty(STDOUT_FILENO) != 0;
  absl::StatusOr<RunRecord> result;
  bool said_over_limit = false;
  while (true) {
    result = e->ExecuteRun(run.id);
    if (result.status().code() == absl::StatusCode::kResourceExhausted && !signals.signalled()) {
      // Over its concurrency limit: still queued, no attempt spent. Wait
      // here for room (or for a worker to take it).
      if (!said_over_limit && !f.json) {
        PrintStderr(LogLevel::kInfo, absl::StrCat("runloom: ", result.status().message()));
        said_over_limit = true;
      }
      RealClock()->SleepFor(kOverLimitRetry);
      continue;
    }
    if (result.ok() && result->status == RunStatus::kWaiting && !signals.signalled()) {
      if (!AwaitWake(e, *result, signals)) break;
      continue;
    }
    if (!result.ok() || result->status != RunStatus::kPaused || signals.signalled()) break;
    const PendingGate gate = PendingGateOf(*result).value_or(PendingGate{});
    std::optional<DecisionRequest> decision;
    std::string reviewer = DefaultReviewer();
    if (f.auto_approve) {
      decision = DecisionRequest{.proposal_digest = gate.proposal_digest,
                                 .decision = Decision::kApprove};
      reviewer = "auto";
    } else if (interactive) {
      done = true;  // keep the prompt clean
      if (progress.joinable()) progress.join();
      decision = AskForDecision(gate);
      done = false;
      progress = ProgressThread(e, run.id, result->last_event_seq, &done);
    }
    if (!decision) break;
    auto decided = e->Decide(run.id, *decision, reviewer);
    if (!decided.ok()) {
      PrintStderr(LogLevel::kWarning,
                  absl::StrCat("runloom: decision refused: ", decided.status().message()));
      if (!interactive) break;
    }
  }
  done = true;
  if (progress.joinable()) progress.join();
  e->Stop();
  if (!result.ok()) {
    if (result.status().code() == absl::StatusCode::kAborted) {
      return Failure(absl::StrCat("run ", run.id,
                                  " is held by another executor: ", result.status().message()));
    }
    return Failure(std::string(result.status().message()));
  }
  if (signals.signalled() && !IsTerminal(result->status)) {
    PrintStderr(LogLevel::kInfo,
                absl::StrCat("runloom: interrupted; run ", run.id, " is ",
                             std::string(ToString(result->status)),
                             "; continue it with: runloom worker", BackendArgs(f.common)));
    return kExitInterrupted;
  }
  if (result->status == RunStatus::kPaused && !f.json) {
    PrintPausedHint(*result, f.common);
    return kExitPaused;
  }
  PrintFinal(*result, f.json);
  return ExitFor(*result);
}

}  // namespace

int RunCommand(const RunFlags& f) {
  absl::StatusOr<Prepared> p = PrepareRun(f);
  if (!p.ok()) return BadInput(std::string(p.status().message()));
  // Before the backend starts a thread, so every thread inherits the
  // blocked signals. A detached run needs none: admission is one commit.
  std::unique_ptr<SignalWatcher> signals;
  if (!f.detach) signals = std::make_unique<SignalWatcher>();
  auto backend = OpenDb(f.common);
  if (!backend.ok()) return DbOpenFailure(f.common, backend.status());
  auto engine = Engine::Open(std::move(p->options), *std::move(backend));
  if (!engine.ok()) return Failure(std::string(engine.status().message()));
  StartRunRequest req;
  req.budget_micros = p->budget_micros;
  req.priority = p->priority;
  req.workflow = std::move(p->workflow);
  req.inputs = std::move(p->inputs);
  req.idempotency_key = f.idempotency_key;
  auto started = (*engine)->StartRun(req);
  if (!started.ok()) {
    // A preflight refusal (kResourceExhausted) wrote nothing, as bad input.
    if (started.status().code() == absl::StatusCode::kInvalidArgument ||
        started.status().code() == absl::StatusCode::kResourceExhausted) {
      return BadInput(std::string(started.status().message()));
    }
    return Failure(std::string(started.status().message()));
  }
  if (f.detach) return PrintDetached(*started, f);
  const RunRecord& run = started->run;
  if (!f.json) {
    std::cout << "run " << run.id << ": " << run.workflow_name << " v" << run.workflow_version
              << (started->created ? " started" : " (existing run for this idempotency key)")
              << "\n";
  }
  if (!started->created && (IsTerminal(run.status) || run.status == RunStatus::kPaused)) {
    PrintFinal(run, f.json);
    return ExitFor(run);
  }
  return ExecuteInForeground(engine->get(), run, f, *signals);
}

}  // namespace runloom::cli
