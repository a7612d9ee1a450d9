// RandomSource: the engine's one random generator, EngineOptions::env.random
// when given (a test seeds it), else a generator seeded from the operating
// system. absl generators are not thread-safe, so every draw happens under
// this object's lock (the "engine's own lock" of runloom/env.h).
//
// Thread-safety: Draw() may be called from any thread.
#pragma once

#include "runloom/mutex.h"

#include "absl/base/thread_annotations.h"
#include "absl/random/bit_gen_ref.h"
#include "absl/random/random.h"

#include <optional>
#include <utility>

namespace runloom::engine_internal {

class RandomSource {
 public:
  // `given`, when set, must outlive this object.
  explicit RandomSource(std::optional<absl::BitGenRef> given) : given_(given) {}
  RandomSource(const RandomSource&) = delete;
  RandomSource& operator=(const RandomSource&) = delete;

  // Returns fn(gen) for the generator, called under the lock; `fn` must not
  // block or call back into the engine.
  // Example: std::string id = random.Draw([&](absl::BitGenRef g) { return NewRunId(now, g); });
  template <typename Fn>
  auto Draw(Fn&& fn) ABSL_LOCKS_EXCLUDED(mu_) {
    runloom::MutexLock l(&mu_);
    return std::forward<Fn>(fn)(given_.has_value() ? *given_ : absl::BitGenRef(own_));
  }

 private:
  runloom::Mutex mu_;
  // The generator a given_ refers to is used only under mu_ as well.
  const std::optional<absl::BitGenRef> given_;
  absl::BitGen own_ ABSL_GUARDED_BY(mu_);
};

}  // namespace runloom::engine_internal
