// runloom: flag parsing and dispatch only; the commands live in commands.cc,
// run.cc, serve.cc, dead_letters.cc, tokens.cc, mcp.cc and bench.cc.
//
// Each subcommand is declared by one Add* function below, in --help order:
// its flags (owned by the returned command, since CLI11 writes into them
// while it parses) and the call that runs it.
#include "runloom/backend.h"
#include "runloom/env.h"
#include "runloom/postgres.h"
#include "runloom/sqlite.h"
#include "runloom/version.h"

#include "CLI/CLI.hpp"
#include "cli/cli_common.h"
#include "cli/commands.h"

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace runloom::cli {

// The source tree's commit (generated build_commit.cc, cmake/WriteCommit.cmake).
const char* BuildCommit();

namespace {

// A subcommand and what runs it once it was parsed.
struct Command {
  CLI::App* app;
  std::function<int()> run;
};

constexpr const char* kLogFormatHelp =
    "log lines on stderr: text (the default) or json, one object per line (else "
    "$RUNLOOM_LOG_FORMAT)";

// --log-format on `cmd`, into `format` (nullopt: not given).
void AddLogFormatFlag(CLI::App* cmd, std::optional<std::string>& format) {
  cmd->add_option_function<std::string>(
      "--log-format", [&format](const std::string& v) { format = v; }, kLogFormatHelp);
}

// --db and --queue on every command that opens a backend; after parsing,
// RUNLOOM_DB and RUNLOOM_QUEUE fill in the ones not given. --log-format too,
// into log_format (one parsed command writes it).
class BackendFlags {
 public:
  std::optional<std::string> log_format;

  void Add(CLI::App* sub, CommonFlags& c) {
    CLI::Option* db =
        sub->add_option("--db", c.db,
                        // The forms come from the backends themselves, so the help
                        // names every backend this binary links.
                        absl::StrCat("backend (else $RUNLOOM_DB): ",
                                     BuiltinBackends().AcceptedForms()))
            ->capture_default_str();
    CLI::Option* queue = sub->add_option(
        "--queue", c.queue,
        "queue (else $RUNLOOM_QUEUE): redis://host:port[/n]; empty = the store's own queue");
    AddLogFormatFlag(sub, log_format);
    apply_.push_back([&c, db, queue] {
      c = WithEnvironment(std::move(c), db->count() > 0, queue->count() > 0);
    });
  }
  void ApplyEnvironment() {
    for (const auto& apply : apply_) apply();
  }

 private:
  std::vector<std::function<void()>> apply_;
};

constexpr const char* kConfigHelp =
    "configuration file (else $RUNLOOM_CONFIG): model providers, model aliases and prices, "
    "tenant budgets; without one, llm steps use the offline fake provider";

constexpr const char* kStageEventsHelp =
    "publish stage events to this Redis (redis://host:port[/db]); default "
    "$RUNLOOM_STAGE_EVENTS, off when empty";

// The options of every command that executes runs (run, worker, serve).
void AddExecutingFlags(CLI::App* cmd, ExecutingFlags& f) {
  cmd->add_option("--stage-events", f.stage_events, kStageEventsHelp);
  cmd->add_option("--config", f.config, kConfigHelp);
  cmd->add_option("--otlp-endpoint", f.otlp_endpoint,
                  "send trace spans to this OTLP/HTTP traces URL, e.g. "
                  "http://127.0.0.1:4318/v1/traces (else $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, "
                  "$OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces; default off)");
  cmd->add_option("--park-sleeps-over", f.park_sleeps_over,
                  "a sleep step at least this long parks its run (status waiting, no executor "
                  "held) until it is due, e.g. 1m")
      ->capture_default_str();
}

Command AddRun(CLI::App& app, BackendFlags& backend) {
  auto f = std::make_shared<RunFlags>();
  CLI::App* cmd = app.add_subcommand(
      "run", "Run a workflow file in this process until it ends or pauses (or --detach)");
  cmd->add_option("file", f->file, "workflow YAML file")->required();
  cmd->add_option("--input", f->inputs, "an input as key=value (repeatable)");
  cmd->add_option("--input-file", f->input_file, "a JSON object file of inputs");
  cmd->add_option("--idempotency-key", f->idempotency_key, "same key -> the same run");
  cmd->add_option("--lease-ttl", f->lease_ttl, "lease lifetime, e.g. 30s")->capture_default_str();
  cmd->add_option("--sync", f->common.sync, "SQLite synchronous: normal or full")
      ->capture_default_str();
  cmd->add_flag("--json", f->json, "print the final run as JSON");
  AddExecutingFlags(cmd, f->exec);
  cmd->add_option("--budget", f->budget,
                  "the run's own budget in price units (e.g. 2.50): its model calls together "
                  "may cost at most this; refused at once when its tenant has less left");
  cmd->add_option("--priority", f->priority,
                  "the run's priority, 0 to 9: higher runs first among the queued runs of its "
                  "concurrency key; -1 = the workflow's priority:")
      ->capture_default_str();
  auto* auto_approve_flag =
      cmd->add_flag("--auto-approve", f->auto_approve,
                    "approve every approval gate automatically (reviewer \"auto\")");
  cmd->add_flag("--detach", f->detach,
                "admit the run and exit 0 without executing it (prints its id; with --json "
                "{\"id\", \"status\", \"created\"}); `runloom worker` executes it")
      ->excludes(auto_approve_flag);
  backend.Add(cmd, f->common);
  return {cmd, [f] { return RunCommand(*f); }};
}

// --runs-in-flight (worker, serve, bench): EngineOptions::runs_in_flight.
CLI::Option* AddRunsInFlight(CLI::App* cmd, int& runs_in_flight) {
  return cmd
      ->add_option("--runs-in-flight", runs_in_flight,
                   "runs held at once; a run waiting on a model call, a sleep or a backoff "
                   "gives its executor back (0: as many as --executors)")
      ->capture_default_str();
}

Command AddWorker(CLI::App& app, BackendFlags& backend) {
  auto f = std::make_shared<WorkerFlags>();
  CLI::App* cmd = app.add_subcommand("worker", "Execute every unfinished run in the database");
  cmd->add_flag("--until-idle", f->until_idle,
                "exit when no queued, running or timed waiting run is left (dead-lettered runs "
                "wait for a redrive; paused runs and runs waiting for a signal with no timeout "
                "wait for someone outside)");
  cmd->add_option("--executors", f->executors, "executor threads (concurrent runs computing)")
      ->capture_default_str();
  AddRunsInFlight(cmd, f->runs_in_flight);
  cmd->add_option("--lease-ttl", f->lease_ttl, "lease lifetime")->capture_default_str();
  cmd->add_option("--queued-grace", f->queued_grace,
                  "re-enqueue a queued run with no queue message after this long")
      ->capture_default_str();
  cmd->add_option("--max-deliveries", f->max_deliveries,
                  "deliveries of a queue message without an ack before it is dead-lettered")
      ->capture_default_str();
  AddExecutingFlags(cmd, f->exec);
  cmd->add_option("--metrics-listen", f->metrics_listen,
                  "serve Prometheus metrics at http://HOST:PORT/metrics (IPv4; off by default)");
  cmd->add_option("--sync", f->common.sync, "SQLite synchronous: normal or full")
      ->capture_default_str();
  backend.Add(cmd, f->common);
  return {cmd, [f] { return WorkerCommand(*f); }};
}

Command AddServe(CLI::App& app, BackendFlags& backend) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "Serve the HTTP API and execute runs in this process until SIGINT/SIGTERM");
  cmd->add_option("--listen", f->listen, "address:port to listen on (loopback by default)")
      ->capture_default_str();
  auto* executors = cmd->add_option("--executors", f->executors, "executor threads here")
                        ->capture_default_str();
  CLI::Option* in_flight = AddRunsInFlight(cmd, f->runs_in_flight);
  cmd->add_flag("--no-executors", f->no_executors,
                "serve only; `runloom worker` processes execute the runs")
      ->excludes(executors)
      ->excludes(in_flight);
  cmd->add_option("--http-threads", f->threads, "threads serving HTTP")->capture_default_str();
  cmd->add_flag("--insecure-no-auth", f->insecure_no_auth,
                "check no token: every caller is admin \"local\" (local demos only)");
  cmd->add_option_function<std::string>(
      "--allow-kinds", [f](const std::string& v) { f->allow_kinds = v; },
      "the step kinds a workflow registered over HTTP may use, comma-separated "
                  "(e.g. http,llm,approval); default: every kind");
  AddExecutingFlags(cmd, f->exec);
  cmd->add_option("--sync", f->common.sync, "SQLite synchronous: normal or full")
      ->capture_default_str();
  backend.Add(cmd, f->common);
  return {cmd, [f] { return ServeCommand(*f); }};
}

