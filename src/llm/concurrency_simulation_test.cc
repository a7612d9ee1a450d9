// The adaptive cap against the fake provider's hidden concurrency limit, as a
// deterministic discrete-event simulation on a SimulatedClock: 100 callers
// always want a model call; the fake provider answers 429 above K calls in
// flight, and K changes mid-run (20 -> 8 -> 30). The controller must follow
// K closely enough that throughput is within 15 % of the ideal K-limited
// throughput, with fewer than 3 % of calls answered 429.
//
// Then 002's silent wall: a database pool that saturates below the
// provider's limit (PoolWall, below).
//
// The cap over time goes to concurrency_cap.csv in the build directory
// ($RUNLOOM_CAP_CSV overrides); scripts/plot_cap.py draws it for
// docs/performance.md.
#include "llm/cap_board.h"
#include "llm/concurrency_controller.h"
#include "llm/fake_provider.h"
#include "llm/llm_slots.h"
#include "testing/capturing_logger.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include <cstdlib>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace runloom {
namespace {

struct Phase {
  int limit;            // the provider's hidden K
  absl::Duration span;  // how long it holds
};

struct SimConfig {
  std::vector<Phase> phases;
  int callers = 100;
  absl::Duration latency = absl::Milliseconds(800);
  absl::Duration jitter = absl::Milliseconds(400);  // mean latency 1 s
  double error_rate = 0.01;
  uint64_t seed = 0;
  ConcurrencyOptions options;
};

struct Sample {
  double t = 0;
  int limit = 0;
  int cap = 0;
  int in_flight = 0;
};

struct SimResult {
  int64_t calls = 0;  // sent to the provider
  int64_t ok = 0;
  int64_t rate_limited = 0;
  int64_t errors = 0;
  double ideal_ok = 0;  // K-limited: K / mean latency * (1 - error rate), summed
  std::vector<Sample> samples;
};

// A discrete-event loop on a SimulatedClock: events at times, fired in time
// order (ties in the order they were scheduled).
template <typename Event>
class EventQueue {
 public:
  void Schedule(absl::Time t, Event e) { events_.emplace(std::make_pair(t, seq_++), std::move(e)); }
  // Fires every event due by `end`: the clock moves to it, `handle` takes it,
  // then `after` runs (callers start calls).
  template <typename Handle, typename After>
  void RunUntil(SimulatedClock& clock, absl::Time end, Handle handle, After after) {
    while (!events_.empty() && events_.begin()->first.first <= end) {
      auto node = events_.extract(events_.begin());
      clock.SetTime(node.key().first);
      handle(std::move(node.mapped()));
      after();
    }
  }

 private:
  std::map<std::pair<absl::Time, int64_t>, Event> events_;
  int64_t seq_ = 0;
};

// One caller's model call: a slot under the cap, if one is free now, and
// the provider's answer (due after its latency).
struct Call {
  LlmSlots::Slot slot;
  FakeLlmProvider::Admission admission;
};
std::optional<Call> StartCall(LlmSlots& slots, FakeLlmProvider& fake, SimulatedClock& clock,
                              int64_t n) {
  std::optional<LlmSlots::Slot> slot = slots.TryAcquire(&clock);
  if (!slot) return std::nullopt;
  LlmRequest request{.model = "fake", .prompt = absl::StrCat("call ", n)};
  FakeLlmProvider::Admission admission = fake.Enter(request, 1);
  return Call{std::move(*slot), std::move(admission)};
}

class Simulation {
 public:
  explicit Simulation(SimConfig config)
      : config_(std::move(config)),
        board_(NewInProcessCapBoard(&clock_)),
        fake_(FakeProviderOptions{.latency = config_.latency,
                                  .latency_jitter = config_.jitter,
                                  .error_rate = config_.error_rate,
                                  .hidden_limit = config_.phases.front().limit,
                                  .seed = config_.seed}),
        controller_(std::make_shared<ConcurrencyController>(
            "fake", config_.options,
            ControllerDeps{.clock = &clock_, .logger = &log_, .board = board_})),
        slots_("fake", config_.options, &log_) {
    slots_.Attach(board_, controller_);
  }

