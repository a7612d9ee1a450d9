// Issue 9, acceptance 2: distributed chaos. Three `runloom worker` processes
// share 300 runs of a 5-step exec workflow on a private PostgreSQL (and, in
// the Redis variant, a private Redis); every step appends "RUN STEP WORKER"
// to a ledger file and then works a little, so a kill often lands after the
// side effect and before its record. During the run the test SIGKILLs a
// random worker every 1.5-3 s (at least 20 times) and restarts it, stops two
// workers (SIGSTOP) for twice the lease TTL and lets them go on, so that they
// come back holding leases others have taken, and crashes and restarts
// PostgreSQL once (Redis too, without persistence, in the Redis variant).
//
// Then, read from the store and the ledger:
//   - every run completed, with exactly 5 step records, all succeeded;
//   - every step executed once, plus repeats each of which is charged to the
//     worker instance that executed it and never recorded it: at most one per
//     executor per fault of that instance (a kill or a stop; with one executor
//     per worker, one repeat per kill), or per server restart it lived
//     through;
//   - no stale write accepted: each recorded step output was written by the
//     worker holding the run's lease when its step.succeeded was appended
//     (the output names the worker that ran it), one step.succeeded per step,
//     nothing after run.finished, and every ledger line was written by a
//     worker that held a lease on that run;
// and prints the figures.
//
// The servers are the test's own (scripts/test-servers.sh in a temporary
// directory, stopped at the end, also on failure): it restarts them, and
// other tests share the `servers` fixture's pair.
//
// Scale and replay: RUNLOOM_CHAOS_SEED replays the fault choices (which
// worker, which gaps; the seed is printed; the runs' timing still varies);
// RUNLOOM_CHAOS_RUNS and RUNLOOM_CHAOS_MIN_KILLS scale it.
#include "runloom/backend.h"
#include "runloom/run.h"
#include "runloom/status.h"
#include "runloom/store.h"

#include "events/events.h"
#include "testing/test_servers.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "integration/cli_harness.h"
#include "nlohmann/json.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <signal.h>
#include <sstream>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace runloom {
namespace {

using ::runloom::testing::ChildSetup;
using ::runloom::testing::MakeTempDir;
using ::runloom::testing::ReadFile;
using ::runloom::testing::RunTestServersScript;
using ::runloom::testing::WriteFile;

constexpr int kSteps = 5;
constexpr char kWorkflowName[] = "chaos_ledger";
// How long after a worker's start before a server may be restarted.
constexpr absl::Duration kSettle = absl::Seconds(2);

struct ChaosConfig {
  // Jobs on a Redis Stream (--queue redis://...), and Redis is restarted once.
  bool redis_queue = false;
  int runs = 300;
  int workers = 3;
  int executors = 1;  // per worker: steps in flight a kill can interrupt
  int min_kills = 20;
  int max_kills = 40;  // the schedule stops killing here
  int stops = 2;       // SIGSTOP for 2 * lease_ttl, then SIGCONT
  absl::Duration lease_ttl = absl::Seconds(5);
  absl::Duration fault_min = absl::Milliseconds(1500);
  absl::Duration fault_max = absl::Milliseconds(3000);
  absl::Duration deadline = absl::Minutes(5);  // from the end of admission
  uint64_t seed = 0;
};

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  int out = 0;
  return v != nullptr && absl::SimpleAtoi(v, &out) && out > 0 ? out : fallback;
}

// "s<i>", built by append: GCC 12's `"s" + std::to_string(i)` trips a false
// -Wrestrict (GCC bug 105329) in Release builds with -Werror.
std::string StepId(int i) {
  std::string id = "s";
  id += std::to_string(i);
  return id;
}

// Five exec steps. Each appends one line (O_APPEND: `>>`; one short write,
// so lines never interleave) naming the run, the step and the worker
// instance (CHAOS_WORKER, from the worker's environment), then works for
// 100 ms, then prints {"worker": ...}: the step record says which execution
// was recorded. No template: the script reads only its environment.
std::string WorkflowYaml() {
  const nlohmann::json command = {
      "/bin/sh", "-c",
      R"(printf '%s %s %s\n' "$RUNLOOM_RUN_ID" "$RUNLOOM_STEP_PATH" "$CHAOS_WORKER" )"
      R"(>> "$CHAOS_LEDGER" && sleep 0.1 && printf '{"worker": "%s"}\n' "$CHAOS_WORKER")"};
  std::string yaml = absl::StrCat("name: ", kWorkflowName,
                                  "\ndescription: five exec steps, each appending to a ledger\n"
                                  "steps:\n");
  for (int i = 1; i <= kSteps; ++i) {
    absl::StrAppend(&yaml, "  - id: ", StepId(i), "\n    kind: exec\n    command: ", command.dump(),
                    "\n");
  }
  return yaml;
}