Command AddDecide(CLI::App& app, BackendFlags& backend) {
  auto f = std::make_shared<DecideFlags>();
  CLI::App* cmd = app.add_subcommand("decide", "Decide on a paused run's approval gate");
  cmd->add_option("run", f->run_id, "run id")->required();
  cmd->add_option("--digest", f->digest, "digest of the proposal you reviewed")->required();
  auto* approve_flag = cmd->add_flag("--approve", f->approve, "approve the proposal");
  auto* reject_flag = cmd->add_flag("--reject", f->reject, "reject: the run ends rejected");
  auto* edit_opt =
      cmd->add_option("--edit", f->edit_file, "approve your edited proposal (a JSON file)");
  auto* revise_opt =
      cmd->add_option("--revise", f->revise, "request a revision with this feedback");
  cmd->add_option("--from", f->from_phase, "with --revise: the phase to rerun from")
      ->needs(revise_opt);
  cmd->add_option("--as", f->as, "reviewer name (default: $USER)");
  approve_flag->excludes(reject_flag)->excludes(edit_opt)->excludes(revise_opt);
  reject_flag->excludes(edit_opt)->excludes(revise_opt);
  edit_opt->excludes(revise_opt);
  backend.Add(cmd, f->common);
  return {cmd, [f] { return DecideCommand(*f); }};
}

