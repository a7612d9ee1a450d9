// Issue 21 §3: the kill campaign. Real `runloom worker` processes on three
// backends (several processes sharing one SQLite file; PostgreSQL alone;
// PostgreSQL + Redis Streams), a workload with every kind of promise in it,
// and faults thrown at it while a client records the history; then a checker
// holds the history, the store, the workers' ledger, the actions server and
// the budget ledger to the promises of the simulation (docs/reliability.md).
//
// The workload (two workflows, half the runs each): s1 an exec step that
// appends "RUN REVISION STEP WORKER" to a ledger file and works 100 ms;
// s2 an `llm` call on a priced model of a scripted OpenAI-compatible server
// (every 7th request answered 429), under the run's tenant budget (t1 ample,
// t2 small enough to run out: its later runs end budget_stopped); s3, in
// `campaign_gated` only, an approval gate that two `runloom decide`
// processes race to decide (approve against approve or reject, under
// reviewer names of their own); s4 an `http` write to the example actions
// server (its first answers dropped after applying, so some are reconciled
// by lookup); s5 the ledger step again. The client admits runs with
// `runloom run --detach` while the faults go on, cancels some at a random
// moment (`runloom cancel`) and reruns some finished ones from s4
// (`runloom rerun --from p4`). Each worker runs two executors.
//
// The faults: SIGKILL of a random worker every 1-2 s (and a restart of its
// slot), SIGSTOP of one for twice the lease TTL, one worker's wall clock 2 s
// ahead for the whole campaign (libfaketime, Debian's `faketime`); on
// PostgreSQL also a restart of the server and a partition of one worker
// through the test's TCP proxy (cut once, stalled once, each for twice the
// TTL); with Redis also a restart of Redis without persistence.
//
// The checker: every admitted run ended, honestly (completed; rejected only
// when the winning decision was a reject; cancelled only when a cancel was
// sent; budget_stopped only for t2); one decision per pause, of each racing
// pair at most one accepted (exit 0) and the accepted one is the recorded
// one; each recorded step output written by the holder of the run's lease;
// each step executed once plus the repeats each charged to a fault of the
// instance that lost it; every ledger line by a lease holder; at most one
// action applied per run, exactly one for each run whose write step
// succeeded, each under its own Idempotency-Key; no tenant's spent plus
// reserved above its limit (checked as the campaign goes and at the end),
// nothing left reserved. Recovery per kill: from the SIGKILL to the next
// step.started of each run the killed instance held, by another instance;
// and to the sweeper's run.lease_expired.
//
// Scale: the test command runs RUNLOOM_CAMPAIGN_KILLS=50 (17 + 17 + 16
// kills); the full campaign is RUNLOOM_CAMPAIGN_KILLS=1000
// (docs/reliability.md has the command and its figures). RUNLOOM_CAMPAIGN_SEED
// replays the client's and the faults' choices (timing still varies).
#include "runloom/backend.h"
#include "runloom/budget_ledger.h"
#include "runloom/engine.h"
#include "runloom/events.h"
#include "runloom/mutex.h"
#include "runloom/run.h"
#include "runloom/status.h"
#include "runloom/store.h"

#include "engine/rules/step_counts.h"
#include "testing/scripted_http_server.h"
#include "testing/tcp_proxy.h"
#include "testing/test_servers.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "actions_server/actions_server.h"
#include "gtest/gtest.h"
#include "integration/cli_harness.h"
#include "nlohmann/json.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <signal.h>
#include <spawn.h>
#include <sstream>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <tuple>
#include <unistd.h>
#include <utility>
#include <vector>

extern char** environ;

