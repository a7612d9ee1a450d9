// The `runloom` subcommands other than run, bench and dead-letters: worker,
// decide, cancel, rerun, reset, and the reads (status, events, workflows,
// runs).
#include "cli/commands.h"

#include "runloom/engine.h"
#include "runloom/events.h"
#include "runloom/gate.h"
#include "runloom/mutex.h"

#include "cli/cli_common.h"
#include "core/bounded_json.h"
#include "core/duration.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"
#include "wire/wire.h"

#include <algorithm>
#include <iostream>
#include <optional>
#include <set>

namespace runloom::cli {

int DecideCommand(const DecideFlags& f) {
  DecisionRequest d;
  d.proposal_digest = f.digest;
  int chosen = (f.approve ? 1 : 0) + (f.reject ? 1 : 0) + (f.edit_file.empty() ? 0 : 1) +
               (f.revise.empty() ? 0 : 1);
  if (chosen != 1) {
    return BadInput("give exactly one of --approve, --reject, --edit FILE, --revise TEXT");
  }
  if (f.approve) d.decision = Decision::kApprove;
  if (f.reject) d.decision = Decision::kReject;
  if (!f.revise.empty()) {
    d.decision = Decision::kRequestRevision;
    d.feedback = f.revise;
    d.from_phase = f.from_phase;
  }
  if (!f.edit_file.empty()) {
    absl::StatusOr<nlohmann::json> edited = ReadJsonFileBounded(f.edit_file, "--edit: file");
    if (!edited.ok()) return BadInput(std::string(edited.status().message()));
    d.edited_proposal = *std::move(edited);
    d.decision = Decision::kEdit;
  }
  auto engine = OpenEngine(f.common);
  if (!engine.ok()) return DbOpenFailure(f.common, engine.status());
  auto r = (*engine)->Decide(f.run_id, d, f.as.empty() ? DefaultReviewer() : f.as);
  if (!r.ok()) return ExitForError(r.status());
  std::cout << "run " << r->id << ": decision '" << ToString(*d.decision)
            << "' recorded; the run is " << std::string(ToString(r->status)) << " (revision "
            << r->revision << ")\n";
  return 0;
}

int CancelCommand(const CommonFlags& c, const std::string& run_id) {
  auto engine = OpenEngine(c);
  if (!engine.ok()) return DbOpenFailure(c, engine.status());
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
  if (!engine.ok()) return DbOpenFailure(c, engine.status());
  auto r = (*engine)->Rerun(run_id, phase, feedback, DefaultReviewer());
  if (!r.ok()) return ExitForError(r.status());
  std::cout << "run " << run_id << " queued as revision " << r->revision << " from phase " << phase
            << "; execute it with: runloom worker" << BackendArgs(c) << " --until-idle\n";
  return 0;
}

int SignalCommand(const SignalFlags& f) {
  // The payload: bounded as every input is, and refused before anything
  // is opened when it is not JSON.
  LoadLimits limits;
  limits.max_bytes = 64 * 1024;
  SignalRequest req;
  req.name = f.name;
  req.idempotency_key = f.idempotency_key;
  if (!f.data_file.empty()) {
    absl::StatusOr<nlohmann::json> payload =
        ReadJsonFileBounded(f.data_file, "--data-file: file", limits);
    if (!payload.ok()) return BadInput(std::string(payload.status().message()));
    req.payload = *std::move(payload);
  } else if (!f.data.empty()) {
    absl::StatusOr<nlohmann::json> payload = ParseJsonBounded(f.data, "--data", limits);
    if (!payload.ok()) return BadInput(std::string(payload.status().message()));
    req.payload = *std::move(payload);
  }
  auto engine = OpenEngine(f.common);
  if (!engine.ok()) return DbOpenFailure(f.common, engine.status());
  auto sent = (*engine)->Signal(f.run_id, req, DefaultReviewer());
  if (!sent.ok()) return ExitForError(sent.status());
  if (!sent->created) {
    std::cout << "signal " << f.name << " was sent to run " << f.run_id
              << " before with this idempotency key (seq " << sent->signal.seq
              << "); nothing new was kept\n";
  } else if (sent->resolved) {
    std::cout << "signal " << f.name << " (seq " << sent->signal.seq << ") resolved run "
              << f.run_id << "'s wait; the run is queued\n";
  } else {
    std::cout << "signal " << f.name << " (seq " << sent->signal.seq << ") kept in run "
              << f.run_id << "'s mailbox: its next wait for " << f.name << " consumes it\n";
  }
  return 0;
}

int ResetCommand(const CommonFlags& c, bool yes) {
  if (!yes) return BadInput("reset cancels every unfinished run; confirm with --yes");
  auto engine = OpenEngine(c);
  if (!engine.ok()) return DbOpenFailure(c, engine.status());
  auto n = (*engine)->ResetAll(DefaultReviewer());
  if (!n.ok()) return Failure(std::string(n.status().message()));
  std::cout << "reset: " << *n << " unfinished runs cancelled\n";
  return 0;
}

namespace {

// A dead-lettered run stays queued, but no worker gets it before a redrive:
// `worker --until-idle` would wait for it forever. How many runs are left
// when every queued run is dead-lettered and nothing runs; nullopt while
// anything else is queued or running (or when the lists are too long to
// tell).
std::optional<size_t> OnlyDeadLettersLeft(Engine* e) {
  if (e->ActiveRuns() > 0) return std::nullopt;
  auto running = e->ListRuns({.status = RunStatus::kRunning, .limit = 1});
  if (!running.ok() || !running->runs.empty()) return std::nullopt;
  auto queued = e->ListRuns({.status = RunStatus::kQueued, .limit = kMaxReadLimit});
  if (!queued.ok() || queued->runs.empty() || !queued->next_cursor.empty()) return std::nullopt;
  auto dead = e->ListDeadLetters(kMaxReadLimit);
  if (!dead.ok()) return std::nullopt;
  std::set<std::string> dead_runs;
  for (const DeadLetter& d : *dead) dead_runs.insert(d.run_id);
  for (const RunRecord& r : queued->runs) {
    if (dead_runs.count(r.id) == 0) return std::nullopt;
  }
  return queued->runs.size();
}

}  // namespace

int WorkerCommand(const WorkerFlags& f) {
  auto ttl = PositiveDurationFlag("--lease-ttl", f.lease_ttl);
  if (!ttl.ok()) return BadInput(std::string(ttl.status().message()));
  auto grace = ParseDuration(f.queued_grace);
  if (!grace.ok()) return BadInput(absl::StrCat("--queued-grace: ", grace.status().message()));
  if (f.executors < 1) return BadInput("--executors must be at least 1");
  if (absl::Status s = CheckRunsInFlight(f.runs_in_flight); !s.ok()) {
    return BadInput(std::string(s.message()));
  }
  if (f.max_deliveries < 1) return BadInput("--max-deliveries must be at least 1");
  if (absl::Status s = CheckSyncFlag(f.common); !s.ok()) return BadInput(std::string(s.message()));
  if (absl::Status s = CheckQueueUrl(f.common); !s.ok()) return BadInput(std::string(s.message()));
  // The registry outlives the engine that records into it and the endpoint
  // that serves it (declared first, destroyed last).
  auto registry = std::make_shared<prometheus::Registry>();
  EngineOptions base;
  base.executors = f.executors;
  base.runs_in_flight = f.runs_in_flight;
  base.lease_ttl = *ttl;
  base.queued_grace = *grace;
  base.env.metrics = registry.get();
  auto opts = ExecutingEngineOptions(std::move(base), f.exec);
  if (!opts.ok()) return BadInput(std::string(opts.status().message()));
  SignalWatcher signals;
  // Listening before the backend opens: an address it cannot take writes nothing.
  std::unique_ptr<prometheus::Exposer> metrics;
  if (!f.metrics_listen.empty()) {
    auto served = ServeMetrics(f.metrics_listen, registry);
    if (!served.ok()) return BadInput(std::string(served.status().message()));
    metrics = *std::move(served);
    const std::vector<int> ports = metrics->GetListeningPorts();
    PrintStderr(LogLevel::kInfo,
                absl::StrCat("runloom worker: metrics on http://",
                             f.metrics_listen.substr(0, f.metrics_listen.rfind(':')), ":",
                             (ports.empty() ? 0 : ports.front()), "/metrics"));
  }
  auto backend = OpenDb(f.common, TransportOptions{.max_deliveries = f.max_deliveries},
                        /*long_lived=*/true);
  if (!backend.ok()) return DbOpenFailure(f.common, backend.status());
  auto engine = Engine::Open(*std::move(opts), *std::move(backend));
  if (!engine.ok()) return Failure(std::string(engine.status().message()));
  Engine* e = engine->get();
  PrintStderr(
      LogLevel::kInfo,
      absl::StrCat("runloom worker: executing runs from ", RedactedUrl(f.common.db), " with ",
                   f.executors, " executors", (f.until_idle ? " until idle" : "; Ctrl-C to stop")));
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
    if (std::optional<size_t> dead = OnlyDeadLettersLeft(e)) {
      PrintStderr(
          LogLevel::kInfo,
          absl::StrCat("runloom worker: idle; ", *dead, " queued runs are dead-lettered and wait ",
                       "for a redrive: runloom dead-letters", BackendArgs(f.common)));
      break;
    }
  }
  signals.OnSignal(nullptr);  // `stop` goes before `signals`
  e->Stop();
  EngineStats st = e->stats();
  PrintStderr(LogLevel::kInfo,
              absl::StrCat("runloom worker: stopped; ", st.runs_finished, " runs finished, ",
                           st.runs_released, " released, ", st.leases_lost, " leases lost"));
  return 0;
}