// The flags of the smaller commands (each uses some).
struct Args {
  CommonFlags common;
  std::string run_id;
  std::string from;
  std::string feedback;
  bool json = false;
  bool follow = false;
  bool yes = false;
};

Command AddCancel(CLI::App& app, BackendFlags& backend) {
  auto f = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("cancel", "Cancel a run");
  cmd->add_option("run", f->run_id, "run id")->required();
  backend.Add(cmd, f->common);
  return {cmd, [f] { return CancelCommand(f->common, f->run_id); }};
}

Command AddSignal(CLI::App& app, BackendFlags& backend) {
  auto f = std::make_shared<SignalFlags>();
  CLI::App* cmd =
      app.add_subcommand("signal", "Send a signal to a run's wait steps (kept until one consumes it)");
  cmd->add_option("run", f->run_id, "run id")->required();
  cmd->add_option("name", f->name, "the signal's name (a wait step's signal:)")->required();
  auto* data = cmd->add_option("--data", f->data, "the payload, as JSON (at most 64 KiB)");
  auto* file = cmd->add_option("--data-file", f->data_file, "read the payload from this JSON file");
  data->excludes(file);
  cmd->add_option("--idempotency-key", f->idempotency_key,
                  "the same key again keeps nothing new (a retried send)");
  backend.Add(cmd, f->common);
  return {cmd, [f] { return SignalCommand(*f); }};
}

Command AddRerun(CLI::App& app, BackendFlags& backend) {
  auto f = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("rerun", "Rerun a finished run from a phase (a new revision)");
  cmd->add_option("run", f->run_id, "run id")->required();
  cmd->add_option("--from", f->from, "the phase to rerun from")->required();
  cmd->add_option("--feedback", f->feedback, "feedback for the new revision (run.feedback)");
  backend.Add(cmd, f->common);
  return {cmd, [f] { return RerunCommand(f->common, f->run_id, f->from, f->feedback); }};
}

Command AddReset(CLI::App& app, BackendFlags& backend) {
  auto f = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("reset", "Admin reset: cancel every unfinished run");
  cmd->add_flag("--yes", f->yes, "confirm");
  backend.Add(cmd, f->common);
  return {cmd, [f] { return ResetCommand(f->common, f->yes); }};
}