// A PostgreSQL and a Redis of this test alone, stopped when it ends.
class PrivateServers {
 public:
  PrivateServers() : dir_(MakeTempDir("chaos-servers")) {}
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
  int faults = 0;    // kills and stops it suffered
  int restarts = 0;  // server restarts it lived through
  bool alive = true;
  int exit_code = -1;  // when it exited by itself or was stopped at the end
};

// The worker slots, each running one instance at a time.
class Workers {
 public:
  Workers(std::vector<std::string> args, std::string dir, std::string ledger, int slots)
      : args_(std::move(args)), dir_(std::move(dir)), ledger_(std::move(ledger)), slots_(slots) {}
  ~Workers() {
    for (int s = 0; s < static_cast<int>(slots_.size()); ++s) {
      if (Instance* i = Current(s); i != nullptr && i->alive) {
        kill(i->pid, SIGKILL);
        Reap(*i, 0);
      }
    }
  }
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;

  void StartAll() {
    for (int s = 0; s < static_cast<int>(slots_.size()); ++s) Spawn(s);
  }
  int slots() const { return static_cast<int>(slots_.size()); }
  Instance* Current(int slot) {
    return slots_[slot].empty() ? nullptr : &instances_[slots_[slot].back()];
  }

  // SIGKILL, reap, start the slot's next generation.
  void Kill(int slot) {
    Instance* i = Current(slot);
    ++i->faults;
    kills_.push_back({i->label, absl::Now()});
    kill(i->pid, SIGKILL);
    Reap(*i, 0);
    Spawn(slot);
  }
  void Stop(int slot) {
    ++Current(slot)->faults;
    kill(Current(slot)->pid, SIGSTOP);
  }
  void Continue(int slot) { kill(Current(slot)->pid, SIGCONT); }
  // Every live instance lived through a server restart.
  void ServerRestarted() {
    for (Instance& i : instances_) i.restarts += i.alive ? 1 : 0;
  }

  // Instances that exited on their own are restarted; returns how many.
  int RestartExited() {
    int n = 0;
    for (int s = 0; s < slots(); ++s) {
      Instance* i = Current(s);
      if (Reap(*i, WNOHANG)) {
        ++n;
        std::cerr << "chaos: worker " << i->label << " exited by itself (" << i->exit_code
                  << "); its log:\n"
                  << ReadFile(i->log) << "\n";
        Spawn(s);
      }
    }
    return n;
  }

  // SIGTERM to every live instance; waits. False when one did not exit 0.
  bool StopAll() {
    bool ok = true;
    for (int s = 0; s < slots(); ++s) {
      Instance* i = Current(s);
      if (!i->alive) continue;
      kill(i->pid, SIGCONT);
      kill(i->pid, SIGTERM);
      Reap(*i, 0);
      if (i->exit_code != 0) {
        ok = false;
        std::cerr << "chaos: worker " << i->label << " stopped with " << i->exit_code
                  << "; its log:\n"
                  << ReadFile(i->log) << "\n";
      }
    }
    return ok;
  }

  absl::Time last_spawn() const { return last_spawn_; }
  // Each SIGKILL: the instance killed and when.
  struct KillAt {
    std::string label;
    absl::Time at;
  };
  const std::vector<KillAt>& kills() const { return kills_; }
  const std::deque<Instance>& instances() const { return instances_; }
  const Instance* ByPid(pid_t pid) const {
    auto it = by_pid_.find(pid);
    return it == by_pid_.end() ? nullptr : &instances_[it->second];
  }
  const Instance* ByLabel(const std::string& label) const {
    for (const Instance& i : instances_) {
      if (i.label == label) return &i;
    }
    return nullptr;
  }

