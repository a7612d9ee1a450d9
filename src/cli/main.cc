// runloom: flag parsing and dispatch only; the commands live in commands.cc.
#include "CLI/CLI.hpp"
#include "cli/commands.h"

#include "absl/synchronization/mutex.h"

#include <iostream>

// One flat table of every subcommand and flag, then the dispatch: long, but
// read top to bottom like the --help it produces.
int main(int argc, char** argv) {
#ifndef RUNLOOM_TESTING
  // Debian builds Abseil with its debug default: every Mutex acquisition
  // while another is held is checked for lock-order cycles (GraphCycles), about
  // 1 % of the CPU of `runloom bench` (perf). The shipped binary skips the
  // check; test builds (RUNLOOM_TESTING, the sanitizer jobs) keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
  using runloom::cli::kExitBadInput;
  CLI::App app{"runloom: a durable run engine for LLM-agent pipelines"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "runloom 0.1.0");

  constexpr const char* kStageEventsHelp =
      "publish stage events to this Redis (redis://host:port[/db]); default "
      "$RUNLOOM_STAGE_EVENTS, off when empty";
  auto add_db = [](CLI::App* sub, runloom::cli::CommonFlags& c) {
    sub->add_option("--db", c.db,
                    "backend: a SQLite file path, sqlite:///abs/path.db, sqlite://rel/path.db "
                    "or sqlite::memory:")
        ->capture_default_str();
  };

  runloom::cli::RunFlags run;
  CLI::App* run_cmd =
      app.add_subcommand("run", "Run a workflow file in this process until it ends or pauses");
  run_cmd->add_option("file", run.file, "workflow YAML file")->required();
  run_cmd->add_option("--input", run.inputs, "an input as key=value (repeatable)");
  run_cmd->add_option("--input-file", run.input_file, "a JSON object file of inputs");
  run_cmd->add_option("--idempotency-key", run.idempotency_key, "same key -> the same run");
  run_cmd->add_option("--lease-ttl", run.lease_ttl, "lease lifetime, e.g. 30s")
      ->capture_default_str();
  run_cmd->add_option("--sync", run.common.sync, "SQLite synchronous: normal or full")
      ->capture_default_str();
  run_cmd->add_flag("--json", run.json, "print the final run as JSON");
  run_cmd->add_option("--stage-events", run.stage_events, kStageEventsHelp);
  run_cmd->add_flag("--auto-approve", run.auto_approve,
                    "approve every approval gate automatically (reviewer \"auto\")");
  add_db(run_cmd, run.common);

  runloom::cli::WorkerFlags worker;
  CLI::App* worker_cmd =
      app.add_subcommand("worker", "Execute every unfinished run in the database");
  worker_cmd->add_flag("--until-idle", worker.until_idle,
                       "exit when no queued or running run is left");
  worker_cmd->add_option("--executors", worker.executors, "concurrent runs")->capture_default_str();
  worker_cmd->add_option("--lease-ttl", worker.lease_ttl, "lease lifetime")->capture_default_str();
  worker_cmd
      ->add_option("--queued-grace", worker.queued_grace,
                   "re-enqueue a queued run with no queue message after this long")
      ->capture_default_str();
  worker_cmd->add_option("--max-attempts", worker.max_attempts, "leases a new run may take")
      ->capture_default_str();
  worker_cmd->add_option("--sync", worker.common.sync, "SQLite synchronous: normal or full")
      ->capture_default_str();
  worker_cmd->add_option("--stage-events", worker.stage_events, kStageEventsHelp);
  add_db(worker_cmd, worker.common);

  runloom::cli::DecideFlags decide;
  CLI::App* decide_cmd = app.add_subcommand("decide", "Decide on a paused run's approval gate");
  decide_cmd->add_option("run", decide.run_id, "run id")->required();
  decide_cmd->add_option("--digest", decide.digest, "digest of the proposal you reviewed")
      ->required();
  auto* approve_flag = decide_cmd->add_flag("--approve", decide.approve, "approve the proposal");
  auto* reject_flag =
      decide_cmd->add_flag("--reject", decide.reject, "reject: the run ends rejected");
  auto* edit_opt = decide_cmd->add_option("--edit", decide.edit_file,
                                          "approve your edited proposal (a JSON file)");
  auto* revise_opt =
      decide_cmd->add_option("--revise", decide.revise, "request a revision with this feedback");
  decide_cmd->add_option("--from", decide.from_phase, "with --revise: the phase to rerun from")
      ->needs(revise_opt);
  decide_cmd->add_option("--as", decide.as, "reviewer name (default: $USER)");
  approve_flag->excludes(reject_flag)->excludes(edit_opt)->excludes(revise_opt);
  reject_flag->excludes(edit_opt)->excludes(revise_opt);
  edit_opt->excludes(revise_opt);
  add_db(decide_cmd, decide.common);

  runloom::cli::CommonFlags cancel_db;
  std::string cancel_run;
  CLI::App* cancel_cmd = app.add_subcommand("cancel", "Cancel a run");
  cancel_cmd->add_option("run", cancel_run, "run id")->required();
  add_db(cancel_cmd, cancel_db);

  runloom::cli::CommonFlags rerun_db;
  std::string rerun_run, rerun_from, rerun_feedback;
  CLI::App* rerun_cmd =
      app.add_subcommand("rerun", "Rerun a finished run from a phase (a new revision)");
  rerun_cmd->add_option("run", rerun_run, "run id")->required();
  rerun_cmd->add_option("--from", rerun_from, "the phase to rerun from")->required();
  rerun_cmd->add_option("--feedback", rerun_feedback,
                        "feedback for the new revision (run.feedback)");
  add_db(rerun_cmd, rerun_db);

  runloom::cli::CommonFlags reset_db;
  bool reset_yes = false;
  CLI::App* reset_cmd = app.add_subcommand("reset", "Admin reset: cancel every unfinished run");
  reset_cmd->add_flag("--yes", reset_yes, "confirm");
  add_db(reset_cmd, reset_db);

  runloom::cli::CommonFlags status_db;
  std::string status_run;
  bool status_json = false;
  CLI::App* status_cmd = app.add_subcommand("status", "Show a run and its steps");
  status_cmd->add_option("run", status_run, "run id")->required();
  status_cmd->add_flag("--json", status_json, "JSON output");
  add_db(status_cmd, status_db);

  runloom::cli::CommonFlags events_db;
  std::string events_run;
  bool events_json = false, events_follow = false;
  CLI::App* events_cmd = app.add_subcommand("events", "Show a run's events");
  events_cmd->add_option("run", events_run, "run id")->required();
  events_cmd->add_flag("--json", events_json, "one JSON object per line");
  events_cmd->add_flag("--follow", events_follow, "keep printing until the run ends or pauses");
  add_db(events_cmd, events_db);

  runloom::cli::CommonFlags wf_db;
  bool wf_json = false;
  CLI::App* wf_cmd = app.add_subcommand("workflows", "List the workflow catalog");
  wf_cmd->add_flag("--json", wf_json, "JSON output");
  add_db(wf_cmd, wf_db);

  runloom::cli::RunsFlags runs;
  CLI::App* runs_cmd = app.add_subcommand("runs", "List runs, newest first, a page at a time");
  runs_cmd->add_option("--status", runs.status,
                       "only runs with this status (queued, running, paused, completed, ...)");
  runs_cmd->add_option("--workflow", runs.workflow, "only runs of this workflow");
  runs_cmd->add_option("--limit", runs.limit, "runs per page (at most 1000)")
      ->capture_default_str();
  runs_cmd->add_option("--cursor", runs.cursor, "continue after a previous page (its next cursor)");
  runs_cmd->add_flag("--json", runs.json,
                     "JSON output: {\"runs\": [...], \"next_cursor\": \"...\"}");
  add_db(runs_cmd, runs.common);

  runloom::cli::BenchFlags bench;
  CLI::App* bench_cmd =
      app.add_subcommand("bench", "Measure runs of a 3-step noop workflow on the SQLite backend");
  bench_cmd->add_option("--runs", bench.runs, "number of runs")->capture_default_str();
  bench_cmd->add_option("--executors", bench.executors, "executor threads")->capture_default_str();
  bench_cmd->add_option("--producers", bench.producers, "threads creating runs")
      ->capture_default_str();
  bench_cmd->add_option("--sync", bench.sync, "SQLite synchronous: normal or full")
      ->capture_default_str();
  bench_cmd->add_option("--db", bench.db, "database file (default: a fresh temp file)");
  bench_cmd->add_flag("--json", bench.json, "print one JSON object");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kExitBadInput;
  }
  if (*run_cmd) return runloom::cli::RunCommand(run);
  if (*worker_cmd) return runloom::cli::WorkerCommand(worker);
  if (*decide_cmd) return runloom::cli::DecideCommand(decide);
  if (*cancel_cmd) return runloom::cli::CancelCommand(cancel_db, cancel_run);
  if (*rerun_cmd)
    return runloom::cli::RerunCommand(rerun_db, rerun_run, rerun_from, rerun_feedback);
  if (*reset_cmd) return runloom::cli::ResetCommand(reset_db, reset_yes);
  if (*status_cmd) return runloom::cli::StatusCommand(status_db, status_run, status_json);
  if (*events_cmd)
    return runloom::cli::EventsCommand(events_db, events_run, events_json, events_follow);
  if (*wf_cmd) return runloom::cli::WorkflowsCommand(wf_db, wf_json);
  if (*runs_cmd) return runloom::cli::RunsCommand(runs);
  if (*bench_cmd) return runloom::cli::BenchCommand(bench);
  return kExitBadInput;
}
