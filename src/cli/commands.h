// The `runloom` subcommands. main.cc parses flags with CLI11 and calls these;
// each returns the process exit code.
#pragma once

#include "runloom/config.h"
#include "runloom/engine.h"
#include "runloom/transport.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace prometheus {
class Exposer;
class Registry;
}  // namespace prometheus

namespace runloom::cli {

// Exit codes (docs/operations.md lists them).
inline constexpr int kExitCompleted = 0;
inline constexpr int kExitNotCompleted = 1;  // a terminal status other than completed
inline constexpr int kExitBadInput = 2;      // bad file, input, flag or run id; nothing written
inline constexpr int kExitPaused = 3;        // the run waits for a human decision
inline constexpr int kExitConflict =
    4;  // decide/cancel/rerun/signal refused: the run is not in a state that allows it
inline constexpr int kExitInterrupted = 130;  // SIGINT/SIGTERM: the run was released to the queue

// The stage-event settings of `run`, `worker` and `serve` (docs/operations.md, "Stage
// events"): on when `flag` (--stage-events) or else $RUNLOOM_STAGE_EVENTS
// is a redis://host:port[/db] URL, off when both are empty; the channel
// prefix is $RUNLOOM_STAGE_EVENTS_PREFIX (default "pipeline").
// kInvalidArgument naming the flag or variable for a malformed URL.
absl::StatusOr<StageEventOptions> StageEventsSetting(const std::string& flag);

// The step kinds of `run`, `worker` and `serve`: the built-ins, with the llm
// kind's model aliases routed by the configuration file `flag` (--config)
// or else $RUNLOOM_CONFIG (docs/operations.md, "Configuration file");
// without either, by the built-in fake provider alone. kInvalidArgument or
// kNotFound naming the file, the key and how to fix it.
absl::StatusOr<std::shared_ptr<StepRegistry>> StepKindsSetting(const std::string& flag);

// What a process that executes runs takes from the configuration file,
// read once (runloom/config.h's LoadConfigFile): the step kinds (as
// StepKindsSetting), each configured tenant's budget limit, the step kinds'
// default timeouts, and the file's `retention:` block over the commands'
// defaults (30 days, audit horizon 90 days; runloom/retention.h). Errors as
// StepKindsSetting's.
absl::StatusOr<ConfigFile> ConfigSetting(const std::string& flag);

// Writes the tenant budgets of the configuration file (`flag`, else
// $RUNLOOM_CONFIG) to the store's budget ledger (Store::SetTenantBudget):
// the configured limit of each tenant; what was spent is kept. OK without a
// configuration file. Errors name the file or the tenant.
absl::Status ApplyTenantBudgets(const std::string& flag, BudgetStore& store);
// An amount in price units ("2.50") as micro-units. kInvalidArgument naming
// `flag` for anything but a number >= 0 with at most 6 decimals.
absl::StatusOr<int64_t> BudgetFlag(const char* flag, const std::string& value);

struct CommonFlags {
  // The backend (OpenBackend's URL forms). Set by --db, else RUNLOOM_DB,
  // else this default.
  std::string db = "runloom.db";
  // The queue: "" = the store's own, else redis://host:port[/n]. Set by
  // --queue (an empty --queue means the store's own), else RUNLOOM_QUEUE.
  std::string queue;
  // Where db and queue came from, for error messages: "--db"/"--queue", the
  // environment variable's name, or "" (the default).
  std::string db_from;
  std::string queue_from;
  std::string sync = "normal";  // SQLite synchronous: normal | full
};

// `c` with RUNLOOM_DB and RUNLOOM_QUEUE applied to the values whose flag was
// not given (a flag beats the environment; an empty variable is unset).
CommonFlags WithEnvironment(CommonFlags c, bool db_given, bool queue_given);

// Prints why the backend `c` names could not be opened and returns the exit
// code: kExitBadInput when the flags or the database are unusable (a bad
// URL, not a file, not SQLite, another application's, a newer schema,
// unreadable, an unreachable server or one that refuses us), whichever
// command was given them;
// kExitNotCompleted for transient failures of an SQLite file (locked, I/O)
// and anything else.
int DbOpenFailure(const CommonFlags& c, const absl::Status& s);

// What every command that executes runs takes (`run`, `worker`, `serve`):
// one struct, one set of options (main.cc's AddExecutingFlags) and one
// function that turns it into engine options, so every process that
// executes runs has the same step kinds, stage events and tenant budgets.
struct ExecutingFlags {
  std::string config;        // --config FILE ("" = $RUNLOOM_CONFIG); see StepKindsSetting
  std::string stage_events;  // --stage-events redis://... ("" = $RUNLOOM_STAGE_EVENTS)
  // --park-sleeps-over DURATION: a sleep at least this long parks its run
  // (EngineOptions::park_sleeps_over).
  std::string park_sleeps_over = "5m";
  // --otlp-endpoint URL: where spans go (OTLP/HTTP JSON); "" = the
  // OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT variables, else off.
  std::string otlp_endpoint;
};

// `base` with the step kinds and tenant budgets (ConfigSetting), the stage events
// (StageEventsSetting), the sleep-parking threshold and the span exporter (SpansSetting) of `f`.
// Reads the configuration file and opens nothing, so a command calls it before the backend: an
// error (kInvalidArgument or kNotFound naming the flag, file or variable) leaves nothing written.
absl::StatusOr<EngineOptions> ExecutingEngineOptions(EngineOptions base, const ExecutingFlags& f);

// The process's span exporter for `flag` (--otlp-endpoint, else the
// OTEL_EXPORTER_OTLP_* variables; OTEL_EXPORTER_OTLP_HEADERS are sent with
// each post): nullptr when none is configured. It lives until the process
// exits, which sends what is queued (at most its timeout). kInvalidArgument
// naming the flag or variable for a URL that is not http(s) or malformed
// headers.
absl::StatusOr<SpanSink*> SpansSetting(const std::string& flag);

// `/metrics` (Prometheus text format) of `registry`, served on `address`
// (IPv4 HOST:PORT; port 0 picks a free one, see Exposer::GetListeningPorts)
// until the result is destroyed. kInvalidArgument naming --metrics-listen for
// a malformed address or one it cannot listen on.
absl::StatusOr<std::unique_ptr<prometheus::Exposer>> ServeMetrics(
    const std::string& address, const std::shared_ptr<prometheus::Registry>& registry);

struct RunFlags {
  CommonFlags common;
  std::string file;
  std::vector<std::string> inputs;  // k=v
  std::string input_file;
  std::string idempotency_key;
  std::string lease_ttl = "30s";
  bool json = false;
  bool auto_approve = false;  // approve every gate (demos, CI)
  // Admit the run (queued), print its id and exit 0; a worker executes it.
  bool detach = false;
  ExecutingFlags exec;
  std::string budget;  // --budget AMOUNT in price units ("" = none)
  int priority = -1;   // --priority 0-9; -1 = the workflow's `priority:`
};
int RunCommand(const RunFlags& flags);

struct WorkerFlags {
  CommonFlags common;
  bool until_idle = false;
  int executors = 4;
  int runs_in_flight = 0;  // EngineOptions::runs_in_flight (0 = executors)
  std::string lease_ttl = "30s";
  std::string queued_grace = "30s";
  // Deliveries of a queue message without an ack before it is dead-lettered.
  int max_deliveries = TransportOptions{}.max_deliveries;
  ExecutingFlags exec;
  std::string metrics_listen;  // --metrics-listen HOST:PORT: serve /metrics there ("" = off)
};
int WorkerCommand(const WorkerFlags& flags);

struct ServeFlags {
  CommonFlags common;
  std::string listen = "127.0.0.1:8080";
  int executors = 4;
  int runs_in_flight = 0;     // EngineOptions::runs_in_flight (0 = executors)
  bool no_executors = false;  // serve only; `runloom worker` processes execute
  int threads = 4;            // HTTP io threads
  bool insecure_no_auth = false;
  // --allow-kinds: a comma-separated list; std::nullopt = every kind.
  std::optional<std::string> allow_kinds;
  ExecutingFlags exec;
};
int ServeCommand(const ServeFlags& flags);

struct DecideFlags {
  CommonFlags common;
  std::string run_id;
  std::string digest;
  bool approve = false;
  bool reject = false;
  std::string edit_file;   // a JSON file with the edited proposal
  std::string revise;      // feedback text for request_revision
  std::string from_phase;  // with --revise
  std::string as;          // reviewer identity; default: $USER
};
int DecideCommand(const DecideFlags& flags);
int CancelCommand(const CommonFlags& common, const std::string& run_id);
int RerunCommand(const CommonFlags& common, const std::string& run_id, const std::string& phase,
                 const std::string& feedback);
int ResetCommand(const CommonFlags& common, bool yes);

// runloom signal RUN NAME [--data JSON | --data-file F] [--idempotency-key K]
struct SignalFlags {
  CommonFlags common;
  std::string run_id;
  std::string name;
  std::string data;       // the payload as JSON text; "" = none
  std::string data_file;  // or read from this file
  std::string idempotency_key;
};
int SignalCommand(const SignalFlags& flags);

int StatusCommand(const CommonFlags& common, const std::string& run_id, bool json);
// `runloom backup --to FILE`: an online copy of an SQLite database, consistent
// while runs execute; refuses a FILE that exists and a PostgreSQL database
// (exit 2).
int BackupCommand(const CommonFlags& common, const std::string& to);
// `runloom prune --older-than AGE [--workflow NAME] [--audit-horizon AGE]
// [--dry-run] [--json]` (issue 25, docs/operations.md "Retention"):
// deletes the terminal runs finished more than AGE ago, in batches, or with
// --dry-run counts them. Exit 2 for a bad AGE, nothing deleted.
struct PruneFlags {
  CommonFlags common;
  std::string older_than;             // required: "30d", "12h", ...
  std::string workflow;               // "" = every workflow
  std::string audit_horizon = "90d";  // RetentionPolicy::audit_horizon
  bool dry_run = false;
  bool json = false;
};
int PruneCommand(const PruneFlags& flags);
int EventsCommand(const CommonFlags& common, const std::string& run_id, bool json, bool follow);
// Registers each of `register_files` in the catalog (all checked first: one
// bad file registers none; exit 2), then lists the catalog.
int WorkflowsCommand(const CommonFlags& common, bool json,
                     const std::vector<std::string>& register_files);
// `runloom writes RUN`: the run's external writes (the write ledger), each
// with the decision it carried out and its result.
int WritesCommand(const CommonFlags& common, const std::string& run_id, bool json);
// `runloom budgets`: spent, reserved and left per tenant (with --config,
// the configured limits are written first).
int BudgetsCommand(const CommonFlags& common, const std::string& config, bool json);

struct RunsFlags {
  CommonFlags common;
  std::string status;    // "" = any; else a run status (bad: exit 2 listing the valid ones)
  std::string workflow;  // "" = any
  std::string parent;    // "" = any; else only this run's children (kind: run steps)
  int limit = 20;        // runs per page, 1..1000 (more is clamped to 1000)
  std::string cursor;    // "" = the first page; else a next_cursor a previous page printed
  bool json = false;
};
// Lists runs newest first, a page at a time; the text form ends with the
// command for the next page when there is one.
int RunsCommand(const RunsFlags& flags);

struct DeadLettersFlags {
  CommonFlags common;
  std::string redrive;  // a dead letter id to redrive; "" = none
  bool redrive_all = false;
  int limit = 100;  // dead letters listed, 1..1000
  bool json = false;
};
// Lists dead letters, or redrives one (--redrive) or all (--redrive-all).
int DeadLettersCommand(const DeadLettersFlags& flags);

// `runloom mcp` (mcp.cc): an MCP server on stdin/stdout (src/mcp/server.h)
// acting as the token in $RUNLOOM_TOKEN, with that token's role. It executes
// no run (a worker or serve does). No token, a malformed, unknown or revoked
// one, or a database that is not there: exit 2 before serving. Exit 0 when
// stdin ends.
inline constexpr const char* kMcpTokenVariable = "RUNLOOM_TOKEN";
struct McpFlags {
  CommonFlags common;
  std::string config;  // --config FILE ("" = $RUNLOOM_CONFIG): the step kinds workers have
};
int McpCommand(const McpFlags& flags);

// `runloom token create|list|revoke` (tokens.cc): API tokens with roles.
struct TokenFlags {
  CommonFlags common;
  std::string name;        // create: 1..64 printable ASCII, no spaces, not "tok_..."
  std::string role;        // create: viewer | operator | approver | admin
  std::string id_or_name;  // revoke
  bool json = false;
};
// Prints the new token once (stdout; the notice that it will not be shown
// again goes to stderr); stores only its hash. Bad name or role, or a name
// an active token has: exit 2, nothing written.
int TokenCreateCommand(const TokenFlags& flags);
// id, name, role, created, revoked: never a token or a hash.
int TokenListCommand(const TokenFlags& flags);
// Revokes the active token with this id, else this name; none: exit 2.
int TokenRevokeCommand(const TokenFlags& flags);

// `runloom schedule create|list|pause|resume|delete` (schedules.cc): runs of
// a catalog workflow on a cron schedule (docs/operations.md "Schedules").
struct ScheduleFlags {
  CommonFlags common;
  std::string id;
  std::string workflow;
  std::string cron;
  std::string timezone = "UTC";
  std::vector<std::string> inputs;  // --input NAME=VALUE
  std::string input_file;
  std::string overlap = "skip";
  std::string catch_up = "latest";
  bool json = false;
};
// Checks every field (exit 2 naming it, nothing written) and keeps it; its
// first tick is the first after now.
int ScheduleCreateCommand(const ScheduleFlags& flags);
int ScheduleListCommand(const ScheduleFlags& flags);
// pause | resume | delete; an unknown id: exit 2.
int ScheduleChangeCommand(const ScheduleFlags& flags, const std::string& action);

inline constexpr int kBenchProducersPerWorker = 8;
struct BenchFlags {
  int runs = 50000;
  // A service's shape: many executor threads (steps mostly wait on models and
  // tools) and several clients creating runs at once. More writers in flight
  // make bigger group commits.
  int executors = 64;
  // 0: kBenchProducersPerWorker per worker process. Each producer waits for
  // its admission's commit; with more worker processes, a fixed number of
  // them left the executors waiting for runs (docs/performance.md).
  int producers = 0;
  // Worker processes executing the runs: this one, plus workers - 1
  // `runloom worker` children on the same --db/--queue, each with
  // `executors` threads.
  int workers = 1;
  // Runs created per second, all producers together, on a fixed schedule
  // (run k is due k/rate s after the start; a producer that falls behind
  // does not wait): the latency at a load below saturation (issue 27).
  // 0 = as fast as the producers' admissions commit (saturation).
  double rate = 0;
  std::string sync = "normal";
  std::string db;     // "" = a fresh temp file
  std::string queue;  // "" = the store's own queue
  bool json = false;
  // Runs waiting at once without a worker instead (issue 23): half at
  // timers, half for signals (bench_waiting.cc).
  bool waiting = false;
  // Fair dequeue across concurrency keys instead (issue 23): --runs runs of
  // one key queued, then 10 of another; the second key's start latency,
  // fair and FIFO (bench_fairness.cc).
  bool fairness = false;
  // A steady workload with retention and without (issue 25): the file's
  // size round by round, bytes per run, creation latency
  // (bench_retention.cc).
  bool retention = false;
  // LLM-shaped load instead (issue 27): --runs runs of three fake-provider
  // calls of llm_latency each, on one worker process (bench_llm.cc).
  bool llm = false;
  std::string llm_latency = "2s";
  // EngineOptions::runs_in_flight (0 = executors).
  int runs_in_flight = 0;
};
int BenchCommand(const BenchFlags& flags);
int WaitingBenchCommand(const BenchFlags& flags);
int FairnessBenchCommand(const BenchFlags& flags);
int RetentionBenchCommand(const BenchFlags& flags);
int LlmBenchCommand(const BenchFlags& flags);
// The backend a benchmark opens, from its flags only: RUNLOOM_DB and
// RUNLOOM_QUEUE never send a benchmark's runs to the database or queue a
// shell points at.
CommonFlags BenchBackendFlags(const BenchFlags& f);
// This process's peak RSS, MiB.
double BenchPeakRssMb();
// The p-quantile (0..1) of `v` (reordered; 0 when empty).
double BenchPercentile(std::vector<double>& v, double p);

}  // namespace runloom::cli