 private:
  void Spawn(int slot) {
    Instance i;
    i.label = absl::StrCat("w", slot, "g", slots_[slot].size());
    i.log = absl::StrCat(dir_, "/", i.label, ".log");
    ChildSetup setup;
    setup.env = {{"CHAOS_WORKER", i.label}, {"CHAOS_LEDGER", ledger_}};
    // The harness's Child forks and execs; the test reaps by pid.
    testing::Child child(args_, i.log, setup);
    i.pid = child.pid();
    by_pid_[i.pid] = instances_.size();
    slots_[slot].push_back(instances_.size());
    instances_.push_back(std::move(i));
    last_spawn_ = absl::Now();
  }

  // True when `i` was reaped now (`flags` 0 waits).
  static bool Reap(Instance& i, int flags) {
    if (!i.alive) return false;
    int status = 0;
    pid_t r = 0;
    while ((r = waitpid(i.pid, &status, flags)) < 0 && errno == EINTR) {
    }
    if (r != i.pid) return false;
    i.alive = false;
    i.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return true;
  }

  std::vector<std::string> args_;
  std::string dir_;
  std::string ledger_;
  std::vector<std::vector<size_t>> slots_;  // indexes into instances_, oldest first
  std::deque<Instance> instances_;
  std::map<pid_t, size_t> by_pid_;
  absl::Time last_spawn_ = absl::InfinitePast();
  std::vector<KillAt> kills_;
};

// The recovery time of one kill for one run: from the kill to the run's
// next step.started under another lease holder, when the killed instance
// held the run (its last run.started before the kill, and the run not
// finished); nullopt otherwise. `holders` are the run's events in order,
// each with the lease holder at that point.
struct HeldEvent {
  absl::Time at;
  std::string type;
  std::string holder;
};
// `type` (default step.started by another holder): with run.lease_expired,
// the time to the sweeper re-enqueuing the run instead.
std::optional<absl::Duration> RecoveryOf(const std::vector<HeldEvent>& events,
                                         const std::string& killed, absl::Time kill_at,
                                         std::string_view type = event_types::kStepStarted) {
  std::string holder;
  size_t i = 0;
  for (; i < events.size() && events[i].at <= kill_at; ++i) {
    if (events[i].type == event_types::kRunStarted) holder = events[i].holder;
    if (events[i].type == event_types::kRunFinished) return std::nullopt;
  }
  if (holder != killed) return std::nullopt;
  for (; i < events.size(); ++i) {
    if (events[i].type == type &&
        (type != event_types::kStepStarted || events[i].holder != killed)) {
      return events[i].at - kill_at;
    }
  }
  return std::nullopt;
}

// "p50 0.8 s, p99 5.9 s, max 6.1 s (n runs)".
std::string Percentiles(std::vector<absl::Duration> d) {
  if (d.empty()) return "none measured";
  std::sort(d.begin(), d.end());
  auto at = [&](double q) {
    const size_t k = std::min(d.size() - 1, static_cast<size_t>(q * static_cast<double>(d.size())));
    return absl::StrFormat("%.2f s", absl::ToDoubleSeconds(d[k]));
  };
  return absl::StrCat("p50 ", at(0.50), ", p99 ", at(0.99), ", max ", at(1.0), " (", d.size(),
                      " interrupted runs)");
}

// Admits `n` runs with `runloom run FILE --detach`, a few processes at a
// time; returns their ids (fewer on failure, with the output on stderr).
std::vector<std::string> Admit(const std::vector<std::string>& backend, const std::string& wf,
                               const std::string& dir, int n) {
  constexpr int kParallel = 4;
  std::vector<std::string> ids;
  std::vector<std::string> args = {"run", wf, "--detach"};
  args.insert(args.end(), backend.begin(), backend.end());
  for (int base = 0; base < n; base += kParallel) {
    std::vector<std::unique_ptr<testing::Child>> batch;
    std::vector<std::string> logs;
    for (int k = base; k < std::min(n, base + kParallel); ++k) {
      logs.push_back(absl::StrCat(dir, "/admit-", k - base, ".log"));
      batch.push_back(std::make_unique<testing::Child>(args, logs.back()));
    }
    for (size_t k = 0; k < batch.size(); ++k) {
      const int code = batch[k]->Wait();
      const std::string out = ReadFile(logs[k]);
      const std::string id = testing::RunIdFrom(out);
      if (code != 0 || id.empty()) {
        std::cerr << "chaos: admission failed (" << code << "): " << out << "\n";
        return ids;
      }
      ids.push_back(id);
    }
  }
  return ids;
}

