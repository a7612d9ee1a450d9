// The simulated world: one thread, one seeded generator, a simulated clock
// with timers, and the processes whose engines run on it (sim.h).
//
// Scheduling is by timers. Every service of every simulated process (each
// executor slot's poll, the lease keeper's heartbeat, the cancel watch, the
// sweeper), each client action and each fault is a timer of the world clock.
// A timer fires when the clock passes it, on the stack of whatever code is
// waiting then: an engine call that waits on its clock (a sleeping step, a
// retry's back-off) and a store call the simulator makes slow both move the
// clock, so other processes' work runs in the middle of theirs. Nested
// firings are bounded (kMaxDepth); a deeper timer is deferred.
//
// Thread-safety: none; everything runs on the simulator's thread.
#pragma once

#include "runloom/clock.h"
#include "runloom/scheduler.h"

#include "absl/time/time.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace runloom::sim {

// The seeded source of every choice.
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : gen_() % n; }
  bool Chance(double p) { return static_cast<double>(gen_() >> 11) * 0x1.0p-53 < p; }
  absl::Duration Millis(int lo, int hi) {
    return absl::Milliseconds(lo + static_cast<int>(Below(static_cast<uint64_t>(hi - lo + 1))));
  }
  uint64_t Next() { return gen_(); }

 private:
  std::mt19937_64 gen_;  // fixed algorithm: the same sequence everywhere
};

// One life of a simulated process: a crash ends it; a restart is a new one.
struct Incarnation {
  int process = 0;
  int gen = 0;
  std::string name;  // "p1.0": process 1, first life
  bool alive = true;
  absl::Time paused_until = absl::InfinitePast();  // a stopped process (SIGSTOP)
  absl::Duration skew;                             // its clock minus world time
};

class World {
 public:
  static constexpr int kMaxDepth = 5;

  explicit World(uint64_t seed);

  Rng& rng() { return rng_; }
  absl::Time now() const { return now_; }
  // Milliseconds since the simulation began, for the history.
  std::string Stamp() const;

  // A timer at `at` (owner null = the world's; a dead owner's timer is
  // dropped, a paused owner's waits for it to wake).
  void At(absl::Time at, std::shared_ptr<Incarnation> owner, std::function<void()> fn);
  // Moves the clock to `t`, firing every timer due on the way.
  void AdvanceTo(absl::Time t);
  // The next timer's time (InfiniteFuture when none).
  absl::Time NextTimer() const;
  // One scheduling decision while code waits for `deadline`: the clock
  // moves to the next timer, the deadline, or a little (seeded), whichever
  // comes first.
  void Idle(absl::Time deadline);
  int timers_fired() const { return fired_; }

  // Who is acting: the incarnations whose code is on the stack, innermost last.
  void Push(const std::shared_ptr<Incarnation>& inc) { stack_.push_back(inc); }
  void Pop() { stack_.pop_back(); }
  std::shared_ptr<Incarnation> acting() const { return stack_.empty() ? nullptr : stack_.back(); }

  // Every incarnation by its name (Sim::StartLife registers each), for the
  // checks that ask whether a lease's holder is alive.
  void Register(const std::shared_ptr<Incarnation>& inc) { incarnations_[inc->name] = inc; }
  std::shared_ptr<Incarnation> Find(const std::string& name) const {
    auto it = incarnations_.find(name);
    return it == incarnations_.end() ? nullptr : it->second;
  }

  void Record(std::string line);
  std::vector<std::string>& history() { return history_; }

  // The first invariant broken; the simulation stops at its next step.
  void Violate(const std::string& what);
  const std::string& violation() const { return violation_; }

  Clock* clock() { return clock_.get(); }
  // A clock for `inc`: world time plus its skew.
  std::unique_ptr<Clock> ProcessClock(std::shared_ptr<Incarnation> inc);
  // Runs parallel branches one after another in a seeded order, and the
  // late call as a timer (runloom/scheduler.h).
  Scheduler* scheduler() { return scheduler_.get(); }

 private:
  struct Timer {
    std::shared_ptr<Incarnation> owner;
    std::function<void()> fn;
  };

  Rng rng_;
  absl::Time now_;
  const absl::Time start_;
  uint64_t timer_seq_ = 0;
  std::map<std::pair<absl::Time, uint64_t>, Timer> timers_;
  int depth_ = 0;
  int fired_ = 0;
  std::vector<std::shared_ptr<Incarnation>> stack_;
  std::map<std::string, std::shared_ptr<Incarnation>> incarnations_;
  std::vector<std::string> history_;
  std::string violation_;
  std::unique_ptr<Clock> clock_;
  std::unique_ptr<Scheduler> scheduler_;
};

}  // namespace runloom::sim