  SimResult Run() {
    const absl::Time start = clock_.Now();
    absl::Time at = start;
    for (const Phase& p : config_.phases) {
      Schedule(at, Event{.kind = Kind::kSetLimit, .limit = p.limit});
      const double mean = absl::ToDoubleSeconds(config_.latency + config_.jitter / 2);
      result_.ideal_ok += p.limit / mean * absl::ToDoubleSeconds(p.span) * (1 - config_.error_rate);
      at += p.span;
    }
    const absl::Time end = at;
    for (absl::Time t = start; t <= end; t += config_.options.tick) {
      Schedule(t, Event{.kind = Kind::kTick});
    }
    ready_ = config_.callers;
    events_.RunUntil(
        clock_, end, [this](Event e) { Handle(std::move(e)); }, [this] { Dispatch(); });
    return std::move(result_);
  }

 private:
  enum class Kind { kSetLimit, kTick, kDone, kReady };
  struct Event {
    Kind kind;
    int limit = 0;
    std::optional<LlmSlots::Slot> slot;
    FakeLlmProvider::Admission admission;
  };

  void Schedule(absl::Time t, Event e) { events_.Schedule(t, std::move(e)); }

  void Handle(Event e) {
    switch (e.kind) {
      case Kind::kSetLimit:
        limit_ = e.limit;
        fake_.SetHiddenLimit(e.limit);
        break;
      case Kind::kTick: {
        controller_->Tick();
        result_.samples.push_back(Sample{absl::ToDoubleSeconds(clock_.Now() - absl::UnixEpoch()),
                                         limit_, slots_.Cap(&clock_), slots_.in_flight()});
        break;
      }
      case Kind::kReady:
        ++ready_;
        break;
      case Kind::kDone: {
        fake_.Leave();
        const absl::Status& s = e.admission.status;
        if (s.ok()) {
          ++result_.ok;
          e.slot->Finish(CallOutcome::Kind::kOk, e.admission.telemetry);
          ++ready_;
        } else if (absl::IsResourceExhausted(s)) {
          ++result_.rate_limited;
          const RateLimitTelemetry t = RateLimitOf(s);
          e.slot->Finish(CallOutcome::Kind::kRateLimited, t);
          // The caller honours Retry-After before it asks again.
          Schedule(clock_.Now() + t.retry_after.value_or(absl::Seconds(1)),
                   Event{.kind = Kind::kReady});
        } else {
          ++result_.errors;
          e.slot->Finish(CallOutcome::Kind::kError, {});
          ++ready_;
        }
        break;
      }
    }
  }

  // Every ready caller takes a slot if one is free and calls the provider.
  void Dispatch() {
    while (ready_ > 0) {
      std::optional<Call> call = StartCall(slots_, fake_, clock_, ++result_.calls);
      if (!call) {
        --result_.calls;
        return;
      }
      --ready_;
      Event done{.kind = Kind::kDone, .slot = std::move(call->slot), .admission = call->admission};
      Schedule(clock_.Now() + call->admission.latency, std::move(done));
    }
  }

