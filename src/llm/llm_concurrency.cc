#include "llm/llm_concurrency.h"

#include "core/check.h"

namespace runloom {

void LlmConcurrency::Add(const std::string& name, const LlmProvider* provider,
                         ConcurrencyOptions options) {
  RUNLOOM_CHECK(provider != nullptr) << "LlmConcurrency::Add: null provider for '" << name << "'";
  runloom::MutexLock l(&mu_);
  Entry& e = caps_[name];
  if (e.slots == nullptr) e.slots = std::make_unique<LlmSlots>(name, options);
  by_provider_[provider] = e.slots.get();
}

LlmSlots* LlmConcurrency::SlotsFor(const LlmProvider* provider) const {
  runloom::MutexLock l(&mu_);
  auto it = by_provider_.find(provider);
  return it == by_provider_.end() ? nullptr : it->second;
}

std::unique_ptr<LlmConcurrency::Running> LlmConcurrency::Start(
    std::shared_ptr<CapBoard> board, ControllerDeps deps,
    std::function<void(const std::string&, const CapLimits&, int)> on_tick) {
  if (board == nullptr) board = NewInProcessCapBoard(deps.clock);
  std::vector<std::shared_ptr<ConcurrencyController>> started;
  {
    runloom::MutexLock l(&mu_);
    if (running_) return nullptr;
    running_ = true;
    for (auto& [name, e] : caps_) {
      ControllerDeps d = deps;
      d.board = board;
      LlmSlots* slots = e.slots.get();
      d.in_flight = [slots] { return slots->in_flight(); };
      if (on_tick) {
        d.on_tick = [on_tick, name = name, slots](const CapLimits& limits) {
          on_tick(name, limits, slots->in_flight());
        };
      }
      e.controller = std::make_shared<ConcurrencyController>(name, slots->options(), d);
      slots->Attach(board, e.controller);
      started.push_back(e.controller);
    }
  }
  for (const auto& c : started) c->Start();
  return std::unique_ptr<Running>(new Running(this));
}

void LlmConcurrency::StopAll() {
  std::vector<std::shared_ptr<ConcurrencyController>> controllers;
  {
    runloom::MutexLock l(&mu_);
    for (auto& [name, e] : caps_) {
      if (e.controller != nullptr) controllers.push_back(std::move(e.controller));
      e.controller = nullptr;
    }
  }
  for (const auto& c : controllers) c->Stop();
  runloom::MutexLock l(&mu_);
  for (auto& [name, e] : caps_) e.slots->Detach();
  running_ = false;
}

LlmConcurrency::Running::~Running() { owner_->StopAll(); }

std::vector<LlmConcurrency::CapState> LlmConcurrency::Caps(Clock* clock) const {
  std::vector<LlmSlots*> slots;
  {
    runloom::MutexLock l(&mu_);
    for (const auto& [name, e] : caps_) slots.push_back(e.slots.get());
  }
  std::vector<CapState> out;
  for (LlmSlots* s : slots) out.push_back({s->provider(), s->Cap(clock), s->in_flight()});
  return out;
}

}  // namespace runloom