Command AddStatus(CLI::App& app, BackendFlags& backend) {
  auto f = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("status", "Show a run and its steps");
  cmd->add_option("run", f->run_id, "run id")->required();
  cmd->add_flag("--json", f->json, "JSON output");
  backend.Add(cmd, f->common);
  return {cmd, [f] { return StatusCommand(f->common, f->run_id, f->json); }};
}

Command AddBackup(CLI::App& app, BackendFlags& backend) {
  auto f = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "backup", "Copy an SQLite database to a new file, consistent while runs execute");
  cmd->add_option("--to", f->from, "the new file (never overwritten)")->required();
  backend.Add(cmd, f->common);
  return {cmd, [f] { return BackupCommand(f->common, f->from); }};
}

Command AddPrune(CLI::App& app, BackendFlags& backend) {
  auto f = std::make_shared<PruneFlags>();
  CLI::App* cmd = app.add_subcommand(
      "prune", "Delete finished runs older than an age, with every row of theirs");
  cmd->add_option("--older-than", f->older_than,
                  "the age: runs that finished longer ago go (30d, 12h, 90m)")
      ->required();
  cmd->add_option("--workflow", f->workflow, "only runs of this workflow");
  cmd->add_option("--audit-horizon", f->audit_horizon,
                  "a run with an external-write record younger than this stays (none = such runs "
                  "always stay)")
      ->capture_default_str();
  cmd->add_flag("--dry-run", f->dry_run, "count what would go; delete nothing");
  cmd->add_flag("--json", f->json, "one JSON object");
  backend.Add(cmd, f->common);
  return {cmd, [f] { return PruneCommand(*f); }};
}

Command AddEvents(CLI::App& app, BackendFlags& backend) {
  auto f = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("events", "Show a run's events");
  cmd->add_option("run", f->run_id, "run id")->required();
  cmd->add_flag("--json", f->json, "one JSON object per line");
  cmd->add_flag("--follow", f->follow, "keep printing until the run ends or pauses");
  backend.Add(cmd, f->common);
  return {cmd, [f] { return EventsCommand(f->common, f->run_id, f->json, f->follow); }};
}

Command AddWrites(CLI::App& app, BackendFlags& backend) {
  auto f = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "writes", "Show a run's external writes: each decision's write and its result");
  cmd->add_option("run", f->run_id, "run id")->required();
  cmd->add_flag("--json", f->json, "JSON output");
  backend.Add(cmd, f->common);
  return {cmd, [f] { return WritesCommand(f->common, f->run_id, f->json); }};
}

Command AddWorkflows(CLI::App& app, BackendFlags& backend) {
  auto f = std::make_shared<Args>();
  auto files = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(
      "workflows", "List the workflow catalog (after registering any --register files)");
  cmd->add_flag("--json", f->json, "JSON output");
  cmd->add_option("--register", *files,
                  "a workflow file to add to the catalog without starting a run (repeatable; "
                  "e.g. the child workflow of a kind: run step)");
  backend.Add(cmd, f->common);
  return {cmd, [f, files] { return WorkflowsCommand(f->common, f->json, *files); }};
}

Command AddBudgets(CLI::App& app, BackendFlags& backend) {
  auto f = std::make_shared<Args>();
  auto config = std::make_shared<std::string>();
  CLI::App* cmd =
      app.add_subcommand("budgets", "Show spent, reserved and left of each tenant's budget");
  cmd->add_flag("--json", f->json, "JSON output (amounts in micro-units)");
  cmd->add_option("--config", *config, kConfigHelp);
  backend.Add(cmd, f->common);
  return {cmd, [f, config] { return BudgetsCommand(f->common, *config, f->json); }};
}

Command AddRuns(CLI::App& app, BackendFlags& backend) {
  auto f = std::make_shared<RunsFlags>();
  CLI::App* cmd = app.add_subcommand("runs", "List runs, newest first, a page at a time");
  cmd->add_option("--status", f->status,
                  "only runs with this status (queued, running, paused, completed, ...)");
  cmd->add_option("--workflow", f->workflow, "only runs of this workflow");
  cmd->add_option("--parent", f->parent, "only the child runs of this run (its kind: run steps)");
  cmd->add_option("--limit", f->limit, "runs per page (at most 1000)")->capture_default_str();
  cmd->add_option("--cursor", f->cursor, "continue after a previous page (its next cursor)");
  cmd->add_flag("--json", f->json, "JSON output: {\"runs\": [...], \"next_cursor\": \"...\"}");
  backend.Add(cmd, f->common);
  return {cmd, [f] { return RunsCommand(*f); }};
}

