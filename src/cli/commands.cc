#include "cli/commands.h"

#include "runloom/backend.h"
#include "runloom/engine.h"
#include "runloom/gate.h"
#include "runloom/mutex.h"

#include "core/bounded_json.h"
#include "core/duration.h"
#include "core/status_macros.h"
#include "events/events.h"
#include "workflow/inputs.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "wire/wire.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>
#include <signal.h>
#include <sstream>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace runloom::cli {
namespace {

// The first line of a multi-line message (an exec error carries its stderr).
std::string FirstLine(const std::string& s) {
  size_t nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

int BadInput(const std::string& message) {
  std::cerr << "runloom: error: " << message << "\n";
  return kExitBadInput;
}

int Failure(const std::string& message) {
  std::cerr << "runloom: error: " << message << "\n";
  return kExitNotCompleted;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Blocks SIGINT/SIGTERM in every thread and turns them into a flag that a
// dedicated thread sets, so shutdown runs as ordinary code, not in a handler.
class SignalWatcher {
 public:
  SignalWatcher() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    thread_ = std::thread([this] {
      timespec tick{0, 100'000'000};  // wake to notice done_
      while (!done_.load()) {
        int sig = sigtimedwait(&set_, nullptr, &tick);
        if (sig == SIGINT || sig == SIGTERM) {
          signalled_ = true;
          std::function<void()> fn;
          {
            std::lock_guard<std::mutex> l(mu_);
            fn = on_signal_;
          }
          if (fn) fn();
        }
      }
    });
  }
  ~SignalWatcher() {
    done_ = true;
    thread_.join();
  }
  void OnSignal(std::function<void()> fn) {
    std::lock_guard<std::mutex> l(mu_);
    on_signal_ = std::move(fn);
  }
  bool signalled() const { return signalled_.load(); }

 private:
  sigset_t set_;
  std::atomic<bool> done_{false};
  std::atomic<bool> signalled_{false};
  std::mutex mu_;
  std::function<void()> on_signal_;
  std::thread thread_;
};

// A flag that must be a positive duration ("30s", "2m").
absl::StatusOr<absl::Duration> PositiveDurationFlag(const char* flag, const std::string& value) {
  auto d = ParseDuration(value);
  if (!d.ok()) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", d.status().message()));
  if (*d <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " must be positive"));
  }
  return d;
}

absl::Status CheckSyncFlag(const CommonFlags& c) {
  if (c.sync != "normal" && c.sync != "full") {
    return absl::InvalidArgumentError("--sync must be normal or full");
  }
  return absl::OkStatus();
}

// The file a --db value names, "" for an in-memory database or a URL that
// OpenBackend will refuse (it explains why).
std::string SqliteFileOf(const std::string& db) {
  if (db == ":memory:" || db == "sqlite::memory:") return "";
  if (absl::StartsWith(db, "sqlite://")) return db.substr(sizeof("sqlite://") - 1);
  if (db.find("://") != std::string::npos || absl::StartsWith(db, "sqlite:")) return "";
  return db;
}

absl::StatusOr<Backend> OpenDb(const CommonFlags& c) {
  BackendOptions o;
  o.durability = c.sync;
  auto b = OpenBackend(c.db, o);
  if (!b.ok()) return Annotate(b.status(), absl::StrCat("opening ", c.db));
  return b;
}

// For read-only commands: never create a database that is not there.
absl::StatusOr<Backend> OpenExistingDb(const CommonFlags& c) {
  const std::string path = SqliteFileOf(c.db);
  if (!path.empty() && !FileExists(path)) {
    return absl::NotFoundError(
        absl::StrCat("no database at '", c.db, "'; pass --db with the file `runloom run` used"));
  }
  return OpenDb(c);
}

// An engine over an existing database, for every command but run and
// worker: never started, so it executes nothing; its watches wake on commits
// from the process that executes the run. A failure to open the database
// keeps its status; a refused Engine::Open is kInternal (it cannot happen
// with a backend OpenBackend returned).
absl::StatusOr<std::unique_ptr<Engine>> OpenEngine(const CommonFlags& c) {
  auto backend = OpenExistingDb(c);
  if (!backend.ok()) return backend.status();
  auto engine = Engine::Open({}, *std::move(backend));
  if (!engine.ok()) return absl::InternalError(engine.status().message());
  return engine;
}