int WritesCommand(const CommonFlags& c, const std::string& run_id, bool json) {
  auto engine = OpenEngine(c);
  if (!engine.ok()) return DbOpenFailure(c, engine.status());
  auto writes = (*engine)->ListWrites(run_id);
  if (!writes.ok()) return RunReadFailure(c, run_id, writes.status());
  if (json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const WriteOperation& op : *writes) arr.push_back(wire::WriteToJson(op));
    std::cout << nlohmann::json{{"run_id", run_id}, {"writes", std::move(arr)}}.dump(2) << "\n";
    return 0;
  }
  if (writes->empty()) {
    std::cout << "run " << run_id << " has made no external write\n";
    return 0;
  }
  // The path column is as wide as the longest path (an agent's tool calls
  // are "agent/turn[N]/tool[name#i]"), at least 28.
  int width = 28;
  for (const WriteOperation& op : *writes) {
    width = std::max(width, static_cast<int>(op.key.step_path.size()));
  }
  std::cout << absl::StrFormat("%-*s %-20s %-6s %-4s %-7s %s\n", width, "PATH", "ACTION", "STATE",
                               "HTTP", "SOURCE", "DECISION");
  for (const WriteOperation& op : *writes) {
    const bool done = op.result.has_value();
    std::cout << absl::StrFormat(
        "%-*s %-20s %-6s %-4s %-7s %s\n", width, op.key.step_path, op.key.action,
        std::string(ToString(op.state)), done ? absl::StrCat(op.result->http_status) : "-",
        done ? op.result->source : "-", op.key.decision.empty() ? "-" : op.key.decision);
  }
  return 0;
}