// Completed runs of the workflow now; nullopt when the store cannot say
// (e.g. PostgreSQL is restarting).
std::optional<int> CompletedRuns(Store& store, int runs) {
  RunFilter f;
  f.status = RunStatus::kCompleted;
  f.workflow_name = kWorkflowName;
  f.limit = runs + 1;
  absl::StatusOr<std::vector<RunRecord>> list = store.ListRuns(f);
  if (!list.ok()) return std::nullopt;
  return static_cast<int>(list->size());
}

// "host:pid" -> pid; -1 when malformed.
pid_t OwnerPid(const std::string& owner) {
  int pid = -1;
  const size_t colon = owner.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(owner.substr(colon + 1), &pid)) return -1;
  return pid;
}

struct Figures {
  int runs = 0;
  int kills = 0;
  int stops = 0;
  int postgres_restarts = 0;
  int redis_restarts = 0;
  int self_exits = 0;
  int ledger_lines = 0;
  int repeats = 0;
  int repeats_allowed = 0;
  int leases_expired = 0;        // distinct (run, attempt)
  int lease_expired_events = 0;  // the sweepers' run.lease_expired events
  int max_run_attempts = 0;
  int leases_lost = 0;  // refusals the workers logged ("lease lost: ...")
  // Per kill and interrupted run: kill -> its next step started elsewhere,
  // and kill -> the sweeper's run.lease_expired (re-enqueued).
  std::vector<absl::Duration> recovery;
  std::vector<absl::Duration> requeued;
  double admission_s = 0;
  double chaos_s = 0;
  double total_s = 0;
};