// Exit code for a failed read of the run a command names.
int RunReadFailure(const CommonFlags& c, const std::string& run_id, const absl::Status& s) {
  if (s.code() == absl::StatusCode::kNotFound) {
    return BadInput(absl::StrCat("run '", run_id, "' not found in ", c.db));
  }
  if (s.code() == absl::StatusCode::kInvalidArgument) return BadInput(std::string(s.message()));
  return Failure(std::string(s.message()));
}

// `s` as one shell word: as is when it holds only characters no shell
// treats specially, else in single quotes.
std::string ShellQuote(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char ch) {
    return absl::ascii_isalnum(static_cast<unsigned char>(ch)) ||
           std::string_view("-_./:=@%+,").find(ch) != std::string_view::npos;
  });
  if (plain) return s;
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

absl::StatusOr<nlohmann::json> ParseInputs(const RunFlags& f) {
  nlohmann::json given = nlohmann::json::object();
  if (!f.input_file.empty()) {
    RUNLOOM_ASSIGN_OR_RETURN(given, ReadJsonFileBounded(f.input_file, "input file"));
    if (!given.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("input file '", f.input_file, "' must hold a JSON object of inputs"));
    }
  }
  // An --input overrides the same key from --input-file; two --input flags
  // for one key are a mistake, not a last-wins.
  std::set<std::string> flagged;
  for (const std::string& kv : f.inputs) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--input '", kv, "' is malformed; write --input name=value"));
    }
    std::string key = kv.substr(0, eq);
    if (!flagged.insert(key).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--input '", key, "' is given more than once; give each input once"));
    }
    given[key] = kv.substr(eq + 1);
  }
  return given;
}

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

// Exit code for an engine error on a command that names a run.
int ExitForError(const absl::Status& s) {
  std::cerr << "runloom: error: " << s.message() << "\n";
  switch (s.code()) {
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kInvalidArgument:
      return kExitBadInput;
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kFailedPrecondition:
      return kExitConflict;
    default:
      return kExitNotCompleted;
  }
}

std::string DefaultReviewer() {
  const char* u = std::getenv("USER");
  return u != nullptr && *u != '\0' ? u : "cli";
}

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
      d.decision = "approve";
      return d;
    }
    if (line == "r" || line == "reject") {
      d.decision = "reject";
      return d;
    }
    if (line == "l" || line == "leave") return std::nullopt;
    if (line == "v" || line == "revise") {
      d.decision = "request_revision";
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
        d.decision = "edit";
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
void PrintPausedHint(const RunRecord& run, const std::string& db) {
  const PendingGate gate = PendingGateOf(run).value_or(PendingGate{});
  std::cout << "run " << run.id << " paused at " << gate.step_path << " for a decision\n"
            << "proposal:\n"
            << gate.proposal.dump(2) << "\n"
            << "proposal digest: " << gate.proposal_digest << "\n"
            << "decide with: runloom decide " << run.id << " --db " << db << " --digest "
            << gate.proposal_digest
            << " --approve   (or --reject, --edit FILE, --revise TEXT [--from PHASE])\n"
            << "then continue it with: runloom worker --db " << db << " --until-idle\n";
}

}  // namespace

int DbOpenFailure(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
      return BadInput(std::string(s.message()));
    default:
      return Failure(std::string(s.message()));
  }
}