  const SimConfig config_;
  SimulatedClock clock_;
  testing::CapturingLogger log_;
  std::shared_ptr<CapBoard> board_;
  FakeLlmProvider fake_;
  std::shared_ptr<ConcurrencyController> controller_;
  LlmSlots slots_;
  EventQueue<Event> events_;
  int ready_ = 0;
  int limit_ = 0;
  SimResult result_;
};

constexpr uint64_t kPlottedSeed = 42;

std::string CsvPath() {
  if (const char* env = std::getenv("RUNLOOM_CAP_CSV"); env != nullptr && *env != '\0') return env;
  std::string binary = RUNLOOM_BINARY_DEFAULT;  // <build>/runloom
  return binary.substr(0, binary.rfind('/') + 1) + "concurrency_cap.csv";
}

class ConcurrencySimulation : public ::testing::TestWithParam<uint64_t> {};

TEST_P(ConcurrencySimulation, CapFollowsAHiddenLimitThatChanges) {
  SimConfig config;
  config.phases = {{20, absl::Seconds(300)}, {8, absl::Seconds(300)}, {30, absl::Seconds(300)}};
  config.options.static_cap = 4;
  config.seed = GetParam();
  Simulation sim(config);
  SimResult r = sim.Run();
  std::printf("seed %llu: ", static_cast<unsigned long long>(config.seed));

  const double throughput = static_cast<double>(r.ok) / r.ideal_ok;
  const double share_429 = static_cast<double>(r.rate_limited) / static_cast<double>(r.calls);
  std::printf("calls %lld ok %lld (ideal %.0f, %.1f %%) 429 %lld (%.2f %%) errors %lld\n",
              static_cast<long long>(r.calls), static_cast<long long>(r.ok), r.ideal_ok,
              100 * throughput, static_cast<long long>(r.rate_limited), 100 * share_429,
              static_cast<long long>(r.errors));
  EXPECT_GE(throughput, 0.85);
  EXPECT_LE(throughput, 1.02);  // a simulation above the ideal would be broken
  EXPECT_LT(share_429, 0.03);
  EXPECT_GT(r.errors, 0);  // the error rate was exercised

  // Convergence: over the second half of each phase the cap stays near K.
  double phase_start = r.samples.front().t;
  for (const Phase& p : config.phases) {
    const double half = phase_start + absl::ToDoubleSeconds(p.span) / 2;
    const double end = phase_start + absl::ToDoubleSeconds(p.span);
    double sum = 0;
    int n = 0;
    for (const Sample& s : r.samples) {
      if (s.t >= half && s.t < end) {
        sum += s.cap;
        ++n;
        EXPECT_LE(s.cap, p.limit + 2) << "at t=" << s.t;
      }
    }
    ASSERT_GT(n, 0);
    EXPECT_NEAR(sum / n, p.limit, 0.1 * p.limit) << "phase K=" << p.limit;
    phase_start = end;
  }

  if (config.seed != kPlottedSeed) return;
  const std::string path = CsvPath();
  std::ofstream csv(path);
  ASSERT_TRUE(csv) << "cannot write " << path;
  csv << "seconds,hidden_limit,cap,in_flight\n";
  const double t0 = r.samples.front().t;
  for (const Sample& s : r.samples) {
    csv << (s.t - t0) << "," << s.limit << "," << s.cap << "," << s.in_flight << "\n";
  }
  std::printf("cap over time: %s\n", path.c_str());
}

// The seeds draw different latencies and failures; 42 is the one plotted.
INSTANTIATE_TEST_SUITE_P(Seeds, ConcurrencySimulation, ::testing::Values(kPlottedSeed, 7, 1234));

// 002's "silent wall": "above a certain concurrency the database pool
// exhausted while the LLM provider and CPU looked green, and throughput went
// to zero". The provider admits K = 100 calls in flight; after each answer
// the step commits on the store's pool: 8 connections, 250 ms per commit,
// so at most 32 steps a second finish, about 32 calls in flight. A commit
// that waited longer than the lease slack (1 s) finds its lease gone and is
// fenced (the work is lost); one that waits past the acquire timeout (2 s)
// gives up; either way the caller starts over. Past the wall every commit
// waits too long, so throughput collapses while the provider sees no error.
struct PoolSimConfig {
  int callers = 200;
  int provider_limit = 100;
  int connections = 8;
  absl::Duration commit = absl::Milliseconds(250);
  absl::Duration lease_slack = absl::Seconds(1);
  absl::Duration acquire_timeout = absl::Seconds(2);
  absl::Duration span = absl::Seconds(600);
  bool sense_pool = true;  // false: the controller is given no pool to measure
  uint64_t seed = 0;
  ConcurrencyOptions options;
};

struct PoolSimResult {
  int64_t calls = 0;     // sent to the provider
  int64_t finished = 0;  // committed in time: the goodput
  int64_t fenced = 0;    // committed after the lease slack: lost
  int64_t gave_up = 0;   // no connection within the acquire timeout
  int64_t rate_limited = 0;
  double ideal = 0;       // finished steps the pool allows over the span
  std::vector<int> caps;  // per tick
};

class PoolSimulation {
 public:
  explicit PoolSimulation(PoolSimConfig config)
      : config_(std::move(config)),
        board_(NewInProcessCapBoard(&clock_)),
        fake_(FakeProviderOptions{.latency = absl::Milliseconds(800),
                                  .latency_jitter = absl::Milliseconds(400),
                                  .hidden_limit = config_.provider_limit,
                                  .seed = config_.seed}),
        controller_(std::make_shared<ConcurrencyController>(
            "fake", config_.options,
            ControllerDeps{.clock = &clock_,
                           .logger = &log_,
                           .board = board_,
                           .pool = config_.sense_pool
                                       ? std::function<PoolUse()>([this] { return use_; })
                                       : nullptr,
                           .in_flight = [this] { return slots_.in_flight(); }})),
        slots_("fake", config_.options, &log_),
        free_(config_.connections) {
    slots_.Attach(board_, controller_);
    use_.size = config_.connections;
  }

