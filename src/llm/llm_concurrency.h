// LlmConcurrency: the caps on model calls of every provider the llm step
// routes to, in one place: the executor-side slots (LlmSlots) the step takes
// before each call, and, while Start()'s handle lives, one
// ConcurrencyController per provider publishing to a CapBoard.
//
// The llm step owns one (NewLlmStep); the engine starts its controllers in
// each process that executes steps (LlmConcurrencyOf in steps/builtin_steps.h)
// and stops them on Stop(). Without a running controller every provider is
// held to its static cap.
//
// Thread-safety: all methods are thread-safe; Add() before the first call.
#pragma once

#include "runloom/mutex.h"

#include "llm/cap_board.h"
#include "llm/concurrency_controller.h"
#include "llm/llm_slots.h"
#include "llm/provider.h"

#include "absl/base/thread_annotations.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace runloom {

class LlmConcurrency {
 public:
  LlmConcurrency() = default;
  LlmConcurrency(const LlmConcurrency&) = delete;
  LlmConcurrency& operator=(const LlmConcurrency&) = delete;

  // Calls to `provider` take slots under the cap named `name` (one cap may
  // serve several providers' aliases). REQUIRES: provider not null.
  void Add(const std::string& name, const LlmProvider* provider, ConcurrencyOptions options)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The slots of `provider`; nullptr when it has no cap.
  LlmSlots* SlotsFor(const LlmProvider* provider) const ABSL_LOCKS_EXCLUDED(mu_);

  // Stops the controllers and sends the slots back to their static caps.
  class Running {
   public:
    ~Running();
    Running(const Running&) = delete;
    Running& operator=(const Running&) = delete;

   private:
    friend class LlmConcurrency;
    explicit Running(LlmConcurrency* owner) : owner_(owner) {}
    LlmConcurrency* owner_;
  };

  // Starts one controller per cap, publishing to `board` (nullptr = a new
  // in-process board on deps.clock); deps.board and deps.in_flight are
  // set here. nullptr when
  // already running (the first Start's handle owns them). `on_tick`, if
  // set, hears every controller's decision (metrics).
  std::unique_ptr<Running> Start(
      std::shared_ptr<CapBoard> board, ControllerDeps deps,
      std::function<void(const std::string&, const CapLimits&, int)> on_tick = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);

  struct CapState {
    std::string name;
    int cap = 0;        // in force now (published or static)
    int in_flight = 0;  // in this process
  };
  std::vector<CapState> Caps(Clock* clock) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void StopAll() ABSL_LOCKS_EXCLUDED(mu_);

  struct Entry {
    std::unique_ptr<LlmSlots> slots;
    std::shared_ptr<ConcurrencyController> controller;  // while running
  };
  mutable runloom::Mutex mu_;
  std::map<std::string, Entry> caps_ ABSL_GUARDED_BY(mu_);
  std::map<const LlmProvider*, LlmSlots*> by_provider_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace runloom