// Long on purpose: the foreground run as one story, in order (check every
// input before the database is touched, start, execute with decisions at
// gates, report); the parts that stand alone are the helpers above.
int RunCommand(const RunFlags& f) {
  // Everything that can be wrong with the input is checked before the
  // database is opened, so bad input writes nothing.
  auto wf = LoadWorkflowFile(f.file);
  if (!wf.ok()) return BadInput(std::string(wf.status().message()));
  auto registry = StepRegistry::WithBuiltins();
  if (absl::Status s = ValidateStepKinds(*wf, *registry); !s.ok()) {
    return BadInput(std::string(s.message()));
  }
  auto given = ParseInputs(f);
  if (!given.ok()) return BadInput(std::string(given.status().message()));
  if (auto frozen = FreezeInputs(*wf, *given); !frozen.ok()) {
    return BadInput(absl::StrCat(f.file, ": ", frozen.status().message()));
  }
  for (const InputDef& in : wf->inputs) {
    if (in.secret && given->contains(in.name) && !SecretRefName((*given)[in.name]).has_value()) {
      std::cerr << "runloom: secret input '" << in.name << "' was given as a value: only this "
                << "process can use it. If the run pauses or this process stops, a worker cannot "
                << "resolve it; give it as --input " << in.name
                << "=secret://NAME (with RUNLOOM_SECRET_NAME set for every worker) instead\n";
    }
  }
  auto ttl = PositiveDurationFlag("--lease-ttl", f.lease_ttl);
  if (!ttl.ok()) return BadInput(std::string(ttl.status().message()));
  if (absl::Status s = CheckSyncFlag(f.common); !s.ok()) return BadInput(std::string(s.message()));

  SignalWatcher signals;
  auto backend = OpenDb(f.common);
  if (!backend.ok()) return DbOpenFailure(backend.status());
  auto stage_events = StageEventsSetting(f.stage_events);
  if (!stage_events.ok()) return BadInput(std::string(stage_events.status().message()));
  EngineOptions opts;
  opts.stage_events = *stage_events;
  opts.lease_ttl = *ttl;
  opts.enable_sweeper = false;  // this process runs one run; `runloom worker` recovers others
  opts.registry = std::move(registry);
  auto engine = Engine::Open(std::move(opts), *std::move(backend));
  if (!engine.ok()) return Failure(std::string(engine.status().message()));
  StartRunRequest req;
  req.workflow = *wf;
  req.inputs = *given;
  req.idempotency_key = f.idempotency_key;
  auto started = (*engine)->StartRun(req);
  if (!started.ok()) {
    if (started.status().code() == absl::StatusCode::kInvalidArgument) {
      return BadInput(std::string(started.status().message()));
    }
    return Failure(std::string(started.status().message()));
  }
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

  Engine* e = engine->get();
  signals.OnSignal([e] { e->Stop(); });
  std::atomic<bool> done{false};
  std::thread progress;
  if (!f.json) {
    progress = ProgressThread(e, run.id, 0, &done);
  }
  const bool interactive = isatty(STDIN_FILENO) != 0 && isatty(STDOUT_FILENO) != 0;
  absl::StatusOr<RunRecord> result;
  while (true) {
    result = e->ExecuteRun(run.id);
    if (!result.ok() || result->status != RunStatus::kPaused || signals.signalled()) break;
    const PendingGate gate = PendingGateOf(*result).value_or(PendingGate{});
    std::optional<DecisionRequest> decision;
    std::string reviewer = DefaultReviewer();
    if (f.auto_approve) {
      decision = DecisionRequest{.proposal_digest = gate.proposal_digest, .decision = "approve"};
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
      std::cerr << "runloom: decision refused: " << decided.status().message() << "\n";
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
    std::cerr << "runloom: interrupted; run " << run.id << " is "
              << std::string(ToString(result->status)) << "; continue it with: runloom worker --db "
              << f.common.db << "\n";
    return kExitInterrupted;
  }
  if (result->status == RunStatus::kPaused && !f.json) {
    PrintPausedHint(*result, f.common.db);
    return kExitPaused;
  }
  PrintFinal(*result, f.json);
  return ExitFor(*result);
}

int DecideCommand(const DecideFlags& f) {
  DecisionRequest d;
  d.proposal_digest = f.digest;
  int chosen = (f.approve ? 1 : 0) + (f.reject ? 1 : 0) + (f.edit_file.empty() ? 0 : 1) +
               (f.revise.empty() ? 0 : 1);
  if (chosen != 1) {
    return BadInput("give exactly one of --approve, --reject, --edit FILE, --revise TEXT");
  }
  if (f.approve) d.decision = "approve";
  if (f.reject) d.decision = "reject";
  if (!f.revise.empty()) {
    d.decision = "request_revision";
    d.feedback = f.revise;
    d.from_phase = f.from_phase;
  }
  if (!f.edit_file.empty()) {
    absl::StatusOr<nlohmann::json> edited = ReadJsonFileBounded(f.edit_file, "--edit: file");
    if (!edited.ok()) return BadInput(std::string(edited.status().message()));
    d.edited_proposal = *std::move(edited);
    d.decision = "edit";
  }
  auto engine = OpenEngine(f.common);
  if (!engine.ok()) return DbOpenFailure(engine.status());
  auto r = (*engine)->Decide(f.run_id, d, f.as.empty() ? DefaultReviewer() : f.as);
  if (!r.ok()) return ExitForError(r.status());
  std::cout << "run " << r->id << ": decision '" << d.decision << "' recorded; the run is "
            << std::string(ToString(r->status)) << " (revision " << r->revision << ")\n";
  return 0;
}

int CancelCommand(const CommonFlags& c, const std::string& run_id) {
  auto engine = OpenEngine(c);
  if (!engine.ok()) return DbOpenFailure(engine.status());
  auto r = (*engine)->Cancel(run_id, DefaultReviewer());
  if (!r.ok()) return ExitForError(r.status());
  if (r->status == RunStatus::kCancelled) {
    std::cout << "run " << run_id << " cancelled\n";
  } else {
    std::cout << "run " << run_id << " is running; cancel requested: its executor stops the "
              << "running step and ends the run within a second\n";
  }
  return 0;
}

int RerunCommand(const CommonFlags& c, const std::string& run_id, const std::string& phase,
                 const std::string& feedback) {
  auto engine = OpenEngine(c);
  if (!engine.ok()) return DbOpenFailure(engine.status());
  auto r = (*engine)->Rerun(run_id, phase, feedback, DefaultReviewer());
  if (!r.ok()) return ExitForError(r.status());
  std::cout << "run " << run_id << " queued as revision " << r->revision << " from phase " << phase
            << "; execute it with: runloom worker --db " << c.db << " --until-idle\n";
  return 0;
}

int ResetCommand(const CommonFlags& c, bool yes) {
  if (!yes) return BadInput("reset cancels every unfinished run; confirm with --yes");
  auto engine = OpenEngine(c);
  if (!engine.ok()) return DbOpenFailure(engine.status());
  auto n = (*engine)->ResetAll(DefaultReviewer());
  if (!n.ok()) return Failure(std::string(n.status().message()));
  std::cout << "reset: " << *n << " unfinished runs cancelled\n";
  return 0;
}

int WorkerCommand(const WorkerFlags& f) {
  auto ttl = PositiveDurationFlag("--lease-ttl", f.lease_ttl);
  if (!ttl.ok()) return BadInput(std::string(ttl.status().message()));
  auto grace = ParseDuration(f.queued_grace);
  if (!grace.ok()) return BadInput(absl::StrCat("--queued-grace: ", grace.status().message()));
  if (f.executors < 1) return BadInput("--executors must be at least 1");
  if (f.max_attempts < 1) return BadInput("--max-attempts must be at least 1");
  if (absl::Status s = CheckSyncFlag(f.common); !s.ok()) return BadInput(std::string(s.message()));
  SignalWatcher signals;
  auto backend = OpenDb(f.common);
  if (!backend.ok()) return DbOpenFailure(backend.status());
  auto stage_events = StageEventsSetting(f.stage_events);
  if (!stage_events.ok()) return BadInput(std::string(stage_events.status().message()));
  EngineOptions opts;
  opts.stage_events = *stage_events;
  opts.executors = f.executors;
  opts.lease_ttl = *ttl;
  opts.queued_grace = *grace;
  opts.max_attempts = f.max_attempts;
  auto engine = Engine::Open(std::move(opts), *std::move(backend));
  if (!engine.ok()) return Failure(std::string(engine.status().message()));
  Engine* e = engine->get();
  std::cerr << "runloom worker: executing runs from " << f.common.db << " with " << f.executors
            << " executors" << (f.until_idle ? " until idle" : "; Ctrl-C to stop") << "\n";
  e->Start();
  // Woken by the signal watcher or, with --until-idle, by the event bus;
  // the 1 s bound only re-checks the signal flag.
  runloom::Notification stop;
  signals.OnSignal([&stop] { stop.Notify(); });
  while (!signals.signalled()) {
    if (!f.until_idle) {
      stop.WaitForNotificationWithTimeout(absl::Seconds(1));
      continue;
    }
    if (e->AwaitIdle(RealClock()->Now() + absl::Seconds(1)).ok()) break;
  }
  signals.OnSignal(nullptr);  // `stop` goes before `signals`
  e->Stop();
  EngineStats st = e->stats();
  std::cerr << "runloom worker: stopped; " << st.runs_finished << " runs finished, "
            << st.runs_released << " released, " << st.leases_lost << " leases lost\n";
  return 0;
}

int StatusCommand(const CommonFlags& c, const std::string& run_id, bool json) {
  auto engine = OpenEngine(c);
  if (!engine.ok()) return DbOpenFailure(engine.status());
  auto run = (*engine)->GetRun(run_id);
  if (!run.ok()) return RunReadFailure(c, run_id, run.status());
  auto steps = (*engine)->ListSteps(run_id, std::nullopt);
  if (!steps.ok()) return Failure(std::string(steps.status().message()));
  if (json) {
    nlohmann::json j = wire::RunToJson(*run);
    j["steps"] = nlohmann::json::array();
    for (const StepRecord& s : *steps) j["steps"].push_back(wire::StepToJson(s));
    // Read from the same record as the rest, so it matches "status".
    auto gate = PendingGateOfPaused(*run);
    if (!gate.ok()) return Failure(std::string(gate.status().message()));
    if (gate->has_value()) j["pending_gate"] = wire::GateToJson(**gate);
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "run       " << run->id << "\n"
            << "workflow  " << run->workflow_name << " v" << run->workflow_version << " ("
            << run->workflow_digest.substr(0, 19) << ")\n"
            << "status    " << std::string(ToString(run->status))
            << (run->outcome.empty() ? "" : absl::StrCat(" (outcome ", run->outcome, ")")) << "\n"
            << "revision  " << run->revision << " (" << run->entry << "), attempts "
            << run->attempts << "/" << run->max_attempts << "\n";
  if (!run->phase.empty()) std::cout << "phase     " << run->phase << "\n";
  if (!run->lease_owner.empty()) std::cout << "lease     " << run->lease_owner << "\n";
  if (!run->error.empty()) std::cout << "error     " << run->error << "\n";
  std::cout << "steps:\n";
  for (const StepRecord& s : *steps) {
    std::cout << absl::StrFormat("  r%-2d %-32s %-9s attempt %d", s.revision, s.path,
                                 std::string(ToString(s.state)), s.attempt);
    if (!s.error.empty()) std::cout << "  " << s.error;
    std::cout << "\n";
  }
  return 0;
}

int EventsCommand(const CommonFlags& c, const std::string& run_id, bool json, bool follow) {
  auto engine = OpenEngine(c);
  if (!engine.ok()) return DbOpenFailure(engine.status());
  Engine* eng = engine->get();
  auto run = eng->GetRun(run_id);
  if (!run.ok()) return RunReadFailure(c, run_id, run.status());
  constexpr int kPage = kMaxReadLimit;
  int64_t after = 0;
  while (true) {
    auto evs = eng->ListEvents(run_id, after, kPage);
    if (!evs.ok()) return Failure(std::string(evs.status().message()));
    for (const Event& e : *evs) {
      after = e.seq;
      if (json) {
        std::cout << wire::EventToJson(e).dump() << "\n";
      } else {
        std::cout << absl::StrFormat("%4d  %s  %-20s %s\n", e.seq, FormatEventTime(e.at), e.type,
                                     e.data.dump());
      }
    }
    std::cout.flush();
    if (static_cast<int>(evs->size()) == kPage) continue;
    if (!follow) break;
    auto now = eng->GetRun(run_id);
    if (now.ok() && (IsTerminal(now->status) || now->status == RunStatus::kPaused)) {
      auto rest = eng->ListEvents(run_id, after, kPage);
      if (rest.ok() && rest->empty()) break;
      continue;
    }
    // Wakes when an event commits; the bound re-reads the status of a run
    // that ended without a further event.
    auto waited = eng->WatchEvents(run_id, after, RealClock()->Now() + absl::Seconds(1), 1);
    if (!waited.ok()) return Failure(std::string(waited.status().message()));
  }
  return 0;
}

int WorkflowsCommand(const CommonFlags& c, bool json) {
  auto engine = OpenEngine(c);
  if (!engine.ok()) return DbOpenFailure(engine.status());
  auto list = (*engine)->ListWorkflows();
  if (!list.ok()) return Failure(std::string(list.status().message()));
  if (json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const WorkflowVersion& v : *list) arr.push_back(wire::WorkflowVersionToJson(v, false));
    std::cout << arr.dump(2) << "\n";
    return 0;
  }
  std::cout << absl::StrFormat("%-24s %8s  %-20s %s\n", "NAME", "VERSION", "DIGEST", "REGISTERED");
  for (const WorkflowVersion& v : *list) {
    std::cout << absl::StrFormat("%-24s %8d  %-20s %s\n", v.name, v.version, v.digest.substr(0, 19),
                                 FormatEventTime(v.created_at));
  }
  return 0;
}

int RunsCommand(const RunsFlags& f) {
  RunQuery query;
  if (!f.status.empty()) {
    query.status = ParseRunStatus(f.status);
    if (!query.status.has_value()) {
      std::vector<std::string> valid;
      for (RunStatus st : kAllRunStatuses) valid.emplace_back(ToString(st));
      return BadInput(
          absl::StrCat("--status '", absl::CHexEscape(f.status),
                       "' is not a run status; use one of: ", absl::StrJoin(valid, ", ")));
    }
  }
  if (f.limit < 1) return BadInput(absl::StrCat("--limit must be at least 1 (got ", f.limit, ")"));
  query.workflow = f.workflow;
  query.limit = f.limit;
  query.cursor = f.cursor;
  auto engine = OpenEngine(f.common);
  if (!engine.ok()) return DbOpenFailure(engine.status());
  auto page = (*engine)->ListRuns(query);
  if (!page.ok()) {
    if (page.status().code() == absl::StatusCode::kInvalidArgument) {
      return BadInput(absl::StrCat(f.cursor.empty() ? "" : "--cursor: ", page.status().message()));
    }
    return Failure(std::string(page.status().message()));
  }
  if (f.json) {
    std::cout << wire::RunPageToJson(*page).dump(2) << "\n";
    return 0;
  }
  if (page->runs.empty()) {
    std::cout << "no runs\n";
    return 0;
  }
  constexpr char kRow[] = "%-24s  %-28s %-14s  %s\n";
  std::cout << absl::StrFormat(kRow, "RUN", "WORKFLOW", "STATUS", "CREATED");
  for (const RunRecord& r : page->runs) {
    std::cout << absl::StrFormat(kRow, r.id,
                                 absl::StrCat(r.workflow_name, " v", r.workflow_version),
                                 std::string(ToString(r.status)), FormatEventTime(r.created_at));
  }
  if (!page->next_cursor.empty()) {
    std::string next = absl::StrCat("runloom runs --db ", ShellQuote(f.common.db));
    if (!f.status.empty()) absl::StrAppend(&next, " --status ", ShellQuote(f.status));
    if (!f.workflow.empty()) absl::StrAppend(&next, " --workflow ", ShellQuote(f.workflow));
    absl::StrAppend(&next, " --limit ", f.limit, " --cursor ", ShellQuote(page->next_cursor));
    std::cout << "more runs: " << next << "\n";
  }
  return 0;
}

}  // namespace runloom::cli