  PoolSimResult Run() {
    const absl::Time start = clock_.Now();
    const absl::Time end = start + config_.span;
    result_.ideal = config_.connections / absl::ToDoubleSeconds(config_.commit) *
                    absl::ToDoubleSeconds(config_.span);
    for (absl::Time t = start; t <= end; t += config_.options.tick) {
      Schedule(t, Event{.kind = Kind::kTick});
    }
    ready_ = config_.callers;
    events_.RunUntil(
        clock_, end, [this](Event e) { Handle(std::move(e)); }, [this] { Dispatch(); });
    return std::move(result_);
  }

 private:
  enum class Kind { kTick, kAnswered, kCommitted, kGiveUp, kReady };
  struct Event {
    Kind kind;
    std::optional<LlmSlots::Slot> slot;
    FakeLlmProvider::Admission admission;
    int64_t commit = 0;  // kCommitted, kGiveUp: which commit
    absl::Time asked;    // kCommitted: when it asked for a connection
  };
  struct Waiting {
    int64_t commit;
    absl::Time asked;
  };

  void Schedule(absl::Time t, Event e) { events_.Schedule(t, std::move(e)); }

  void Handle(Event e) {
    switch (e.kind) {
      case Kind::kTick:
        controller_->Tick();
        result_.caps.push_back(slots_.Cap(&clock_));
        break;
      case Kind::kReady:
        ++ready_;
        break;
      case Kind::kAnswered: {
        fake_.Leave();
        const absl::Status& s = e.admission.status;
        if (absl::IsResourceExhausted(s)) {
          ++result_.rate_limited;
          const RateLimitTelemetry t = RateLimitOf(s);
          e.slot->Finish(CallOutcome::Kind::kRateLimited, t);
          Schedule(clock_.Now() + t.retry_after.value_or(absl::Seconds(1)),
                   Event{.kind = Kind::kReady});
          break;
        }
        e.slot->Finish(s.ok() ? CallOutcome::Kind::kOk : CallOutcome::Kind::kError,
                       e.admission.telemetry);
        // The step's result goes to the store: it needs a connection.
        const int64_t commit = ++commits_;
        ++use_.acquires;
        if (free_ > 0) {
          --free_;
          Schedule(clock_.Now() + config_.commit,
                   Event{.kind = Kind::kCommitted, .commit = commit, .asked = clock_.Now()});
        } else {
          ++use_.waited;
          queue_.push_back({commit, clock_.Now()});
          Schedule(clock_.Now() + config_.acquire_timeout,
                   Event{.kind = Kind::kGiveUp, .commit = commit});
        }
        break;
      }
      case Kind::kGiveUp:
        for (auto it = queue_.begin(); it != queue_.end(); ++it) {
          if (it->commit != e.commit) continue;
          queue_.erase(it);
          --use_.acquires;  // never handed out
          ++use_.exhausted;
          use_.wait += config_.acquire_timeout;
          ++result_.gave_up;
          ++ready_;  // the step fails and is retried from the start
          break;
        }
        break;
      case Kind::kCommitted: {
        if (clock_.Now() - config_.commit - e.asked > config_.lease_slack) {
          ++result_.fenced;
        } else {
          ++result_.finished;
        }
        ++ready_;
        // The connection goes to the oldest waiter.
        if (queue_.empty()) {
          ++free_;
        } else {
          const Waiting next = queue_.front();
          queue_.pop_front();
          use_.wait += clock_.Now() - next.asked;
          Schedule(clock_.Now() + config_.commit,
                   Event{.kind = Kind::kCommitted, .commit = next.commit, .asked = next.asked});
        }
        break;
      }
    }
  }