Command AddDeadLetters(CLI::App& app, BackendFlags& backend) {
  auto f = std::make_shared<DeadLettersFlags>();
  CLI::App* cmd = app.add_subcommand(
      "dead-letters", "List queue messages that reached the delivery cap, or redrive them");
  auto* redrive_opt =
      cmd->add_option("--redrive", f->redrive, "deliver this dead letter's run again");
  auto* redrive_all_flag =
      cmd->add_flag("--redrive-all", f->redrive_all, "redrive every dead letter");
  auto* limit_opt = cmd->add_option("--limit", f->limit, "dead letters listed (at most 1000)")
                        ->capture_default_str();
  redrive_opt->excludes(redrive_all_flag)->excludes(limit_opt);
  redrive_all_flag->excludes(limit_opt);
  cmd->add_flag("--json", f->json, "JSON output");
  backend.Add(cmd, f->common);
  return {cmd, [f] { return DeadLettersCommand(*f); }};
}

// `token create|list|revoke`: one subcommand with three of its own, each
// with its own flags (BackendFlags applies the environment to each).
Command AddToken(CLI::App& app, BackendFlags& backend) {
  auto fc = std::make_shared<TokenFlags>();
  auto fl = std::make_shared<TokenFlags>();
  auto fr = std::make_shared<TokenFlags>();
  CLI::App* cmd = app.add_subcommand("token",
                                     "Create, list or revoke API tokens (roles: viewer, "
                                     "operator, approver, admin)");
  cmd->require_subcommand(1);
  CLI::App* create =
      cmd->add_subcommand("create", "Make a token and print it once; only its hash is stored");
  create->add_option("--name", fc->name, "who uses it (recorded as the reviewer of decisions)")
      ->required();
  create->add_option("--role", fc->role, "viewer, operator, approver or admin")->required();
  create->add_flag("--json", fc->json, "print {\"id\", \"name\", \"role\", \"token\"}");
  backend.Add(create, fc->common);
  CLI::App* list = cmd->add_subcommand("list", "List tokens (never the tokens themselves)");
  list->add_flag("--json", fl->json, "JSON output: {\"tokens\": [...]}");
  backend.Add(list, fl->common);
  CLI::App* revoke = cmd->add_subcommand("revoke", "Revoke an active token by id or name");
  revoke->add_option("token", fr->id_or_name, "token id (tok_...) or name")->required();
  revoke->add_flag("--json", fr->json, "print the revoked token as JSON");
  backend.Add(revoke, fr->common);
  return {cmd, [fc, fl, fr, create, list] {
            if (*create) return TokenCreateCommand(*fc);
            if (*list) return TokenListCommand(*fl);
            return TokenRevokeCommand(*fr);
          }};
}

