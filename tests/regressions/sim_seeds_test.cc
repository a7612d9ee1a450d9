// Seeds the deterministic simulation (src/sim/, docs/reliability.md) failed
// on before their bug was fixed; each passes now. A change of the simulator
// or of the engine moves what a seed does: then replay each fix's scenario
// anew (the comments say what it was) and update its seed.
#include "gtest/gtest.h"
#include "sim/sim.h"

#include <cstdint>
#include <string>

namespace runloom::sim {
namespace {

struct Case {
  uint64_t seed;
  const char* bug;
};

// seed 27: a settle that never reached the store left its reservation open
//   after the run completed; a rerun's lease (attempt 1 again) did not release
//   it, so the new revision reserved against an earlier lease's leftover.
//   Fixed: every lease but a never-run run's first releases open
//   reservations, settles are retried, an execution ending releases leftovers.
// seed 80: a Reserve whose reply was lost applied; the step retried under a
//   new key and the first reservation stayed open after the run completed.
//   Fixed: a reserve is retried with the same key, and an ending execution
//   releases leftovers.
// seed 304: an admin reset cancelled a running run, then its executor
//   crashed: nobody released the reservations it held. Fixed: the reset
//   releases the reservations of each running run it cancels.
// seed 726: an executor read a never-run run, slept past a rerun, and then
//   took the run's "first" lease (a rerun resets the attempts to 0): its first
//   write applied, and it ran revision 1's graph again, rewriting a finished
//   step record of revision 1. Fixed: a first write needs the run never
//   leased and nothing recorded but its creation (IsFirstLease); an executor
//   whose lease finds another revision than it read gives the run back.
// seed 17 (found first by the kill campaign, tests/chaos/kill_campaign_test.cc):
//   an executor stopped past its lease TTL came back and its llm step's
//   Reserve was refused by the fence (lease expired); the step failed with
//   the refusal as an error, and the run ended failed. Fixed: a fence refusal
//   of BeginWrite or Reserve stops the whole execution as lease lost, the
//   step unrecorded for the next holder.
// seed 296 (issue 23, once schedules joined the workload): a sweeper read a
//   waiting run as due, was stopped before its commit, and meanwhile the run
//   was woken, executed and parked again at a later time; the commit
//   expected only the status `waiting` and woke it early. Fixed: the
//   sweeper reads the run again (its wake time due by the store's now) and
//   its commit expects the event sequence it read.
constexpr Case kCases[] = {
    {27, "reservation left open by a failed settle, counted against a rerun"},
    {80, "reservation left open by a lost Reserve reply"},
    {304, "reservation of a run cancelled by the admin reset, its executor crashed"},
    {726, "a stale first lease after a rerun rewrote a step record"},
    {17, "a fence refusal of a model call's Reserve failed the run"},
    {296, "a sweeper stopped before its commit woke a re-parked run early"},
};

TEST(SimulationRegressions, FailingSeedsHoldNow) {
  for (const Case& c : kCases) {
    SimResult r = RunSimulation({.seed = c.seed});
    EXPECT_TRUE(r.ok()) << "seed " << c.seed << " (" << c.bug << "): " << r.violation
                        << "\nreplay: runloom-sim --seed " << c.seed << " --history";
  }
}

}  // namespace
}  // namespace runloom::sim