  void Dispatch() {
    while (ready_ > 0) {
      std::optional<Call> call = StartCall(slots_, fake_, clock_, ++result_.calls);
      if (!call) {
        --result_.calls;
        return;
      }
      --ready_;
      Event answered{
          .kind = Kind::kAnswered, .slot = std::move(call->slot), .admission = call->admission};
      Schedule(clock_.Now() + call->admission.latency, std::move(answered));
    }
  }

  const PoolSimConfig config_;
  SimulatedClock clock_;
  testing::CapturingLogger log_;
  std::shared_ptr<CapBoard> board_;
  FakeLlmProvider fake_;
  PoolUse use_;
  std::shared_ptr<ConcurrencyController> controller_;
  LlmSlots slots_;
  int free_;
  std::deque<Waiting> queue_;
  int64_t commits_ = 0;
  EventQueue<Event> events_;
  int ready_ = 0;
  PoolSimResult result_;
};

class PoolWall : public ::testing::TestWithParam<uint64_t> {};

TEST_P(PoolWall, TheCapFollowsAPoolThatSaturatesBelowTheProvidersLimit) {
  PoolSimConfig config;
  config.seed = GetParam();
  config.options.static_cap = 8;
  PoolSimResult sensed = PoolSimulation(config).Run();
  config.sense_pool = false;
  PoolSimResult blind = PoolSimulation(config).Run();
  auto show = [](const char* name, const PoolSimResult& r) {
    double cap = 0;
    for (size_t i = r.caps.size() / 2; i < r.caps.size(); ++i) cap += r.caps[i];
    cap /= static_cast<double>(r.caps.size() - r.caps.size() / 2);
    std::printf(
        "%s: calls %lld finished %lld (%.1f %% of the pool's %.0f) fenced %lld "
        "gave up %lld 429 %lld; mean cap over the second half %.1f\n",
        name, static_cast<long long>(r.calls), static_cast<long long>(r.finished),
        100.0 * static_cast<double>(r.finished) / r.ideal, r.ideal,
        static_cast<long long>(r.fenced), static_cast<long long>(r.gave_up),
        static_cast<long long>(r.rate_limited), cap);
    return cap;
  };
  std::printf("seed %llu\n", static_cast<unsigned long long>(config.seed));
  const double sensed_cap = show("pool measured", sensed);
  const double blind_cap = show("pool not measured", blind);
  // The wall is real in this model: blind, the cap climbs to the provider's
  // limit and throughput collapses although the provider rarely says no.
  EXPECT_LT(static_cast<double>(blind.finished), 0.25 * blind.ideal);
  EXPECT_GT(blind_cap, 60);
  // Measured, the pool binds: the cap stays near what the pool sustains
  // (about 32 calls in flight), far below the provider's 100, and
  // throughput stays within 15 % of the pool's (a pool kept 100 % busy).
  EXPECT_GE(static_cast<double>(sensed.finished), 0.85 * sensed.ideal);
  EXPECT_LT(sensed_cap, 45);
  EXPECT_GT(sensed_cap, 25);
  EXPECT_LT(static_cast<double>(sensed.fenced + sensed.gave_up),
            0.05 * static_cast<double>(sensed.finished));
}

INSTANTIATE_TEST_SUITE_P(Seeds, PoolWall, ::testing::Values(kPlottedSeed, 7, 1234));

}  // namespace
}  // namespace runloom
