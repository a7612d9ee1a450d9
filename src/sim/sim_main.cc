// runloom-sim: the deterministic simulation from the command line.
//
//   runloom-sim --seed 7                 one seed; its history on a failure
//   runloom-sim --seed 1 --seeds 100000  a campaign: seeds 1..100000
//   runloom-sim --seed 7 --history       print the whole history
//   runloom-sim --seed 7 --bug decision_ignores_digest   (RUNLOOM_TESTING builds)
//
// Exit status: 0 when every seed held every invariant, 1 when one did not
// (its history is printed), 2 for bad flags.
#include "CLI/CLI.hpp"
#include "core/injected_bug.h"

#include "absl/strings/str_join.h"
#include "sim/sim.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  CLI::App app{"runloom-sim: the engine under a seeded, deterministic simulation"};
  uint64_t seed = 1;
  uint64_t seeds = 1;
  int steps = 400;
  bool history = false;
  std::vector<std::string> bug_names;
  app.add_option("--seed", seed, "The (first) seed")->capture_default_str();
  app.add_option("--seeds", seeds, "How many seeds, from --seed on")->capture_default_str();
  app.add_option("--steps", steps, "Scheduling steps with faults on, per seed")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  app.add_flag("--history", history, "Print the history of each seed, not only of a failing one");
  std::vector<std::string> all;
  for (runloom::InjectedBug b : runloom::AllInjectedBugs()) all.emplace_back(runloom::ToString(b));
  app.add_option("--bug", bug_names, "Switch an injected bug on (" + absl::StrJoin(all, ", ") + ")")
      ->check(CLI::IsMember(all));
  CLI11_PARSE(app, argc, argv);

  runloom::sim::SimOptions options;
  options.steps = steps;
  for (const std::string& name : bug_names)
    options.bugs.push_back(*runloom::ParseInjectedBug(name));
  const auto start = std::chrono::steady_clock::now();
  int64_t operations = 0, crashes = 0, faults = 0, runs = 0, kept = 0, resolved = 0, scheduled = 0,
          children = 0, pruned = 0, spans = 0;
  int64_t keyed = 0, over_limit = 0, crashed_holding_many = 0;
  int most_held = 0;
  for (uint64_t s = seed; s < seed + seeds; ++s) {
    options.seed = s;
    runloom::sim::SimResult r = runloom::sim::RunSimulation(options);
    operations += r.operations;
    crashes += r.crashes;
    faults += r.faults;
    runs += r.runs;
    kept += r.signals_kept;
    resolved += r.signals_resolved;
    scheduled += r.schedule_runs;
    children += r.child_runs;
    pruned += r.runs_pruned;
    spans += r.spans;
    keyed += r.keyed_leases;
    over_limit += r.over_limit;
    most_held = std::max(most_held, r.most_held);
    crashed_holding_many += r.crashes_holding_many;
    if (history || !r.ok()) {
      for (const std::string& line : r.history) std::printf("%s\n", line.c_str());
    }
    if (!r.ok()) {
      std::printf("seed %llu FAILED: %s\nreplay: runloom-sim --seed %llu --steps %d%s%s\n",
                  static_cast<unsigned long long>(s), r.violation.c_str(),
                  static_cast<unsigned long long>(s), steps, bug_names.empty() ? "" : " --bug ",
                  absl::StrJoin(bug_names, " --bug ").c_str());
      return 1;
    }
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "runloom-sim: seeds %llu..%llu held every invariant: %lld runs, %lld store and queue "
      "operations, %lld crashes, %lld other faults, %lld signals kept (%lld resolving a resting "
      "wait), %lld runs started by schedules, %lld child runs, %lld leases of runs with a "
      "concurrency key (%lld refused over the limit), %lld finished runs deleted by retention, "
      "%lld spans checked, up to %d runs in flight in one process (%lld crashes holding more "
      "runs than executors), %.1f s\n",
      static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed + seeds - 1),
      static_cast<long long>(runs), static_cast<long long>(operations),
      static_cast<long long>(crashes), static_cast<long long>(faults), static_cast<long long>(kept),
      static_cast<long long>(resolved), static_cast<long long>(scheduled),
      static_cast<long long>(children), static_cast<long long>(keyed),
      static_cast<long long>(over_limit), static_cast<long long>(pruned),
      static_cast<long long>(spans), most_held, static_cast<long long>(crashed_holding_many),
      secs);
  return 0;
}
