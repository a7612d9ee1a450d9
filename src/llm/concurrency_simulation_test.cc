// The adaptive cap against the fake provider's hidden concurrency limit, as a
// deterministic discrete-event simulation on a SimulatedClock: 100 callers
// always want a model call; the fake provider answers 429 above K calls in
// flight, and K changes mid-run (20 -> 8 -> 30). The controller must follow
// K closely enough that throughput is within 15 % of the ideal K-limited
// throughput, with fewer than 3 % of calls answered 429.
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
#include <fstream>
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
    while (!events_.empty() && events_.begin()->first.first <= end) {
      auto node = events_.extract(events_.begin());
      clock_.SetTime(node.key().first);
      Handle(std::move(node.mapped()));
      Dispatch();
    }
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

  void Schedule(absl::Time t, Event e) { events_.emplace(std::make_pair(t, seq_++), std::move(e)); }

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
      std::optional<LlmSlots::Slot> slot = slots_.TryAcquire(&clock_);
      if (!slot) return;
      --ready_;
      ++result_.calls;
      LlmRequest request{.model = "fake", .prompt = absl::StrCat("call ", result_.calls)};
      Event done{.kind = Kind::kDone};
      done.admission = fake_.Enter(request, 1);
      done.slot.emplace(std::move(*slot));
      const absl::Time at = clock_.Now() + done.admission.latency;
      Schedule(at, std::move(done));
    }
  }

  const SimConfig config_;
  SimulatedClock clock_;
  testing::CapturingLogger log_;
  std::shared_ptr<CapBoard> board_;
  FakeLlmProvider fake_;
  std::shared_ptr<ConcurrencyController> controller_;
  LlmSlots slots_;
  std::map<std::pair<absl::Time, int64_t>, Event> events_;
  int64_t seq_ = 0;
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

}  // namespace
}  // namespace runloom
