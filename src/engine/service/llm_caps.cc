#include "engine/service/llm_caps.h"

#include "absl/strings/str_cat.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

#include <exception>

namespace runloom::engine_internal {

absl::StatusOr<std::unique_ptr<LlmCaps>> LlmCaps::Create(LlmConcurrency* caps,
                                                         std::shared_ptr<CapBoard> board,
                                                         std::function<PoolUse()> pool_use,
                                                         const Env& env) {
  std::unique_ptr<LlmCaps> out(new LlmCaps());
  out->caps_ = caps;
  out->board_ = std::move(board);
  out->pool_use_ = std::move(pool_use);
  out->clock_ = env.clock;
  out->logger_ = env.logger;
  out->cpu_ = NewProcStatCpuLoad();
  if (env.metrics != nullptr && caps != nullptr) {
    try {
      out->cap_gauge_ = &prometheus::BuildGauge()
                             .Name("runloom_llm_concurrency_cap")
                             .Help("The cap on LLM calls in flight last decided, by provider")
                             .Register(*env.metrics);
      out->in_flight_gauge_ = &prometheus::BuildGauge()
                                   .Name("runloom_llm_calls_in_flight")
                                   .Help("LLM calls in flight in this process, by provider")
                                   .Register(*env.metrics);
      out->leader_gauge_ =
          &prometheus::BuildGauge()
               .Name("runloom_llm_concurrency_leader")
               .Help("1 while this process's controller decides the provider's cap, else 0")
               .Register(*env.metrics);
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("llm concurrency metrics: ", e.what()));
    }
  }
  return out;
}

void LlmCaps::Start() {
  runloom::MutexLock l(&mu_);
  if (caps_ == nullptr || running_ != nullptr) return;
  ControllerDeps deps{.clock = clock_, .logger = logger_, .pool = pool_use_, .cpu = cpu_.get()};
  auto* cap_gauge = cap_gauge_;
  auto* in_flight_gauge = in_flight_gauge_;
  auto* leader_gauge = leader_gauge_;
  // Every tick records the cap's history; the gauges when there is a registry.
  std::function<void(const std::string&, const CapLimits&, int)> on_tick =
      [this, cap_gauge, in_flight_gauge, leader_gauge](const std::string& provider,
                                                       const CapLimits& limits, int in_flight) {
        Record(provider, limits, clock_->Now());
        if (cap_gauge == nullptr) return;
        cap_gauge->Add({{"provider", provider}}).Set(limits.cap);
        in_flight_gauge->Add({{"provider", provider}}).Set(in_flight);
        leader_gauge->Add({{"provider", provider}}).Set(limits.leader ? 1 : 0);
      };
  running_ = caps_->Start(board_, std::move(deps), std::move(on_tick));
}

void LlmCaps::Stop() {
  std::unique_ptr<LlmConcurrency::Running> running;
  {
    runloom::MutexLock l(&mu_);
    running = std::move(running_);
  }
  running.reset();  // stops the controllers outside mu_
}

void LlmCaps::Record(const std::string& provider, const CapLimits& limits, absl::Time at) {
  runloom::MutexLock l(&history_mu_);
  std::deque<LlmCapDecision>& h = history_[provider];
  if (!h.empty() && h.back().cap == limits.cap) return;
  h.push_back(LlmCapDecision{.at = at, .cap = limits.cap, .reason = DescribeCapLimits(limits)});
  while (h.size() > static_cast<size_t>(kMaxLlmCapHistory)) h.pop_front();
}

std::vector<LlmCapInfo> LlmCaps::Snapshot() const {
  std::vector<LlmCapInfo> out;
  if (caps_ == nullptr) return out;
  for (const LlmConcurrency::CapState& c : caps_->Caps(clock_)) {
    out.push_back(LlmCapInfo{.provider = c.name, .cap = c.cap, .in_flight = c.in_flight});
  }
  runloom::MutexLock l(&history_mu_);
  for (LlmCapInfo& info : out) {
    auto it = history_.find(info.provider);
    if (it != history_.end()) info.history.assign(it->second.begin(), it->second.end());
  }
  return out;
}

}  // namespace runloom::engine_internal