void RunChaos(const ChaosConfig& cfg) {
  const absl::Time t_start = absl::Now();
  std::mt19937_64 rng(cfg.seed);
  std::cout << "chaos: seed " << cfg.seed << " (RUNLOOM_CHAOS_SEED=" << cfg.seed
            << " replays the fault choices)\n";
  const std::string dir = MakeTempDir("dchaos");
  const std::string ledger = dir + "/ledger";
  const std::string wf = dir + "/chaos.yaml";
  WriteFile(wf, WorkflowYaml());
  WriteFile(ledger, "");

  PrivateServers servers;
  ASSERT_TRUE(servers.Start()) << "scripts/test-servers.sh start failed";
  std::vector<std::string> backend = {"--db", servers.postgres_url()};
  if (cfg.redis_queue) {
    backend.push_back("--queue");
    backend.push_back(servers.redis_url());
  }

  Figures fig;
  const std::vector<std::string> ids = Admit(backend, wf, dir, cfg.runs);
  ASSERT_EQ(static_cast<int>(ids.size()), cfg.runs);
  fig.runs = cfg.runs;
  fig.admission_s = absl::ToDoubleSeconds(absl::Now() - t_start);

  // Reads only: the store, without the Redis transport (and its relay).
  absl::StatusOr<Backend> reader = OpenBackend(servers.postgres_url(), BackendOptions{});
  ASSERT_TRUE(reader.ok()) << reader.status();
  Store& store = *reader->store;

  std::vector<std::string> worker_args = {"worker",
                                          "--executors",
                                          std::to_string(cfg.executors),
                                          "--lease-ttl",
                                          absl::FormatDuration(cfg.lease_ttl),
                                          "--queued-grace",
                                          absl::FormatDuration(cfg.lease_ttl)};
  worker_args.insert(worker_args.end(), backend.begin(), backend.end());
  Workers workers(worker_args, dir, ledger, cfg.workers);
  workers.StartAll();

  // The schedule: a fault every fault_min..fault_max (a kill, or one of the
  // `stops` spread over the kills), PostgreSQL's restart once a third of the
  // runs completed, Redis's at half.
  const absl::Time t_chaos = absl::Now();
  const absl::Time deadline = t_chaos + cfg.deadline;
  auto next_gap = [&] {
    std::uniform_int_distribution<int64_t> ms(absl::ToInt64Milliseconds(cfg.fault_min),
                                              absl::ToInt64Milliseconds(cfg.fault_max));
    return absl::Milliseconds(ms(rng));
  };
  absl::Time next_fault = t_chaos + next_gap();
  std::map<int, absl::Time> stopped;  // slot -> when it continues
  int completed = 0;
  absl::Time next_poll = t_chaos;
  while (true) {
    const absl::Time now = absl::Now();
    fig.self_exits += workers.RestartExited();
    for (auto it = stopped.begin(); it != stopped.end();) {
      if (now < it->second) {
        ++it;
        continue;
      }
      workers.Continue(it->first);
      it = stopped.erase(it);
    }
    if (now >= next_poll) {
      completed = CompletedRuns(store, cfg.runs).value_or(completed);
      next_poll = now + absl::Milliseconds(250);
    }
    if (completed >= cfg.runs) break;
    ASSERT_LT(now, deadline) << completed << " of " << cfg.runs << " runs completed after "
                             << cfg.deadline << "; logs in " << dir;
    // A server restarts only while every worker is past its start: one
    // that cannot reach the database as it opens exits 2, by contract.
    const bool settled = now - workers.last_spawn() >= kSettle;
    if (settled && fig.postgres_restarts == 0 && completed >= cfg.runs / 3) {
      ASSERT_TRUE(servers.RestartPostgres());
      ++fig.postgres_restarts;
      workers.ServerRestarted();
      std::cout << "chaos: PostgreSQL restarted at " << completed << " completed runs\n";
    }
    if (settled && cfg.redis_queue && fig.redis_restarts == 0 && completed >= cfg.runs / 2) {
      ASSERT_TRUE(servers.RestartRedis());
      ++fig.redis_restarts;
      workers.ServerRestarted();
      std::cout << "chaos: Redis restarted (empty) at " << completed << " completed runs\n";
    }
    if (now >= next_fault && fig.kills < cfg.max_kills) {
      next_fault = now + next_gap();
      std::vector<int> running;
      for (int s = 0; s < workers.slots(); ++s) {
        if (stopped.count(s) == 0) running.push_back(s);
      }
      std::uniform_int_distribution<size_t> pick(0, running.size() - 1);
      const int slot = running[pick(rng)];
      const bool stop_now =
          fig.stops < cfg.stops && fig.kills >= (fig.stops + 1) * cfg.min_kills / (cfg.stops + 1);
      if (stop_now && running.size() > 1) {
        workers.Stop(slot);
        stopped[slot] = now + 2 * cfg.lease_ttl;
        ++fig.stops;
      } else {
        workers.Kill(slot);
        ++fig.kills;
      }
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  fig.chaos_s = absl::ToDoubleSeconds(absl::Now() - t_chaos);
  for (const auto& [slot, until] : stopped) workers.Continue(slot);
  EXPECT_TRUE(workers.StopAll());
  EXPECT_GE(fig.kills, cfg.min_kills)
      << "every run completed before the schedule's kills; make the workload longer";
  EXPECT_EQ(fig.stops, cfg.stops);
  EXPECT_EQ(fig.self_exits, 0) << "a worker exited by itself (its log is above)";
  // A stale holder (a stopped worker let go on) is refused: "... lease lost: ..."
  for (const Instance& i : workers.instances()) {
    const std::string log = ReadFile(i.log);
    for (size_t at = log.find("lease lost:"); at != std::string::npos;
         at = log.find("lease lost:", at + 1)) {
      ++fig.leases_lost;
    }
  }

  // The ledger: (run, step) -> the labels of the instances that executed it.
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> executed;
  {
    const std::set<std::string> known(ids.begin(), ids.end());
    std::stringstream in(ReadFile(ledger));
    std::string line;
    while (std::getline(in, line)) {
      ++fig.ledger_lines;
      std::vector<std::string> f = absl::StrSplit(line, ' ');
      ASSERT_EQ(f.size(), 3u) << "torn or foreign ledger line: '" << line << "'";
      ASSERT_TRUE(known.count(f[0]) == 1) << "ledger line of an unknown run: " << line;
      ASSERT_NE(workers.ByLabel(f[2]), nullptr) << "ledger line of an unknown worker: " << line;
      executed[{f[0], f[1]}].push_back(f[2]);
    }
  }

  std::map<std::string, int> repeats_of;  // instance label -> repeats it executed
  int not_completed = 0;
  int bad_records = 0;
  int stale_writes = 0;
  int unleased_executions = 0;
  int bad_event_logs = 0;
  for (const std::string& id : ids) {
    absl::StatusOr<RunRecord> run = store.GetRun(id);
    ASSERT_TRUE(run.ok()) << run.status();
    fig.max_run_attempts = std::max(fig.max_run_attempts, run->attempts);
    if (run->status != RunStatus::kCompleted) {
      ++not_completed;
      ADD_FAILURE() << id << " is " << ToString(run->status) << ": " << run->error;
      continue;
    }
    absl::StatusOr<std::vector<StepRecord>> steps = store.ListSteps(id, std::nullopt);
    ASSERT_TRUE(steps.ok()) << steps.status();
    std::map<std::string, std::string> recorded_by;  // step path -> instance label
    for (const StepRecord& s : *steps) {
      if (s.state == StepState::kSucceeded && s.output.is_object() && s.output.contains("worker") &&
          s.output["worker"].is_string()) {
        recorded_by[s.path] = s.output["worker"].get<std::string>();
      }
    }
    if (steps->size() != kSteps || recorded_by.size() != kSteps) {
      ++bad_records;
      ADD_FAILURE() << id << " has " << steps->size() << " step records, " << recorded_by.size()
                    << " succeeded with an output; want " << kSteps;
    }

    absl::StatusOr<std::vector<Event>> events = store.ListEvents(id, 0, 100000);
    ASSERT_TRUE(events.ok()) << events.status();
    std::string owner_label;               // the lease holder as the log goes
    std::set<std::string> lease_holders;   // every instance that took a lease on it
    std::map<std::string, int> succeeded;  // step path -> step.succeeded events
    std::set<int> expiries;                // attempts whose lease expired
    std::vector<HeldEvent> held;           // for the recovery times
    int finished = 0;
    bool after_finish = false;
    for (const Event& e : *events) {
      if (finished > 0) after_finish = true;
      if (e.type == event_types::kRunStarted) {
        const Instance* i = workers.ByPid(OwnerPid(e.data.value("lease_owner", "")));
        owner_label = i == nullptr ? "?" : i->label;
        lease_holders.insert(owner_label);
      } else if (e.type == event_types::kRunLeaseExpired) {
        ++fig.lease_expired_events;
        expiries.insert(e.data.value("attempt", 0));
      } else if (e.type == event_types::kStepSucceeded) {
        const std::string path = e.data.value("path", "");
        ++succeeded[path];
        auto rec = recorded_by.find(path);
        if (rec != recorded_by.end() && rec->second != owner_label) {
          ++stale_writes;
          ADD_FAILURE() << id << " " << path << ": the recorded output is " << rec->second
                        << "'s, appended while " << owner_label << " held the lease";
        }
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
    fig.leases_expired += static_cast<int>(expiries.size());
    bool log_ok = finished == 1 && !after_finish && static_cast<int>(succeeded.size()) == kSteps;
    for (const auto& [path, n] : succeeded) log_ok = log_ok && n == 1;
    if (!log_ok) {
      ++bad_event_logs;
      ADD_FAILURE() << id << ": " << finished << " run.finished (events after it: " << after_finish
                    << "), step.succeeded per step:" << [&] {
                         std::string s;
                         for (const auto& [p, n] : succeeded) absl::StrAppend(&s, " ", p, "=", n);
                         return s;
                       }();
    }
    if (!log_ok || steps->size() != kSteps) {
      std::cerr << "chaos: the events of " << id << ":\n";
      for (const Event& e : *events) {
        std::cerr << "  " << e.seq << " " << absl::FormatTime(e.at) << " " << e.type << " "
                  << e.data.dump() << "\n";
      }
    }

    for (int k = 1; k <= kSteps; ++k) {
      const std::string path = StepId(k);
      std::vector<std::string> by = executed[{id, path}];
      for (const std::string& label : by) {
        if (lease_holders.count(label) == 0) {
          ++unleased_executions;
          ADD_FAILURE() << id << " " << path << " executed by " << label
                        << ", which never held its lease";
        }
      }
      auto rec = recorded_by.find(path);
      if (rec == recorded_by.end()) continue;
      auto own = std::find(by.begin(), by.end(), rec->second);
      if (own == by.end()) {
        ADD_FAILURE() << id << " " << path << ": the recorded execution (" << rec->second
                      << ") is not in the ledger";
        continue;
      }
      by.erase(own);
      for (const std::string& label : by) ++repeats_of[label];
    }
  }

  // Each repeat is charged to the instance that executed it and lost it.
  for (const auto& [label, n] : repeats_of) {
    const Instance* i = workers.ByLabel(label);
    const int allowed = cfg.executors * (i->faults + i->restarts);
    fig.repeats += n;
    EXPECT_LE(n, allowed) << label << " executed " << n << " steps that another worker repeated; "
                          << "it had " << i->faults << " faults and lived through " << i->restarts
                          << " server restarts";
  }
  for (const Instance& i : workers.instances()) {
    fig.repeats_allowed += cfg.executors * (i.faults + i.restarts);
  }
  EXPECT_EQ(not_completed, 0);
  EXPECT_EQ(bad_records, 0);
  EXPECT_EQ(stale_writes, 0);
  EXPECT_EQ(unleased_executions, 0);
  EXPECT_EQ(bad_event_logs, 0);
  EXPECT_GE(fig.ledger_lines, cfg.runs * kSteps);
  EXPECT_EQ(fig.ledger_lines, cfg.runs * kSteps + fig.repeats);
  fig.total_s = absl::ToDoubleSeconds(absl::Now() - t_start);

  std::cout << "chaos figures (" << (cfg.redis_queue ? "PostgreSQL + Redis" : "PostgreSQL alone")
            << ", " << cfg.workers << " workers x " << cfg.executors << " executors, lease TTL "
            << cfg.lease_ttl << "):\n"
            << "  runs                 " << fig.runs << " admitted, " << fig.runs - not_completed
            << " completed\n"
            << "  steps                " << fig.runs * kSteps << " recorded, " << fig.ledger_lines
            << " executions in the ledger\n"
            << "  kills (SIGKILL)      " << fig.kills << "\n"
            << "  stops (SIGSTOP 2xTTL)"
            << " " << fig.stops << "\n"
            << "  PostgreSQL restarts  " << fig.postgres_restarts << "\n"
            << "  Redis restarts       " << fig.redis_restarts
            << (cfg.redis_queue ? "" : " (no Redis in this variant)") << "\n"
            << "  worker self-exits    " << fig.self_exits << "\n"
            << "  repeated executions  " << fig.repeats << " (allowed " << fig.repeats_allowed
            << ": executors x (faults + restarts lived through))\n"
            << "  stale writes         " << stale_writes << " accepted\n"
            << "  leases expired       " << fig.leases_expired << " (in "
            << fig.lease_expired_events << " run.lease_expired events)\n"
            << "  leases lost          " << fig.leases_lost
            << " (stale holders refused: renewals or writes)\n"
            << "  max attempts of a run " << fig.max_run_attempts << "\n"
            << "  recovery after a kill " << Percentiles(fig.recovery)
            << ": the kill to the interrupted run's next step started elsewhere (it waits its "
               "turn in the queue)\n"
            << "  re-enqueued after    " << Percentiles(fig.requeued)
            << ": the kill to the sweeper's run.lease_expired\n"
            << "  wall time            admission " << absl::StrFormat("%.1f", fig.admission_s)
            << " s, chaos " << absl::StrFormat("%.1f", fig.chaos_s) << " s, total "
            << absl::StrFormat("%.1f", fig.total_s) << " s\n";
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
}

ChaosConfig FromEnv(bool redis_queue) {
  ChaosConfig c;
  c.redis_queue = redis_queue;
  c.runs = EnvInt("RUNLOOM_CHAOS_RUNS", c.runs);
  c.min_kills = EnvInt("RUNLOOM_CHAOS_MIN_KILLS", c.min_kills);
  c.max_kills = std::max(c.max_kills, 2 * c.min_kills);
  const char* seed = std::getenv("RUNLOOM_CHAOS_SEED");
  if (seed == nullptr || !absl::SimpleAtoi(seed, &c.seed)) c.seed = std::random_device{}();
  return c;
}

// On PostgreSQL alone (its own queue table): no Redis to restart.
TEST(DistributedChaos, PostgresAlone) { RunChaos(FromEnv(/*redis_queue=*/false)); }

// Jobs on a Redis Stream fed by PostgreSQL's outbox; Redis restarted empty once.
TEST(DistributedChaos, PostgresAndRedis) { RunChaos(FromEnv(/*redis_queue=*/true)); }

}  // namespace
}  // namespace runloom