namespace runloom {
namespace {

using ::runloom::testing::MakeTempDir;
using ::runloom::testing::ReadFile;
using ::runloom::testing::RunTestServersScript;
using ::runloom::testing::WriteFile;
using json = nlohmann::json;

constexpr char kGated[] = "campaign_gated";
constexpr char kPlain[] = "campaign_plain";
// How long after a worker's start before a server may be restarted.
constexpr absl::Duration kSettle = absl::Seconds(2);
// The skewed worker's wall clock is this far ahead. The lease protocol
// tolerates less than TTL - heartbeat (2/3 of the TTL, docs/reliability.md).
constexpr char kSkew[] = "+2s";
constexpr char kLibFaketime[] = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";
// The scripted model's answer: 40 prompt tokens at 1 per 1,000 and 180
// completion tokens at 2 per 1,000 cost 0.4 price units. Within the worst
// case each call reserves (the prompt's ~54 bytes as tokens, max_tokens 200):
// a provider that answered more than that (200 prompt tokens, as this model
// once did) makes a settle book more than was reserved, and spent plus
// reserved may then pass the limit by the difference, which the checker
// (rightly) reports as an overspend.
constexpr int kPromptTokens = 40;
constexpr int kCompletionTokens = 180;
constexpr int64_t kCallMicros = 400'000;  // one answered call's cost
constexpr int kT2Budget = 6;              // price units: t2 runs out after about a dozen calls

enum class Kind { kSqlite, kPostgres, kPostgresRedis };

std::string KindName(Kind k) {
  switch (k) {
    case Kind::kSqlite:
      return "SQLite, one file shared by the processes";
    case Kind::kPostgres:
      return "PostgreSQL alone";
    case Kind::kPostgresRedis:
      return "PostgreSQL + Redis";
  }
  return "?";
}

struct CampaignConfig {
  Kind kind = Kind::kSqlite;
  int kills = 17;
  int workers = 3;
  int executors = 2;   // per worker
  int stops = 1;       // SIGSTOP for 2 * lease_ttl, then SIGCONT
  int in_flight = 24;  // runs the client keeps unfinished while the faults go on
  absl::Duration lease_ttl = absl::Seconds(5);
  absl::Duration fault_min = absl::Milliseconds(1000);
  absl::Duration fault_max = absl::Milliseconds(2000);
  absl::Duration drain = absl::Minutes(4);  // after the last fault, for every run to end
  double cancel_share = 0.06;
  double rerun_share = 0.08;
  double t2_share = 0.2;
  uint64_t seed = 0;
};

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  int out = 0;
  return v != nullptr && absl::SimpleAtoi(v, &out) && out > 0 ? out : fallback;
}

// The ledger step: one short O_APPEND write (lines never interleave) naming
// the run, its revision, the step and the worker instance (CHAOS_WORKER,
// from the worker's environment), then 100 ms of work, then the output
// {"worker": ...}: the step record says which execution was recorded.
std::string LedgerStep(const std::string& id, const std::string& phase) {
  const json command = {"/bin/sh", "-c",
                        R"(printf '%s %s %s %s\n' "$RUNLOOM_RUN_ID" "$CHAOS_REV" )"
                        R"("$RUNLOOM_STEP_PATH" "$CHAOS_WORKER" >> "$CHAOS_LEDGER" && sleep 0.1 )"
                        R"(&& printf '{"worker": "%s"}\n' "$CHAOS_WORKER")"};
  return absl::StrCat("  - id: ", id, "\n    phase: ", phase,
                      "\n    kind: exec\n    command: ", command.dump(),
                      "\n    env: {CHAOS_REV: \"{{ run.revision }}\"}\n");
}

std::string WorkflowYaml(bool gated) {
  std::string yaml = absl::StrCat(
      "name: ", gated ? kGated : kPlain,
      "\ndescription: the kill campaign's workload\n"
      "tenant: tenant\n"
      // Runs outlive many kills: the attempt cap is the workflow's, stored
      // on each run when it is admitted (issue 28).
      "max_attempts: 50\n"
      "inputs:\n  tenant: {type: string}\n  actions_url: {type: string}\n"
      "steps:\n",
      LedgerStep("s1", "p1"),
      "  - id: s2\n    phase: p2\n    kind: llm\n    model: priced\n"
      "    prompt: \"summarize run {{ run.id }}: a b c d e f g h\"\n"
      "    retry: {max_attempts: 4, initial_delay: 100ms, on: [rate_limited, unavailable]}\n");
  if (gated) {
    absl::StrAppend(&yaml,
                    "  - id: s3\n    phase: p3\n    kind: approval\n    title: campaign review\n"
                    "    proposal: {action: apply, run: \"{{ run.id }}\"}\n"
                    "    allow: [approve, reject]\n");
  }
  absl::StrAppend(&yaml,
                  "  - id: s4\n    phase: p4\n    kind: http\n    method: POST\n"
                  "    url: \"{{ inputs.actions_url }}/actions\"\n"
                  "    write: true\n    action: apply\n"
                  "    body: {run: \"{{ run.id }}\", step: s4}\n"
                  "    expect: [200, 201]\n"
                  "    lookup: {url: \"{{ inputs.actions_url }}/actions/lookup\"}\n"
                  "    retry: {max_attempts: 8, initial_delay: 200ms, on: [unavailable]}\n",
                  LedgerStep("s5", "p5"));
  return yaml;
}

std::string ConfigYaml(const std::string& model_url) {
  return absl::StrCat(
      "providers:\n  scripted:\n    kind: openai\n    base_url: ", model_url,
      "/v1\n    max_concurrency: 8\n    timeout: 10s\n"
      "    retry: {max_attempts: 3, initial_delay: 50ms, max_delay: 1s}\n"
      "models:\n  priced: {provider: scripted, model: campaign-model, input_price_per_1k: 1, "
      "output_price_per_1k: 2, max_tokens: 200}\n"
      "tenants:\n  t1: {budget: 100000}\n  t2: {budget: ",
      kT2Budget, "}\n");
}

// posix_spawn, not fork: this process runs server threads (the model, the
// actions server, the proxy), and a forked child may touch only
// async-signal-safe calls before exec. stdout and stderr go to `log`.
pid_t Spawn(const std::vector<std::string>& args, const std::string& log,
            const std::vector<std::string>& env_first) {
  std::vector<std::string> env = env_first;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);  // env_first wins
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string bin = testing::Binary();
  std::vector<std::string> copy = args;
  std::vector<char*> argv = {bin.data()};
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

// The exit code of `pid` (128 + signal), after waiting (`flags` 0) or not
// (WNOHANG: nullopt while it runs).
std::optional<int> Reap(pid_t pid, int flags) {
  int status = 0;
  pid_t r = 0;
  while ((r = waitpid(pid, &status, flags)) < 0 && errno == EINTR) {
  }
  if (r != pid) return std::nullopt;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A PostgreSQL and a Redis of this test alone, stopped when it ends.
class PrivateServers {
 public:
  PrivateServers() : dir_(MakeTempDir("campaign-servers")) {}
  ~PrivateServers() { RunTestServersScript("stop", dir_); }
  PrivateServers(const PrivateServers&) = delete;
  PrivateServers& operator=(const PrivateServers&) = delete;

  bool Start() {
    if (RunTestServersScript("start", dir_) != 0) return false;
    postgres_url_ = FirstLine(dir_ + "/postgres.url");
    redis_url_ = FirstLine(dir_ + "/redis.url");
    return !postgres_url_.empty() && !redis_url_.empty();
  }
  bool RestartPostgres() { return RunTestServersScript("restart-postgres", dir_) == 0; }
  bool RestartRedis() { return RunTestServersScript("restart-redis", dir_) == 0; }
  const std::string& postgres_url() const { return postgres_url_; }
  const std::string& redis_url() const { return redis_url_; }

 private:
  static std::string FirstLine(const std::string& path) {
    std::string text = ReadFile(path);
    return text.substr(0, text.find('\n'));
  }

  std::string dir_;
  std::string postgres_url_;
  std::string redis_url_;
};

// One `runloom worker` process: a slot's generation.
struct Instance {
  std::string label;  // "w<slot>g<generation>": CHAOS_WORKER in its steps
  pid_t pid = -1;
  std::string log;
  int faults = 0;    // kills, stops and partitions it suffered
  int restarts = 0;  // server restarts it lived through
  bool alive = true;
  bool partitioned = false;  // it lived through a partition
  int exit_code = -1;
  absl::Time started;
  absl::Time ended;
};

// The worker slots, each running one instance at a time. Slot 0 reaches
// PostgreSQL through the proxy (when there is one); the last slot's clock
// is skewed.
class Workers {
 public:
  Workers(std::vector<std::vector<std::string>> args, std::string dir, std::string ledger)
      : args_(std::move(args)),
        dir_(std::move(dir)),
        ledger_(std::move(ledger)),
        slots_(args_.size()) {}
  ~Workers() {
    for (int s = 0; s < slots(); ++s) {
      if (Instance* i = Current(s); i != nullptr && i->alive) {
        kill(i->pid, SIGKILL);
        ReapInstance(*i, 0);
      }
    }
  }
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;

  bool StartAll() {
    for (int s = 0; s < slots(); ++s) {
      if (!Spawn(s)) return false;
    }
    return true;
  }
  int slots() const { return static_cast<int>(slots_.size()); }
  Instance* Current(int slot) {
    return slots_[slot].empty() ? nullptr : &instances_[slots_[slot].back()];
  }

  // SIGKILL, reap, start the slot's next generation.
  bool Kill(int slot) {
    Instance* i = Current(slot);
    if (!i->alive) return false;
    ++i->faults;
    kills_.push_back({i->label, absl::Now()});
    kill(i->pid, SIGKILL);
    ReapInstance(*i, 0);
    return Spawn(slot);
  }
  void Stop(int slot) {
    ++Current(slot)->faults;
    kill(Current(slot)->pid, SIGSTOP);
  }
  void Continue(int slot) { kill(Current(slot)->pid, SIGCONT); }
  // Slot 0 is cut off (or no longer): its instance suffers a fault, and
  // every instance it starts meanwhile may exit at once (a worker that
  // cannot reach its database as it opens exits 2, by contract).
  void SetPartitioned(bool on) {
    partition_on_ = on;
    if (on) {
      ++Current(0)->faults;
      Current(0)->partitioned = true;
    }
  }
  void ServerRestarted() {
    for (Instance& i : instances_) i.restarts += i.alive ? 1 : 0;
  }

  // Instances that exited on their own are restarted; returns them.
  // Instances that exited on their own are restarted (at most once a
  // second per slot); returns the ones that exited now.
  std::vector<std::string> RestartExited() {
    std::vector<std::string> out;
    const absl::Time now = absl::Now();
    for (int s = 0; s < slots(); ++s) {
      Instance* i = Current(s);
      if (ReapInstance(*i, WNOHANG)) {
        out.push_back(i->label);
        if (!i->partitioned) {
          std::cerr << "campaign: worker " << i->label << " exited by itself (" << i->exit_code
                    << "); the end of its log:\n"
                    << Tail(ReadFile(i->log)) << "\n";
        }
        respawn_at_[s] = i->started + absl::Seconds(1);
      }
      if (!i->alive && now >= respawn_at_[s]) Spawn(s);
    }
    return out;
  }
  bool Alive(int slot) { return Current(slot)->alive; }

  // SIGTERM to every live instance; waits. False when one did not exit 0,
  // except an instance started on the partitioned slot that could not reach
  // its database as it opened (exit 2, by contract, as RestartExited allows:
  // the partition may heal only just before this, while it still waits).
  bool StopAll() {
    bool ok = true;
    for (int s = 0; s < slots(); ++s) {
      Instance* i = Current(s);
      if (!i->alive) continue;
      kill(i->pid, SIGCONT);
      // A worker spawned just before the stop may not have set up its signal
      // handling yet: SIGTERM's default action would end it with 143 (seen
      // once, with an empty log). It logs only after that set-up: wait, a
      // bounded time, for its first line or its end.
      const absl::Time until = absl::Now() + absl::Seconds(10);
      while (ReadFile(i->log).empty() && absl::Now() < until && !ReapInstance(*i, WNOHANG)) {
        absl::SleepFor(absl::Milliseconds(20));
      }
      if (i->alive) {
        kill(i->pid, SIGTERM);
        ReapInstance(*i, 0);
      }
      if (i->exit_code == 2 && i->partitioned &&
          absl::StrContains(ReadFile(i->log), "cannot connect")) {
        std::cerr << "campaign: worker " << i->label
                  << " opened during the partition and could not connect (exit 2, allowed)\n";
        continue;
      }
      if (i->exit_code != 0) {
        ok = false;
        std::cerr << "campaign: worker " << i->label << " stopped with " << i->exit_code
                  << "; the end of its log:\n"
                  << Tail(ReadFile(i->log)) << "\n";
      }
    }
    return ok;
  }

  absl::Time last_spawn() const { return last_spawn_; }
  struct KillAt {
    std::string label;
    absl::Time at;
  };
  const std::vector<KillAt>& kills() const { return kills_; }
  const std::deque<Instance>& instances() const { return instances_; }
  // The instance that had `pid` at `at`: PIDs are reused (pid_max is often
  // 32768, and the campaign starts thousands of processes). `at` is a store
  // timestamp, which on SQLite comes from the writer's own clock (the skewed
  // slot's runs 2 s ahead): an instance counts from its start to 5 s after
  // its end.
  const Instance* ByPid(pid_t pid, absl::Time at) const {
    auto it = by_pid_.find(pid);
    if (it == by_pid_.end()) return nullptr;
    for (auto k = it->second.rbegin(); k != it->second.rend(); ++k) {
      const Instance& i = instances_[*k];
      if (at >= i.started - absl::Seconds(1) && (i.alive || at <= i.ended + absl::Seconds(5))) {
        return &i;
      }
    }
    return nullptr;
  }
  const Instance* ByLabel(const std::string& label) const {
    auto it = by_label_.find(label);
    return it == by_label_.end() ? nullptr : &instances_[it->second];
  }

 private:
  static std::string Tail(const std::string& s) {
    return s.size() <= 4000 ? s : s.substr(s.size() - 4000);
  }

  bool Spawn(int slot) {
    Instance i;
    i.label = absl::StrCat("w", slot, "g", slots_[slot].size());
    i.log = absl::StrCat(dir_, "/", i.label, ".log");
    std::vector<std::string> env = {absl::StrCat("CHAOS_WORKER=", i.label),
                                    absl::StrCat("CHAOS_LEDGER=", ledger_)};
    if (slot == slots() - 1) {
      // Only the wall clock: timeouts and sleeps keep the true monotonic one.
      env.push_back(absl::StrCat("LD_PRELOAD=", kLibFaketime));
      env.push_back(absl::StrCat("FAKETIME=", kSkew));
      env.push_back("FAKETIME_DONT_FAKE_MONOTONIC=1");
    }
    i.partitioned = slot == 0 && partition_on_;
    i.started = absl::Now();
    i.pid = runloom::Spawn(args_[slot], i.log, env);
    if (i.pid < 0) return false;
    by_pid_[i.pid].push_back(instances_.size());
    by_label_[i.label] = instances_.size();
    slots_[slot].push_back(instances_.size());
    instances_.push_back(std::move(i));
    last_spawn_ = absl::Now();
    return true;
  }

  // True when `i` was reaped now (`flags` 0 waits).
  static bool ReapInstance(Instance& i, int flags) {
    if (!i.alive) return false;
    std::optional<int> code = Reap(i.pid, flags);
    if (!code) return false;
    i.alive = false;
    i.ended = absl::Now();
    i.exit_code = *code;
    return true;
  }

  std::vector<std::vector<std::string>> args_;
  std::string dir_;
  std::string ledger_;
  std::vector<std::vector<size_t>> slots_;  // indexes into instances_, oldest first
  std::deque<Instance> instances_;
  std::map<pid_t, std::vector<size_t>> by_pid_;  // oldest first
  std::map<std::string, size_t> by_label_;
  absl::Time last_spawn_ = absl::InfinitePast();
  std::vector<KillAt> kills_;
  bool partition_on_ = false;
  std::map<int, absl::Time> respawn_at_;
};

// ---- the history the client records ----

// One client command: what it asked, and how it ended (its exit code; -1
// while it runs).
struct Op {
  std::string what;  // admit, decide, cancel, rerun
  std::string run;   // "" for an admission until it answers
  std::string arg;   // admit: the workflow and tenant; decide: the reviewer and decision
  absl::Time sent;
  absl::Time answered;
  int exit_code = -1;
  pid_t pid = -1;
  std::string log;
  int pair = -1;  // decide: the racing pair it belongs to
};

struct RunState {
  std::string workflow;
  std::string tenant;
  std::optional<absl::Time> cancel_at;  // the client's plan
  bool rerun_planned = false;
  bool rerun_sent = false;
  bool cancel_sent = false;
  bool ended = false;  // seen at rest (terminal) with no command of the client pending on it
  absl::Time next_decision = absl::InfinitePast();
  int pending = 0;  // client commands in flight on it
};

class History {
 public:
  explicit History(std::string path) : path_(std::move(path)) {}
  Op& Add(Op op) {
    ops_.push_back(std::move(op));
    return ops_.back();
  }
  std::deque<Op>& ops() { return ops_; }
  // One JSON line per command, in the order sent.
  void Write() const {
    std::ofstream out(path_);
    for (const Op& op : ops_) {
      out << json{{"what", op.what},
                  {"run", op.run},
                  {"arg", op.arg},
                  {"pair", op.pair},
                  {"sent", absl::FormatTime(op.sent)},
                  {"answered", absl::FormatTime(op.answered)},
                  {"exit_code", op.exit_code}}
                 .dump()
          << "\n";
    }
  }

 private:
  std::string path_;
  std::deque<Op> ops_;
};

// ---- recovery times ----

struct HeldEvent {
  absl::Time at;
  std::string type;
  std::string holder;
};

// From the kill to the run's next step.started under another holder (or,
// with `type` run.lease_expired, to the sweeper re-enqueuing it), when the
// killed instance held the run at the kill; nullopt otherwise.
std::optional<absl::Duration> RecoveryOf(const std::vector<HeldEvent>& events,
                                         const std::string& killed, absl::Time kill_at,
                                         std::string_view type = event_types::kStepStarted) {
  std::string holder;
  size_t i = 0;
  for (; i < events.size() && events[i].at <= kill_at; ++i) {
    if (events[i].type == event_types::kRunStarted) holder = events[i].holder;
    if (events[i].type == event_types::kRunFinished || events[i].type == event_types::kRunPaused ||
        events[i].type == event_types::kRunReleased) {
      holder.clear();
    }
  }
  if (holder != killed) return std::nullopt;
  for (; i < events.size(); ++i) {
    if (events[i].type == event_types::kRunFinished) return std::nullopt;
    if (events[i].type == type &&
        (type != event_types::kStepStarted || events[i].holder != killed)) {
      return events[i].at - kill_at;
    }
  }
  return std::nullopt;
}

std::string Percentiles(std::vector<absl::Duration> d, std::string_view unit) {
  if (d.empty()) return "none measured";
  std::sort(d.begin(), d.end());
  auto at = [&](double q) {
    const size_t k = std::min(d.size() - 1, static_cast<size_t>(q * static_cast<double>(d.size())));
    return absl::StrFormat("%.2f s", absl::ToDoubleSeconds(d[k]));
  };
  return absl::StrCat("p50 ", at(0.50), ", p99 ", at(0.99), ", max ", at(1.0), " (", d.size(), " ",
                      std::string(unit), ")");
}

// "host:pid" -> pid; -1 when malformed.
// "<host>:<pid>", or the default owner name with the holder's identity
// after it, "<host>:<pid>~<boot id>~<pid ns>~<start time>"
// (engine/service/lease_holder.h).
pid_t OwnerPid(const std::string& owner) {
  int pid = -1;
  const std::string name = owner.substr(0, owner.find('~'));
  const size_t colon = name.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(name.substr(colon + 1), &pid)) return -1;
  return pid;
}

struct Figures {
  int runs = 0;
  std::map<std::string, int> ended;  // status -> runs
  int kills = 0;
  int stops = 0;
  int postgres_restarts = 0;
  int redis_restarts = 0;
  int partitions = 0;
  int self_exits = 0;
  int decisions_raced = 0;
  int decisions_lost = 0;  // exit 4 of the racing loser
  int cancels = 0;
  int reruns = 0;
  int preflight_refused = 0;  // admissions of t2 refused once its budget was spent
  int ledger_lines = 0;
  int repeats = 0;
  int repeats_allowed = 0;
  int cut_by_cancel = 0;
  int actions_applied = 0;
  int model_requests = 0;
  int model_429s = 0;
  int64_t t1_spent = 0;
  int64_t t2_spent = 0;
  int budget_checks = 0;
  int64_t t1_paid = 0;  // what the scripted provider answered for t1's runs
  int64_t t2_paid = 0;
  int leases_expired = 0;
  int leases_lost = 0;
  int max_run_attempts = 0;
  std::vector<absl::Duration> recovery;
  std::vector<absl::Duration> requeued;
  double faults_s = 0;
  double total_s = 0;
};

// The invariant violations the checker counts (each also an ADD_FAILURE).
struct Violations {
  int lost = 0;               // a run not at rest, or at rest dishonestly
  int double_decisions = 0;   // a pause decided twice, or two accepted racers
  int stale_writes = 0;       // a recorded output not by the lease holder
  int unleased = 0;           // a ledger line by an instance that never held the run
  int duplicate_effects = 0;  // two actions applied for one write, or a key twice
  int overspent = 0;          // spent + reserved above a tenant's limit, or below its bill
  int bad_logs = 0;           // events after run.finished, a step recorded twice ...
};

void RunCampaign(const CampaignConfig& cfg) {
  const absl::Time t_start = absl::Now();
  std::mt19937_64 rng(cfg.seed);
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  std::cout << "campaign: " << KindName(cfg.kind) << ", seed " << cfg.seed
            << " (RUNLOOM_CAMPAIGN_SEED=" << cfg.seed << " replays the choices), " << cfg.kills
            << " kills\n";
  ASSERT_TRUE(std::filesystem::exists(kLibFaketime))
      << kLibFaketime << " is missing: install Debian's faketime (scripts/bootstrap.sh --test)";
  const std::string dir = MakeTempDir("campaign");
  const std::string ledger = dir + "/ledger";
  WriteFile(ledger, "");
  WriteFile(dir + "/gated.yaml", WorkflowYaml(true));
  WriteFile(dir + "/plain.yaml", WorkflowYaml(false));

  // The scripted model: every 7th request is rate limited. Every answer is
  // billed to the run its prompt names, whatever becomes of the caller: at
  // the end each tenant's books must hold at least its bill.
  std::atomic<int> model_requests{0};
  std::atomic<int> model_429s{0};
  runloom::Mutex bill_mu;
  std::map<std::string, int> answered;  // run id -> calls answered 200
  auto model =
      testing::ScriptedHttpServer::Start([&](const testing::ScriptedHttpServer::Request& req) {
        if (++model_requests % 7 == 0) {
          ++model_429s;
          return testing::ScriptedHttpServer::Reply{.status = 429,
                                                    .headers = {{"retry-after", "0"}},
                                                    .body = R"({"error": "slow down"})"};
        }
        constexpr std::string_view kRun = "summarize run ";
        if (size_t at = req.body.find(kRun); at != std::string::npos) {
          const size_t from = at + kRun.size();
          const size_t colon = req.body.find(':', from);
          runloom::MutexLock l(&bill_mu);
          ++answered[req.body.substr(from, colon == std::string::npos ? 0 : colon - from)];
        }
        const json reply = {
            {"model", "campaign-model"},
            {"choices", {{{"message", {{"role", "assistant"}, {"content", "a summary"}}}}}},
            {"usage",
             {{"prompt_tokens", kPromptTokens}, {"completion_tokens", kCompletionTokens}}}};
        return testing::ScriptedHttpServer::Reply{.body = reply.dump()};
      });
  ASSERT_TRUE(model.ok()) << model.status();
  const std::string config = dir + "/config.yaml";
  WriteFile(config, ConfigYaml((*model)->url()));

  // The external service; the answers of its first 5 applied writes are lost.
  absl::StatusOr<std::unique_ptr<examples::ActionsServer>> actions =
      examples::ActionsServer::Start({.drop_responses = 5});
  ASSERT_TRUE(actions.ok()) << actions.status();
  const std::string actions_url = (*actions)->url();

  std::unique_ptr<PrivateServers> servers;
  std::unique_ptr<testing::TcpProxy> proxy;
  std::vector<std::string> backend;        // every client command's
  std::vector<std::string> slot0_backend;  // through the proxy, when there is one
  std::string store_url;
  if (cfg.kind == Kind::kSqlite) {
    store_url = dir + "/campaign.db";
    backend = {"--db", store_url};
    slot0_backend = backend;
  } else {
    servers = std::make_unique<PrivateServers>();
    ASSERT_TRUE(servers->Start()) << "scripts/test-servers.sh start failed";
    store_url = servers->postgres_url();
    ASSERT_NE(testing::UrlPort(store_url), 0) << store_url;
    absl::StatusOr<std::unique_ptr<testing::TcpProxy>> p =
        testing::TcpProxy::Start("127.0.0.1", testing::UrlPort(store_url));
    ASSERT_TRUE(p.ok()) << p.status();
    proxy = *std::move(p);
    backend = {"--db", store_url};
    slot0_backend = {"--db", testing::UrlWithPort(store_url, proxy->port())};
    if (cfg.kind == Kind::kPostgresRedis) {
      for (auto* b : {&backend, &slot0_backend}) {
        b->push_back("--queue");
        b->push_back(servers->redis_url());
      }
    }
  }

  History history(dir + "/history.jsonl");
  std::map<std::string, RunState> runs;
  std::vector<std::string> order;  // run ids as admitted
  std::vector<Op*> pending;        // client commands in flight
  int admissions_in_flight = 0;
  int next_pair = 0;
  int op_n = 0;
  Figures fig;
  Violations v;

  // Spent plus reserved never above a tenant's limit. No tolerance: a late
  // settle (an executor stopped or cut off past its lease settles a call
  // recovery released) once put a tenant one call over; a released amount
  // is now charged, and the late settle corrects the charge (found by this
  // campaign, docs/reliability.md "What it found").
  auto check_budget = [&](const TenantBudget& b, const char* when) {
    const BudgetFigures& f = b.figures;
    if (!f.limit_micros.has_value() || f.spent_micros + f.reserved_micros <= *f.limit_micros) {
      return;
    }
    ++v.overspent;
    ADD_FAILURE() << "tenant " << b.tenant << " overspent " << when << ": spent " << f.spent_micros
                  << " + reserved " << f.reserved_micros << " > " << *f.limit_micros;
  };

  auto send = [&](Op op, const std::vector<std::string>& args) -> Op* {
    // A log of its own: commands overlap (an admission's answer is read
    // from it), and one that succeeded is removed once read.
    op.log = absl::StrCat(dir, "/op-", op_n++, ".log");
    std::vector<std::string> full = args;
    full.insert(full.end(), backend.begin(), backend.end());
    op.sent = absl::Now();
    op.pid = Spawn(full, op.log, {});
    Op& added = history.Add(std::move(op));
    if (added.pid < 0) {
      added.exit_code = 127;
      return nullptr;
    }
    if (!added.run.empty()) ++runs[added.run].pending;
    pending.push_back(&added);
    return &added;
  };
  auto admit = [&] {
    const bool gated = chance(0.5);
    const std::string tenant = chance(cfg.t2_share) ? "t2" : "t1";
    Op op{.what = "admit", .arg = absl::StrCat(gated ? kGated : kPlain, " ", tenant)};
    send(std::move(op),
         {"run", dir + (gated ? "/gated.yaml" : "/plain.yaml"), "--detach", "--input",
          "tenant=" + tenant, "--input", "actions_url=" + actions_url, "--config", config});
    ++admissions_in_flight;
  };
  // Reaps the client's finished commands and acts on their answers.
  auto reap_ops = [&] {
    for (auto it = pending.begin(); it != pending.end();) {
      Op& op = **it;
      std::optional<int> code = Reap(op.pid, WNOHANG);
      if (!code) {
        ++it;
        continue;
      }
      op.exit_code = *code;
      op.answered = absl::Now();
      const std::string out = ReadFile(op.log);
      if (op.exit_code == 0) std::filesystem::remove(op.log);
      if (op.what == "admit") {
        --admissions_in_flight;
        const std::string id = testing::RunIdFrom(out);
        if (op.exit_code == 0 && !id.empty()) {
          op.run = id;
          const std::vector<std::string> arg = absl::StrSplit(op.arg, ' ');
          RunState& r = runs[id];
          r.workflow = arg[0];
          r.tenant = arg[1];
          if (chance(cfg.cancel_share)) {
            r.cancel_at = absl::Now() +
                          absl::Milliseconds(std::uniform_int_distribution<int>(100, 4000)(rng));
          }
          r.rerun_planned = chance(cfg.rerun_share);
          order.push_back(id);
        } else if (op.exit_code == 2 &&
                   out.find("budget preflight: tenant 't2'") != std::string::npos) {
          ++fig.preflight_refused;  // t2 spent its budget: refused whole, by design
        } else {
          // A server restarting: the admission is refused whole (nothing
          // written) or its answer is lost; a run it created anyway is
          // found by the end-of-campaign listing below.
          std::cerr << "campaign: admission answered " << op.exit_code << ": " << out << "\n";
        }
      } else {
        --runs[op.run].pending;
        if (op.what == "rerun" && op.exit_code == 0) runs[op.run].ended = false;
        if (op.what == "decide" && op.exit_code == 4) ++fig.decisions_lost;
      }
      it = pending.erase(it);
    }
  };

  // The first admission creates the schema and writes the tenants' budgets.
  admit();
  while (admissions_in_flight > 0) {
    absl::SleepFor(absl::Milliseconds(20));
    reap_ops();
  }
  ASSERT_EQ(order.size(), 1u) << "the first admission failed (its answer is above)";
  // Reads only: the store, without the Redis transport.
  absl::StatusOr<Backend> reader = OpenBackend(store_url, BackendOptions{});
  ASSERT_TRUE(reader.ok()) << reader.status();
  Store& store = *reader->store;

  std::vector<std::vector<std::string>> worker_args;
  for (int s = 0; s < cfg.workers; ++s) {
    std::vector<std::string> a = {"worker",
                                  "--executors",
                                  std::to_string(cfg.executors),
                                  "--lease-ttl",
                                  absl::FormatDuration(cfg.lease_ttl),
                                  "--queued-grace",
                                  absl::FormatDuration(cfg.lease_ttl),
                                  "--config",
                                  config};
    const std::vector<std::string>& b = s == 0 ? slot0_backend : backend;
    a.insert(a.end(), b.begin(), b.end());
    worker_args.push_back(std::move(a));
  }
  Workers workers(worker_args, dir, ledger);
  ASSERT_TRUE(workers.StartAll());

  const absl::Time t_faults = absl::Now();
  auto next_gap = [&] {
    std::uniform_int_distribution<int64_t> ms(absl::ToInt64Milliseconds(cfg.fault_min),
                                              absl::ToInt64Milliseconds(cfg.fault_max));
    return absl::Milliseconds(ms(rng));
  };
  absl::Time next_fault = t_faults + next_gap();
  absl::Time faults_done = absl::InfiniteFuture();
  std::map<int, absl::Time> stopped;  // slot -> when it continues
  absl::Time heal_at = absl::InfiniteFuture();
  bool cut_done = false;
  bool stall_done = false;
  absl::Time next_poll = t_faults;
  absl::Time next_budget_check = t_faults;
  const bool servers_too = cfg.kind != Kind::kSqlite;
  while (true) {
    const absl::Time now = absl::Now();
    reap_ops();
    const std::vector<std::string> exited = workers.RestartExited();
    for (const std::string& label : exited) {
      ++fig.self_exits;
      EXPECT_TRUE(workers.ByLabel(label)->partitioned)
          << label << " exited by itself, and it was never partitioned (its log is above)";
    }
    for (auto it = stopped.begin(); it != stopped.end();) {
      if (now < it->second) {
        ++it;
        continue;
      }
      workers.Continue(it->first);
      it = stopped.erase(it);
    }
    if (now >= heal_at) {
      proxy->Heal();
      workers.SetPartitioned(false);
      heal_at = absl::InfiniteFuture();
    }
    const bool faulting = fig.kills < cfg.kills;

    // The client: admissions while the faults go on, then the rest.
    int unfinished = 0;
    for (const auto& [id, r] : runs) unfinished += r.ended ? 0 : 1;
    if (faulting && unfinished + admissions_in_flight < cfg.in_flight && admissions_in_flight < 2) {
      admit();
    }
    if (now >= next_poll) {
      next_poll = now + absl::Milliseconds(200);
      for (const std::string& id : order) {
        RunState& r = runs[id];
        if (r.ended && r.pending == 0) continue;
        if (r.cancel_at.has_value() && !r.cancel_sent && now >= *r.cancel_at) {
          r.cancel_sent = true;
          ++fig.cancels;
          send(Op{.what = "cancel", .run = id}, {"cancel", id});
        }
        absl::StatusOr<RunRecord> run = store.GetRun(id);
        if (!run.ok()) break;  // a server restarting: next poll
        if (run->status == RunStatus::kPaused && r.pending == 0 && now >= r.next_decision) {
          absl::StatusOr<std::optional<PendingGate>> gate = PendingGateOfPaused(*run);
          if (gate.ok() && gate->has_value()) {
            // Two reviewers race: one approves, the other approves or rejects.
            const int pair = next_pair++;
            ++fig.decisions_raced;
            const bool reject = chance(0.3);
            const std::string digest = (*gate)->proposal_digest;
            std::vector<std::pair<std::string, std::string>> racers = {
                {absl::StrCat("alice-", pair), "--approve"},
                {absl::StrCat("bob-", pair), reject ? "--reject" : "--approve"}};
            if (chance(0.5)) std::swap(racers[0], racers[1]);
            for (const auto& [who, flag] : racers) {
              send(Op{.what = "decide", .run = id, .arg = who + " " + flag.substr(2), .pair = pair},
                   {"decide", id, "--digest", digest, flag, "--as", who});
            }
            r.next_decision = now + absl::Seconds(1);
          }
        }
        if (IsTerminal(run->status) && r.pending == 0) {
          if (run->status == RunStatus::kCompleted && r.rerun_planned && !r.rerun_sent) {
            r.rerun_sent = true;
            ++fig.reruns;
            send(Op{.what = "rerun", .run = id}, {"rerun", id, "--from", "p4"});
          } else {
            r.ended = true;
          }
        }
      }
    }
    // Spent plus reserved never above the limit, as the campaign goes.
    if (now >= next_budget_check) {
      next_budget_check = now + absl::Seconds(1);
      absl::StatusOr<std::vector<TenantBudget>> budgets = store.ListTenantBudgets();
      if (budgets.ok()) {
        ++fig.budget_checks;
        for (const TenantBudget& b : *budgets) check_budget(b, "during the campaign");
      }
    }

    bool all_ended = !faulting && admissions_in_flight == 0 && pending.empty();
    for (const auto& [id, r] : runs) all_ended = all_ended && r.ended;
    if (all_ended && stopped.empty()) break;
    if (now > faults_done + cfg.drain) {
      ADD_FAILURE() << "runs still unfinished " << cfg.drain << " after the last fault; logs in "
                    << dir;
      break;
    }

    // The faults. A server restarts only while every worker is past its
    // start: one that cannot reach the database as it opens exits 2, by
    // contract.
    const bool settled = now - workers.last_spawn() >= kSettle;
    if (servers_too && settled && fig.postgres_restarts == 0 && fig.kills >= cfg.kills / 3) {
      ASSERT_TRUE(servers->RestartPostgres());
      ++fig.postgres_restarts;
      workers.ServerRestarted();
      std::cout << "campaign: PostgreSQL restarted after " << fig.kills << " kills\n";
    }
    if (cfg.kind == Kind::kPostgresRedis && settled && fig.redis_restarts == 0 &&
        fig.kills >= cfg.kills / 2) {
      ASSERT_TRUE(servers->RestartRedis());
      ++fig.redis_restarts;
      workers.ServerRestarted();
      std::cout << "campaign: Redis restarted (empty) after " << fig.kills << " kills\n";
    }
    if (proxy != nullptr && heal_at == absl::InfiniteFuture() &&
        ((!cut_done && fig.kills >= 2 * cfg.kills / 5) ||
         (!stall_done && fig.kills >= 7 * cfg.kills / 10))) {
      if (!cut_done) {
        proxy->Cut();
        cut_done = true;
      } else {
        proxy->Stall();
        stall_done = true;
      }
      workers.SetPartitioned(true);
      ++fig.partitions;
      heal_at = now + 2 * cfg.lease_ttl;
    }
    if (faulting && now >= next_fault) {
      next_fault = now + next_gap();
      std::vector<int> running;
      for (int s = 0; s < workers.slots(); ++s) {
        if (stopped.count(s) == 0 && workers.Alive(s)) running.push_back(s);
      }
      const int slot =
          running.empty()
              ? -1
              : running[std::uniform_int_distribution<size_t>(0, running.size() - 1)(rng)];
      const bool stop_now =
          fig.stops < cfg.stops && fig.kills >= (fig.stops + 1) * cfg.kills / (cfg.stops + 1);
      if (running.empty()) {
        // every slot is stopped or restarting: the next gap
      } else if (stop_now && running.size() > 1) {
        workers.Stop(slot);
        stopped[slot] = now + 2 * cfg.lease_ttl;
        ++fig.stops;
      } else {
        ASSERT_TRUE(workers.Kill(slot));
        ++fig.kills;
        if (fig.kills == cfg.kills) faults_done = now;
      }
    }
    absl::SleepFor(absl::Milliseconds(25));
  }
  if (heal_at != absl::InfiniteFuture()) proxy->Heal();
  fig.faults_s = absl::ToDoubleSeconds(faults_done - t_faults);
  for (const auto& [slot, until] : stopped) workers.Continue(slot);
  for (Op* op : pending) kill(op->pid, SIGKILL);
  reap_ops();
  EXPECT_TRUE(workers.StopAll());
  history.Write();
  fig.model_requests = model_requests.load();
  fig.model_429s = model_429s.load();
  for (const Instance& i : workers.instances()) {
    const std::string log = ReadFile(i.log);
    for (size_t at = log.find("lease lost:"); at != std::string::npos;
         at = log.find("lease lost:", at + 1)) {
      ++fig.leases_lost;
    }
  }

  // ---- the checker ----
  // Every run the store has must be one the client admitted (an admission
  // whose answer was lost would show here).
  for (const char* wf : {kGated, kPlain}) {
    RunFilter f;
    f.workflow_name = wf;
    f.limit = 100000;
    absl::StatusOr<std::vector<RunRecord>> list = store.ListRuns(f);
    ASSERT_TRUE(list.ok()) << list.status();
    for (const RunRecord& r : *list) {
      if (runs.count(r.id) == 0) {
        ++v.lost;
        ADD_FAILURE() << r.id << " is in the store, and no admission answered it";
      }
    }
  }
  fig.runs = static_cast<int>(order.size());

  // The ledger: (run, revision, step) -> the instances that executed it.
  std::map<std::tuple<std::string, int64_t, std::string>, std::vector<std::string>> executed;
  {
    std::stringstream in(ReadFile(ledger));
    std::string line;
    while (std::getline(in, line)) {
      ++fig.ledger_lines;
      std::vector<std::string> f = absl::StrSplit(line, ' ');
      int64_t rev = 0;
      ASSERT_TRUE(f.size() == 4 && absl::SimpleAtoi(f[1], &rev)) << "torn ledger line: " << line;
      ASSERT_EQ(runs.count(f[0]), 1u) << "a ledger line of an unknown run: " << line;
      ASSERT_NE(workers.ByLabel(f[3]), nullptr) << "a ledger line of an unknown worker: " << line;
      executed[{f[0], rev, f[2]}].push_back(f[3]);
    }
  }
  // Decisions by pair, from the history.
  std::map<std::string, std::vector<const Op*>> decides_of;  // run -> its decide commands
  std::map<std::string, bool> cancel_sent;
  for (const Op& op : history.ops()) {
    if (op.what == "decide") decides_of[op.run].push_back(&op);
    if (op.what == "cancel") cancel_sent[op.run] = true;
  }
  // The actions server: one action per run at most, each key once. Reruns
  // start at p4, after the gate: they carry out the same decision, so its
  // write is not made again (a write's key names its decision, issue 22.1).
  std::map<std::string, int> applied_of;  // run -> actions applied
  {
    std::set<std::string> keys;
    for (const json& a : (*actions)->Applied()) {
      ++fig.actions_applied;
      const std::string key = a.value("idempotency_key", "");
      const std::string run = a.contains("request") ? a["request"].value("run", "") : "";
      if (!keys.insert(key).second) {
        ++v.duplicate_effects;
        ADD_FAILURE() << "the key " << key << " was applied twice";
      }
      if (runs.count(run) == 0) {
        ++v.duplicate_effects;
        ADD_FAILURE() << "an action of an unknown run: " << a.dump();
      }
      ++applied_of[run];
    }
  }

  std::map<std::string, int> repeats_of;  // instance label -> repeats it executed
  for (const std::string& id : order) {
    const RunState& state = runs[id];
    absl::StatusOr<RunRecord> run = store.GetRun(id);
    ASSERT_TRUE(run.ok()) << run.status();
    fig.max_run_attempts = std::max(fig.max_run_attempts, run->attempts);
    ++fig.ended[std::string(ToString(run->status))];
    absl::StatusOr<std::vector<Event>> events = store.ListEvents(id, 0, 100000);
    ASSERT_TRUE(events.ok()) << events.status();
    absl::StatusOr<std::vector<StepRecord>> steps = store.ListSteps(id, std::nullopt);
    ASSERT_TRUE(steps.ok()) << steps.status();

    // The event log, folded: the lease holder as it goes, decisions, writes.
    std::string owner_label;
    int64_t revision = 1;
    std::set<std::string> lease_holders;
    std::map<std::pair<int64_t, std::string>, int> succeeded;  // (rev, path) -> step.succeeded
    std::map<std::pair<int64_t, std::string>, std::string> succeeded_by;
    // (revision, path) of each step started: a record of a revision no step
    // started in was carried over by a rerun, not executed.
    std::set<std::pair<int64_t, std::string>> started;
    std::vector<HeldEvent> held;
    std::vector<std::string> reviewers;  // of run.decided, in order
    std::string last_decision;
    int pauses = 0;
    int finished = 0;
    bool after_finish = false;
    bool rerun_requested = false;
    for (const Event& e : *events) {
      if (finished > 0 && e.type != event_types::kRunRerunRequested) after_finish = true;
      if (e.type == event_types::kRunRerunRequested) {
        finished = 0;
        rerun_requested = true;
      }
      if (e.type == event_types::kRunStarted) {
        const Instance* i = workers.ByPid(OwnerPid(e.data.value("lease_owner", "")), e.at);
        owner_label = i == nullptr ? "?" : i->label;
        revision = e.data.value("revision", int64_t{1});
        lease_holders.insert(owner_label);
      } else if (e.type == event_types::kRunLeaseExpired) {
        ++fig.leases_expired;
      } else if (e.type == event_types::kRunPaused) {
        ++pauses;
      } else if (e.type == event_types::kRunDecided) {
        reviewers.push_back(e.data.value("reviewer", ""));
        last_decision = e.data.value("decision", "");
      } else if (e.type == event_types::kStepSucceeded) {
        const std::pair<int64_t, std::string> key{revision, e.data.value("path", "")};
        ++succeeded[key];
        succeeded_by[key] = owner_label;
      } else if (e.type == event_types::kStepStarted) {
        started.insert({revision, e.data.value("path", "")});
      } else if (e.type == event_types::kRunFinished) {
        ++finished;
      }
      held.push_back({e.at, e.type, owner_label});
    }
    for (const Workers::KillAt& k : workers.kills()) {
      if (std::optional<absl::Duration> r = RecoveryOf(held, k.label, k.at)) {
        fig.recovery.push_back(*r);
      }
      if (std::optional<absl::Duration> r =
              RecoveryOf(held, k.label, k.at, event_types::kRunLeaseExpired)) {
        fig.requeued.push_back(*r);
      }
    }

    // 1. Every run at rest, honestly.
    const bool cancelled_by_client = cancel_sent.count(id) > 0;
    bool honest = IsTerminal(run->status);
    switch (run->status) {
      case RunStatus::kCompleted:
        break;
      case RunStatus::kRejected:
        honest = last_decision == "reject";
        break;
      case RunStatus::kCancelled:
        honest = cancelled_by_client;
        break;
      case RunStatus::kBudgetStopped:
        honest = state.tenant == "t2";
        break;
      default:
        honest = false;
    }
    if (!honest) {
      ++v.lost;
      ADD_FAILURE() << id << " (" << state.workflow << ", " << state.tenant << ") ended "
                    << ToString(run->status) << ": " << run->error
                    << (cancelled_by_client ? " (a cancel was sent)" : "");
    }
    if (finished != 1 || after_finish) {
      ++v.bad_logs;
      ADD_FAILURE() << id << ": " << finished << " run.finished in its last revision, events after "
                    << "it: " << after_finish;
    }
    for (const auto& [key, n] : succeeded) {
      if (n != 1) {
        ++v.bad_logs;
        ADD_FAILURE() << id << " revision " << key.first << " " << key.second << " succeeded " << n
                      << " times";
      }
    }
    if (rerun_requested) {
      EXPECT_GE(run->revision, 2) << id;
    }

    // 2. One decision per pause; of each racing pair, at most one accepted,
    // and an accepted one is the recorded one.
    if (static_cast<int>(reviewers.size()) > pauses ||
        (run->status != RunStatus::kCancelled && static_cast<int>(reviewers.size()) != pauses)) {
      ++v.double_decisions;
      ADD_FAILURE() << id << ": " << pauses << " pauses, " << reviewers.size() << " decisions";
    }
    std::map<int, std::vector<const Op*>> pairs;
    for (const Op* op : decides_of[id]) pairs[op->pair].push_back(op);
    for (const auto& [pair, ops] : pairs) {
      int accepted = 0;
      for (const Op* op : ops) {
        if (op->exit_code != 0) continue;
        ++accepted;
        const std::string who = op->arg.substr(0, op->arg.find(' '));
        if (std::find(reviewers.begin(), reviewers.end(), who) == reviewers.end()) {
          ++v.double_decisions;
          ADD_FAILURE() << id << ": " << who << "'s decision was accepted and is not recorded";
        }
      }
      if (accepted > 1) {
        ++v.double_decisions;
        ADD_FAILURE() << id << ": both racers of pair " << pair << " were told they decided";
      }
    }

    // 3. Each recorded output by the lease holder; each execution charged.
    std::map<std::pair<int64_t, std::string>, std::string> recorded_by;
    bool write_recorded = false;
    for (const StepRecord& s : *steps) {
      if (s.state != StepState::kSucceeded) continue;
      if (s.path == "s4") write_recorded = true;
      if (started.count({s.revision, s.path}) == 1 && s.output.is_object() &&
          s.output.contains("worker") && s.output["worker"].is_string()) {
        recorded_by[{s.revision, s.path}] = s.output["worker"].get<std::string>();
      }
    }
    for (const auto& [key, label] : recorded_by) {
      auto by = succeeded_by.find(key);
      if (by == succeeded_by.end() || by->second != label) {
        ++v.stale_writes;
        ADD_FAILURE() << id << " revision " << key.first << " " << key.second
                      << ": the recorded output is " << label << "'s, appended while "
                      << (by == succeeded_by.end() ? "nobody" : by->second) << " held the lease";
      }
    }
    for (auto it = executed.lower_bound({id, 0, ""});
         it != executed.end() && std::get<0>(it->first) == id; ++it) {
      std::vector<std::string> by = it->second;
      for (const std::string& label : by) {
        if (lease_holders.count(label) == 0) {
          ++v.unleased;
          ADD_FAILURE() << id << " " << std::get<2>(it->first) << " executed by " << label
                        << ", which never held its lease";
        }
      }
      auto rec = recorded_by.find({std::get<1>(it->first), std::get<2>(it->first)});
      if (rec != recorded_by.end()) {
        auto own = std::find(by.begin(), by.end(), rec->second);
        if (own == by.end()) {
          ++v.stale_writes;
          ADD_FAILURE() << id << " " << std::get<2>(it->first) << ": the recorded execution ("
                        << rec->second << ") is not in the ledger";
          continue;
        }
        by.erase(own);
      } else if (run->status == RunStatus::kCancelled && !by.empty()) {
        ++fig.cut_by_cancel;  // the execution the cancel stopped
        by.erase(by.end() - 1);
      }
      for (const std::string& label : by) ++repeats_of[label];
    }

    // Step counts are distinct records (reference 002): however often a
    // step of a completed run was executed, it counts once.
    if (run->status == RunStatus::kCompleted) {
      const engine_internal::StepCounts counts = engine_internal::CountSteps(*steps, run->revision);
      const int want = state.workflow == kGated ? 5 : 4;
      if (counts.succeeded != want || counts.total() != want) {
        ++v.bad_logs;
        ADD_FAILURE() << id << ": step counts of revision " << run->revision << ": "
                      << counts.succeeded << " succeeded of " << counts.total() << ", want "
                      << want;
      }
    }

    // 4. The external write: once in effect.
    const int applied = applied_of[id];
    if (applied > 1 || (write_recorded && applied != 1)) {
      ++v.duplicate_effects;
      ADD_FAILURE() << id << ": " << applied << " actions applied, its write step "
                    << (write_recorded ? "succeeded" : "did not succeed");
    }
    if (!honest || finished != 1) {
      std::cerr << "campaign: the events of " << id << ":\n";
      for (const Event& e : *events) {
        std::cerr << "  " << e.seq << " " << absl::FormatTime(e.at) << " " << e.type << " "
                  << e.data.dump() << "\n";
      }
    }
  }
  for (const auto& [label, n] : repeats_of) {
    const Instance* i = workers.ByLabel(label);
    const int allowed = cfg.executors * (i->faults + i->restarts);
    fig.repeats += n;
    if (n > allowed) {
      ADD_FAILURE() << label << " executed " << n << " steps that another worker repeated; it had "
                    << i->faults << " faults and lived through " << i->restarts
                    << " server restarts";
    }
  }
  for (const Instance& i : workers.instances()) {
    fig.repeats_allowed += cfg.executors * (i.faults + i.restarts);
  }

  // 5. Budgets at the end: within the limits, nothing left reserved, and
  // the tenant's spend is its runs' spend.
  absl::StatusOr<std::vector<TenantBudget>> budgets = store.ListTenantBudgets();
  ASSERT_TRUE(budgets.ok()) << budgets.status();
  for (const TenantBudget& b : *budgets) {
    const BudgetFigures& f = b.figures;
    if (b.tenant == "t1") fig.t1_spent = f.spent_micros;
    if (b.tenant == "t2") fig.t2_spent = f.spent_micros;
    check_budget(b, "at the end");
    EXPECT_EQ(f.reserved_micros, 0) << "tenant " << b.tenant << " still has reservations";
  }
  // The provider's bill: every answered call is in its tenant's books (a
  // call whose executor died after the answer was charged when recovery
  // released its reservation, at its worst case; its real cost is less; a
  // call whose executor, stopped past its lease, cancelled the request the
  // provider had answered books its worst case too: seed 1007182660).
  {
    runloom::MutexLock l(&bill_mu);
    for (const auto& [run_id, calls] : answered) {
      auto it = runs.find(run_id);
      if (it == runs.end()) continue;
      (it->second.tenant == "t1" ? fig.t1_paid : fig.t2_paid) += calls * kCallMicros;
    }
  }
  for (const auto& [tenant, paid, spent] :
       {std::tuple{"t1", fig.t1_paid, fig.t1_spent}, std::tuple{"t2", fig.t2_paid, fig.t2_spent}}) {
    if (paid > spent) {
      ++v.overspent;
      ADD_FAILURE() << "tenant " << tenant << " was billed " << paid
                    << " micros by the provider but its books say spent " << spent;
    }
  }

  EXPECT_GE(fig.kills, cfg.kills);
  EXPECT_EQ(fig.stops, cfg.stops);
  EXPECT_GT(fig.decisions_raced, 0);
  EXPECT_GT(fig.ended["budget_stopped"] + fig.ended["completed"], 0);
  EXPECT_EQ(v.lost, 0);
  EXPECT_EQ(v.double_decisions, 0);
  EXPECT_EQ(v.stale_writes, 0);
  EXPECT_EQ(v.unleased, 0);
  EXPECT_EQ(v.duplicate_effects, 0);
  EXPECT_EQ(v.overspent, 0);
  EXPECT_EQ(v.bad_logs, 0);
  fig.total_s = absl::ToDoubleSeconds(absl::Now() - t_start);

  std::string ended;
  for (const auto& [status, n] : fig.ended) absl::StrAppend(&ended, " ", status, " ", n);
  std::cout << "campaign figures (" << KindName(cfg.kind) << ", " << cfg.workers << " workers x "
            << cfg.executors << " executors, lease TTL " << cfg.lease_ttl << ", seed " << cfg.seed
            << "):\n"
            << "  runs                 " << fig.runs << " admitted; ended:" << ended << "\n"
            << "  kills (SIGKILL)      " << fig.kills << " in "
            << absl::StrFormat("%.0f", fig.faults_s) << " s\n"
            << "  stops (SIGSTOP 2xTTL) " << fig.stops << "\n"
            << "  partitions (2xTTL)   " << fig.partitions << " (cut, then stalled)\n"
            << "  PostgreSQL restarts  " << fig.postgres_restarts << "\n"
            << "  Redis restarts       " << fig.redis_restarts << "\n"
            << "  clock skew           the last slot's workers " << kSkew << "\n"
            << "  worker self-exits    " << fig.self_exits << " (only after a partition)\n"
            << "  client commands      " << history.ops().size() << " (decision races "
            << fig.decisions_raced << ", racers refused " << fig.decisions_lost << ", cancels "
            << fig.cancels << ", reruns " << fig.reruns << ", t2 admissions refused by the budget "
            << "preflight " << fig.preflight_refused << ")\n"
            << "  ledger executions    " << fig.ledger_lines << " (repeats " << fig.repeats
            << ", allowed " << fig.repeats_allowed << "; cut by a cancel " << fig.cut_by_cancel
            << ")\n"
            << "  actions applied      " << fig.actions_applied << "\n"
            << "  model requests       " << fig.model_requests << " (429: " << fig.model_429s
            << "); spent t1 " << fig.t1_spent << " (billed " << fig.t1_paid << "), t2 "
            << fig.t2_spent << " (billed " << fig.t2_paid << ") of " << kT2Budget
            << "000000 micros; " << fig.budget_checks << " budget checks\n"
            << "  leases expired       " << fig.leases_expired << ", stale holders refused "
            << fig.leases_lost << ", max attempts of a run " << fig.max_run_attempts << "\n"
            << "  violations           lost " << v.lost << ", double decisions "
            << v.double_decisions << ", stale writes " << v.stale_writes << ", unleased executions "
            << v.unleased << ", duplicate effects " << v.duplicate_effects << ", overspent "
            << v.overspent << ", bad logs " << v.bad_logs << "\n"
            << "  recovery after a kill " << Percentiles(fig.recovery, "interrupted runs")
            << ": the kill to the run's next step started elsewhere\n"
            << "  re-enqueued after    " << Percentiles(fig.requeued, "interrupted runs")
            << ": the kill to the sweeper's run.lease_expired\n"
            << "  wall time            " << absl::StrFormat("%.1f", fig.total_s)
            << " s; history in " << dir << "/history.jsonl\n";
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
}

// RUNLOOM_CAMPAIGN_KILLS (default 50) split over the three backends.
CampaignConfig FromEnv(Kind kind) {
  CampaignConfig c;
  c.kind = kind;
  const int total = EnvInt("RUNLOOM_CAMPAIGN_KILLS", 50);
  const int index = kind == Kind::kSqlite ? 0 : kind == Kind::kPostgres ? 1 : 2;
  c.kills = total / 3 + (index < total % 3 ? 1 : 0);
  c.stops = std::max(1, c.kills / 40);
  const char* seed = std::getenv("RUNLOOM_CAMPAIGN_SEED");
  if (seed == nullptr || !absl::SimpleAtoi(seed, &c.seed)) c.seed = std::random_device{}();
  return c;
}

TEST(KillCampaign, SqliteProcesses) { RunCampaign(FromEnv(Kind::kSqlite)); }
TEST(KillCampaign, Postgres) { RunCampaign(FromEnv(Kind::kPostgres)); }
TEST(KillCampaign, PostgresAndRedis) { RunCampaign(FromEnv(Kind::kPostgresRedis)); }

}  // namespace
}  // namespace runloom