Command AddSchedule(CLI::App& app, BackendFlags& backend) {
  auto fc = std::make_shared<ScheduleFlags>();
  auto fl = std::make_shared<ScheduleFlags>();
  auto fp = std::make_shared<ScheduleFlags>();
  auto fr = std::make_shared<ScheduleFlags>();
  auto fd = std::make_shared<ScheduleFlags>();
  CLI::App* cmd = app.add_subcommand(
      "schedule", "Create, list, pause, resume or delete schedules (runs on a cron schedule)");
  cmd->require_subcommand(1);
  CLI::App* create = cmd->add_subcommand(
      "create", "Start runs of a catalog workflow at the times a cron expression names");
  create->add_option("id", fc->id, "the schedule's id: 1 to 128 of A-Z a-z 0-9 _ . : -")
      ->required();
  create->add_option("--workflow", fc->workflow, "a workflow in the catalog (its latest version)")
      ->required();
  create->add_option("--cron", fc->cron,
                     "5 fields (minute hour day-of-month month day-of-week), 6 with seconds "
                     "first, or @hourly, @daily, @weekly, @monthly, @yearly")
      ->required();
  create->add_option("--timezone", fc->timezone, "IANA time zone the times are read in")
      ->capture_default_str();
  create->add_option("--input", fc->inputs, "an input of each run as key=value (repeatable)");
  create->add_option("--input-file", fc->input_file, "a JSON object file of inputs");
  create->add_option("--overlap", fc->overlap,
                     "the previous run unfinished at a tick: skip, allow or cancel")
      ->capture_default_str();
  create->add_option("--catch-up", fc->catch_up,
                     "ticks missed while no process fired them: none, latest or all (at most 100)")
      ->capture_default_str();
  create->add_flag("--json", fc->json, "print the schedule as JSON");
  backend.Add(create, fc->common);
  CLI::App* list = cmd->add_subcommand("list", "List schedules by id");
  list->add_flag("--json", fl->json, "JSON output: {\"schedules\": [...]}");
  backend.Add(list, fl->common);
  CLI::App* pause = cmd->add_subcommand("pause", "Pause a schedule: no tick fires");
  pause->add_option("id", fp->id, "schedule id")->required();
  pause->add_flag("--json", fp->json, "print the schedule as JSON");
  backend.Add(pause, fp->common);
  CLI::App* resume = cmd->add_subcommand(
      "resume", "Resume a schedule from the next tick (ticks passed while paused are skipped)");
  resume->add_option("id", fr->id, "schedule id")->required();
  resume->add_flag("--json", fr->json, "print the schedule as JSON");
  backend.Add(resume, fr->common);
  CLI::App* del =
      cmd->add_subcommand("delete", "Delete a schedule (the runs it started are left as they are)");
  del->add_option("id", fd->id, "schedule id")->required();
  backend.Add(del, fd->common);
  return {cmd, [fc, fl, fp, fr, fd, create, list, pause, resume] {
            if (*create) return ScheduleCreateCommand(*fc);
            if (*list) return ScheduleListCommand(*fl);
            if (*pause) return ScheduleChangeCommand(*fp, "pause");
            if (*resume) return ScheduleChangeCommand(*fr, "resume");
            return ScheduleChangeCommand(*fd, "delete");
          }};
}

Command AddMcp(CLI::App& app, BackendFlags& backend) {
  auto f = std::make_shared<McpFlags>();
  CLI::App* cmd = app.add_subcommand(
      "mcp",
      "Serve MCP (Model Context Protocol) tools on stdin/stdout for coding agents: list, read "
      "and follow runs, start, decide, cancel, rerun, signal, dead letters. Authenticates "
      "with the token in $RUNLOOM_TOKEN and allows what its role allows over the HTTP API. "
      "Executes no run: a `runloom worker` or `runloom serve` on the same --db does");
  cmd->add_option("--config", f->config,
                  "configuration file (else $RUNLOOM_CONFIG): the step kinds a workflow file "
                  "given to start_run is checked against");
  backend.Add(cmd, f->common);
  return {cmd, [f] { return McpCommand(*f); }};
}