int StatusCommand(const CommonFlags& c, const std::string& run_id, bool json) {
  auto engine = OpenEngine(c);
  if (!engine.ok()) return DbOpenFailure(c, engine.status());
  auto run = (*engine)->GetRun(run_id);
  if (!run.ok()) return RunReadFailure(c, run_id, run.status());
  auto steps = (*engine)->ListSteps(run_id, std::nullopt);
  if (!steps.ok()) return Failure(std::string(steps.status().message()));
  if (json) {
    nlohmann::json j = wire::RunToJson(*run);
    j["steps"] = nlohmann::json::array();
    for (const StepRecord& s : *steps) j["steps"].push_back(wire::StepToJson(s));
    j["step_counts"] = wire::StepCountsToJson(*steps, run->revision);
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
            << "revision  " << run->revision << " (" << ToString(run->entry) << "), attempts "
            << run->attempts << "/" << run->max_attempts << "\n";
  if (!run->phase.empty()) std::cout << "phase     " << run->phase << "\n";
  if (!run->lease_owner.empty()) std::cout << "lease     " << run->lease_owner << "\n";
  if (!run->error.empty()) std::cout << "error     " << run->error << "\n";
  const nlohmann::json counts = wire::StepCountsToJson(*steps, run->revision);
  std::cout << "counts    " << counts["succeeded"] << " succeeded, " << counts["failed"]
            << " failed, " << counts["skipped"] << " skipped (revision " << run->revision << ")\n";
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
  if (!engine.ok()) return DbOpenFailure(c, engine.status());
  Engine* eng = engine->get();
  auto run = eng->GetRun(run_id);
  if (!run.ok()) return RunReadFailure(c, run_id, run.status());
  constexpr int kPage = kMaxReadLimit;
  // Following, the text of the model calls streaming now comes too (issue
  // 24): llm.delta, llm.reset and llm.end lines between the events, not
  // stored (no seq). Printed by the engine's relay thread, so each line is
  // written whole under `out`.
  runloom::Mutex out;
  std::set<std::string> streaming;  // the calls with text and no end yet; guarded by `out`
  std::unique_ptr<Subscription> live;
  if (follow) {
    live = eng->WatchLive(run_id, [&out, &streaming, json](const LiveFrame& f) {
      const nlohmann::json data = wire::LiveFrameData(f.path, f.attempt, f.offset, f.text);
      const char* type = wire::LiveFrameType(f.kind);
      runloom::MutexLock l(&out);
      const std::string key = absl::StrCat(f.path, "#", f.attempt);
      if (f.kind == LiveFrame::Kind::kEnd) {
        streaming.erase(key);
      } else {
        streaming.insert(key);
      }
      if (json) {
        std::cout << nlohmann::json{{"run_id", f.run_id},
                                    {"type", type},
                                    {"at", FormatEventTime(RealClock()->Now())},
                                    {"data", data}}
                         .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                  << std::endl;
      } else {
        std::cout << absl::StrFormat(
                         "%4s  %s  %-20s %s\n", "-", FormatEventTime(RealClock()->Now()), type,
                         data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
                  << std::flush;
      }
    });
  }
  int64_t after = 0;
  while (true) {
    auto evs = eng->ListEvents(run_id, after, kPage);
    if (!evs.ok()) return Failure(std::string(evs.status().message()));
    {
      runloom::MutexLock l(&out);
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
    }
    if (static_cast<int>(evs->size()) == kPage) continue;
    if (!follow) break;
    auto now = eng->GetRun(run_id);
    if (now.ok() && (IsTerminal(now->status) || now->status == RunStatus::kPaused)) {
      auto rest = eng->ListEvents(run_id, after, kPage);
      if (rest.ok() && rest->empty()) {
        // A call streamed by another process ended before its step's record
        // committed, but its end reaches this one a poll later: waited for,
        // a little.
        auto ended = [&streaming]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(out) { return streaming.empty(); };
        runloom::MutexLock l(&out);
        out.AwaitWithTimeout(absl::Condition(&ended), absl::Seconds(1));
        break;
      }
      continue;
    }
    // Wakes when an event commits; the bound re-reads the status of a run
    // that ended without a further event.
    auto waited = eng->WatchEvents(run_id, after, RealClock()->Now() + absl::Seconds(1), 1);
    if (!waited.ok()) return Failure(std::string(waited.status().message()));
  }
  return 0;
}

int WorkflowsCommand(const CommonFlags& c, bool json, const std::vector<std::string>& register_files) {
  // Every file is loaded and checked before any is registered: one bad file
  // registers nothing.
  std::vector<Workflow> loaded;
  for (const std::string& file : register_files) {
    absl::StatusOr<Workflow> wf = LoadWorkflowFile(file);
    if (!wf.ok()) return BadInput(absl::StrCat("--register ", file, ": ", wf.status().message()));
    loaded.push_back(*std::move(wf));
  }
  absl::StatusOr<std::unique_ptr<Engine>> engine = absl::UnknownError("not opened");
  if (loaded.empty()) {
    engine = OpenEngine(c);
  } else {
    // Registering creates the database, as `run` does, and checks the
    // steps against the same kinds `run` and `worker` execute.
    EngineOptions options;
    absl::StatusOr<std::shared_ptr<StepRegistry>> kinds = StepKindsSetting("");
    if (!kinds.ok()) return BadInput(std::string(kinds.status().message()));
    options.registry = *std::move(kinds);
    absl::StatusOr<Backend> backend = OpenDb(c);
    engine = backend.ok() ? Engine::Open(std::move(options), *std::move(backend))
                          : absl::StatusOr<std::unique_ptr<Engine>>(backend.status());
  }
  if (!engine.ok()) return DbOpenFailure(c, engine.status());
  for (size_t i = 0; i < loaded.size(); ++i) {
    absl::StatusOr<WorkflowVersion> v = (*engine)->RegisterWorkflow(loaded[i]);
    if (!v.ok()) {
      const std::string what = absl::StrCat("--register ", register_files[i], ": ", v.status().message());
      return v.status().code() == absl::StatusCode::kInvalidArgument ? BadInput(what) : Failure(what);
    }
    if (!json) {
      std::cout << "registered " << v->name << " v" << v->version << " (" << v->digest.substr(0, 19)
                << ")\n";
    }
  }
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
  query.parent_run_id = f.parent;
  query.limit = f.limit;
  query.cursor = f.cursor;
  auto engine = OpenEngine(f.common);
  if (!engine.ok()) return DbOpenFailure(f.common, engine.status());
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
    std::string next = absl::StrCat("runloom runs", BackendArgs(f.common));
    if (!f.status.empty()) absl::StrAppend(&next, " --status ", ShellQuote(f.status));
    if (!f.workflow.empty()) absl::StrAppend(&next, " --workflow ", ShellQuote(f.workflow));
    if (!f.parent.empty()) absl::StrAppend(&next, " --parent ", ShellQuote(f.parent));
    absl::StrAppend(&next, " --limit ", f.limit, " --cursor ", ShellQuote(page->next_cursor));
    std::cout << "more runs: " << next << "\n";
  }
  return 0;
}

}  // namespace runloom::cli
