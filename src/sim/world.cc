#include "sim/world.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace runloom::sim {
namespace {

constexpr absl::Time kEpoch = absl::FromUnixSeconds(1'800'000'000);
// A deferred timer (too deep to fire now) is tried again this much later.
constexpr absl::Duration kDeferral = absl::Milliseconds(50);
// No workload runs this long: past it, something waits forever.
constexpr absl::Duration kTimeCap = absl::Hours(6);

// Time as the world or one process sees it. Waits give the world a
// scheduling decision (World::Idle) until the condition holds or the
// deadline passes: nothing blocks the thread.
class SimClock final : public Clock {
 public:
  SimClock(World* world, std::shared_ptr<Incarnation> inc) : world_(world), inc_(std::move(inc)) {}

  absl::Time Now() override { return world_->now() + skew(); }
  void SleepFor(absl::Duration d) override { SleepUntil(Now() + d); }
  void SleepUntil(absl::Time t) override {
    while (Now() < t) world_->Idle(t - skew());
  }
  bool AwaitWithDeadline(Mutex* mu, const absl::Condition& cond, absl::Time deadline) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    while (true) {
      if (cond.Eval()) return true;
      if (Now() >= deadline) return false;
      // Whoever makes `cond` true takes `mu`: let go of it while the world
      // runs other work.
      mu->Unlock();
      world_->Idle(deadline == absl::InfiniteFuture() ? deadline : deadline - skew());
      mu->Lock();
    }
  }

 private:
  absl::Duration skew() const { return inc_ == nullptr ? absl::ZeroDuration() : inc_->skew; }

  World* const world_;
  const std::shared_ptr<Incarnation> inc_;  // null: world time
};

class SimScheduler final : public Scheduler {
 public:
  explicit SimScheduler(World* world) : world_(world) {}

  void RunAll(std::span<const std::function<void()>> tasks, Clock* clock, absl::Time deadline,
              const std::function<void(size_t)>& late) override {
    const size_t n = tasks.size();
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    for (size_t i = n; i > 1; --i) std::swap(order[i - 1], order[world_->rng().Below(i)]);
    auto state = std::make_shared<State>();
    state->done.assign(n, false);
    state->late = &late;
    if (deadline != absl::InfiniteFuture()) {
      const absl::Time at = deadline - (clock->Now() - world_->now());
      world_->At(at, nullptr, [state] {
        if (!state->active) return;
        for (size_t i = 0; i < state->done.size(); ++i) {
          if (!state->done[i]) (*state->late)(i);
        }
      });
    }
    std::string names;
    for (size_t i : order) absl::StrAppend(&names, names.empty() ? "" : ",", i);
    world_->Record(absl::StrCat(world_->Stamp(), " branches in order ", names));
    for (size_t i : order) {
      tasks[i]();
      state->done[i] = true;
    }
    state->active = false;  // the deadline timer, if still pending, does nothing
  }

 private:
  struct State {
    std::vector<bool> done;
    const std::function<void(size_t)>* late = nullptr;
    bool active = true;
  };
  World* const world_;
};

}  // namespace

World::World(uint64_t seed)
    : rng_(seed),
      now_(kEpoch),
      start_(kEpoch),
      clock_(std::make_unique<SimClock>(this, nullptr)),
      scheduler_(std::make_unique<SimScheduler>(this)) {}

std::string World::Stamp() const {
  return absl::StrFormat("%9.3f", absl::ToDoubleSeconds(now_ - start_));
}

std::unique_ptr<Clock> World::ProcessClock(std::shared_ptr<Incarnation> inc) {
  return std::make_unique<SimClock>(this, std::move(inc));
}

void World::At(absl::Time at, std::shared_ptr<Incarnation> owner, std::function<void()> fn) {
  timers_.emplace(std::make_pair(std::max(at, now_), timer_seq_++),
                  Timer{std::move(owner), std::move(fn)});
}

absl::Time World::NextTimer() const {
  return timers_.empty() ? absl::InfiniteFuture() : timers_.begin()->first.first;
}

void World::AdvanceTo(absl::Time t) {
  while (!timers_.empty() && timers_.begin()->first.first <= t) {
    auto it = timers_.begin();
    const absl::Time at = it->first.first;
    Timer timer = std::move(it->second);
    timers_.erase(it);
    now_ = std::max(now_, at);
    if (timer.owner != nullptr && !timer.owner->alive) continue;  // died with its process
    if (timer.owner != nullptr && timer.owner->paused_until > now_) {
      const absl::Time wake = timer.owner->paused_until;
      At(wake, std::move(timer.owner), std::move(timer.fn));
      continue;
    }
    if (depth_ >= kMaxDepth || !violation_.empty()) {
      At(now_ + kDeferral, std::move(timer.owner), std::move(timer.fn));
      if (!violation_.empty()) return;
      continue;
    }
    ++depth_;
    ++fired_;
    timer.fn();
    --depth_;
  }
  now_ = std::max(now_, t);
}

void World::Idle(absl::Time deadline) {
  if (now_ - start_ > kTimeCap) {
    // Something waits for a condition nothing will make true: a hang in the
    // engine. There is no way back up the stack: print and stop.
    Violate("simulated time passed 6 h: some code waits forever");
    for (const std::string& line : history_) std::fprintf(stderr, "%s\n", line.c_str());
    std::abort();
  }
  absl::Time next = std::min({now_ + rng_.Millis(1, 300), NextTimer(), deadline});
  AdvanceTo(std::max(next, now_));
}

void World::Record(std::string line) { history_.push_back(std::move(line)); }

void World::Violate(const std::string& what) {
  if (!violation_.empty()) return;
  violation_ = what;
  Record(absl::StrCat(Stamp(), " VIOLATION: ", what));
}

}  // namespace runloom::sim