Command AddBench(CLI::App& app, std::optional<std::string>& log_format) {
  auto f = std::make_shared<BenchFlags>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Measure runs of a 3-step noop workflow (SQLite by default, or --db)");
  cmd->add_option("--runs", f->runs, "number of runs")->capture_default_str();
  cmd->add_option("--executors", f->executors, "executor threads")->capture_default_str();
  AddRunsInFlight(cmd, f->runs_in_flight);
  cmd->add_flag("--llm", f->llm,
                "measure LLM-shaped load instead: --runs runs of three fake-provider calls of "
                "--llm-latency each on this process (wall time, runs held, threads, memory)");
  cmd->add_option("--llm-latency", f->llm_latency, "each fake model call's latency for --llm")
      ->capture_default_str();
  static_assert(kBenchProducersPerWorker == 8, "the --producers help says 8");
  cmd->add_option("--producers", f->producers,
                  "threads creating runs (default: 8 per worker process)");
  cmd->add_option("--workers", f->workers,
                  "worker processes (this one plus `runloom worker` children on the same "
                  "--db; needs --db)")
      ->capture_default_str();
  cmd->add_option("--rate", f->rate,
                  "runs created per second on a fixed schedule, all producers together "
                  "(0: as fast as admissions commit, i.e. saturation)")
      ->capture_default_str();
  cmd->add_option("--sync", f->sync, "SQLite synchronous: normal or full")->capture_default_str();
  cmd->add_option("--db", f->db, "backend (default: a fresh temp file; RUNLOOM_DB is not read)");
  cmd->add_option("--queue", f->queue,
                  "queue: redis://host:port[/n] (default: the store's own; RUNLOOM_QUEUE is not "
                  "read)");
  cmd->add_flag("--json", f->json, "print one JSON object");
  cmd->add_flag("--waiting", f->waiting,
                "measure --runs runs waiting at once without a worker instead: half parked at "
                "timers, half waiting for signals (memory, leases held, due-timer lateness, "
                "signal latency)");
  cmd->add_flag("--fairness", f->fairness,
                "measure fair dequeue instead: --runs runs of concurrency key A queued, then 10 "
                "of key B; B's start latency and the A runs started before it, with the key "
                "and without it (FIFO)");
  cmd->add_flag("--retention", f->retention,
                "measure a steady workload with retention and without instead: the SQLite "
                "file's size after each of 10 rounds of --runs/10 runs, bytes per run, and "
                "the creation latency");
  AddLogFormatFlag(cmd, log_format);
  return {cmd, [f] {
            if (f->retention) return RetentionBenchCommand(*f);
            if (f->llm) return LlmBenchCommand(*f);
            if (f->fairness) return FairnessBenchCommand(*f);
            return f->waiting ? WaitingBenchCommand(*f) : BenchCommand(*f);
          }};
}

}  // namespace
}  // namespace runloom::cli

int main(int argc, char** argv) {
#ifndef RUNLOOM_TESTING
  // Debian builds Abseil with its debug default: every Mutex acquisition
  // while another is held is checked for lock-order cycles (GraphCycles), about
  // 1 % of the CPU of `runloom bench` (perf). The shipped binary skips the
  // check; test builds (RUNLOOM_TESTING, the sanitizer jobs) keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
  namespace cli = runloom::cli;
  CLI::App app{"runloom: a durable run engine for LLM-agent pipelines"};
  app.require_subcommand(1);
  // The version (project(VERSION), runloom/version.h), the commit it was
  // built from, and the newest schema of each backend's database it reads
  // and writes (docs/operations.md "Versions and compatibility").
  app.set_version_flag("--version", absl::StrCat("runloom ", RUNLOOM_VERSION, "\ncommit ",
                                                 runloom::cli::BuildCommit(),
                                                 "\nschema: sqlite ", runloom::SqliteSchemaVersion(),
                                                 ", postgresql ", runloom::PostgresSchemaVersion()));
  cli::BackendFlags backend;
  const std::vector<cli::Command> commands = {
      cli::AddRun(app, backend),    cli::AddWorker(app, backend),
      cli::AddServe(app, backend),  cli::AddDecide(app, backend),
      cli::AddCancel(app, backend), cli::AddSignal(app, backend), cli::AddRerun(app, backend),
      cli::AddReset(app, backend),  cli::AddStatus(app, backend),
      cli::AddEvents(app, backend), cli::AddWorkflows(app, backend), cli::AddBackup(app, backend),
      cli::AddPrune(app, backend),
      cli::AddRuns(app, backend),   cli::AddDeadLetters(app, backend),
      cli::AddToken(app, backend),  cli::AddSchedule(app, backend), cli::AddBudgets(app, backend),
      cli::AddWrites(app, backend), cli::AddMcp(app, backend),
      cli::AddBench(app, backend.log_format),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : cli::kExitBadInput;
  }
  // Before any command runs, so a bad value writes nothing.
  const absl::StatusOr<runloom::LogFormat> log_format = cli::LogFormatSetting(backend.log_format);
  if (!log_format.ok()) return cli::BadInput(std::string(log_format.status().message()));
  runloom::SetDefaultLogFormat(*log_format);
  cli::SetStderrFormat(*log_format);
  backend.ApplyEnvironment();
  for (const cli::Command& c : commands) {
    if (*c.app) return c.run();
  }
  return cli::kExitBadInput;
}
