// CapBoard: where the concurrency controller publishes each provider's cap on
// model calls in flight, with a time-to-live, and where executors read it.
//
// A cap older than its TTL is gone: an executor that finds none falls back to
// the provider's static cap (LlmSlots), so a dead controller cannot freeze a
// low cap forever. Two implementations:
//   NewInProcessCapBoard   one process (the SQLite store): a map with
//                          deadlines on the given Clock.
//   redis::NewRedisCapBoard  several processes (`--queue redis://`): one
//                          key per provider, SET with PX (transport/redis);
//                          it also counts the calls in flight of every
//                          process against the cap (TakeSlot/ReturnSlot).
//
// Thread-safety: implementations are thread-safe.
#pragma once

#include "runloom/clock.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <memory>
#include <optional>
#include <string>

namespace runloom {

class CapBoard {
 public:
  virtual ~CapBoard() = default;
  // Publishes `cap` (>= 1) for `provider`, fresh for `ttl`.
  // kUnavailable when the board cannot be reached.
  virtual absl::Status Publish(const std::string& provider, int cap, absl::Duration ttl) = 0;
  // The fresh cap of `provider`; nullopt when none was published or it
  // expired. kUnavailable when the board cannot be reached.
  virtual absl::StatusOr<std::optional<int>> Read(const std::string& provider) = 0;
  // Where the cap lives, for log lines ("in-process", "redis 127.0.0.1:6379").
  virtual std::string Describe() const = 0;

  // Slots shared by processes: a board several processes use also counts
  // their calls in flight, so the cap bounds the sum, not each process.
  // false (the default, the in-process board): each process counts its own
  // calls (LlmSlots) and TakeSlot/ReturnSlot are kUnimplemented.
  virtual bool CountsSlots() const { return false; }
  // Takes one of `cap` slots of `provider` for a call: the holder id to
  // return it with, or nullopt when `cap` holders hold one now. The board
  // keeps a slot alive until ReturnSlot; a holder that dies without
  // returning it (a crashed process) loses it after the board's slot TTL.
  // kUnavailable when the board cannot be reached.
  virtual absl::StatusOr<std::optional<std::string>> TakeSlot(const std::string& provider, int cap);
  // Returns a slot TakeSlot gave (stops keeping it alive even on failure).
  // kUnavailable when the board cannot be reached (the slot then expires
  // after the TTL).
  virtual absl::Status ReturnSlot(const std::string& provider, const std::string& holder);
};

// REQUIRES: clock outlives the board.
std::unique_ptr<CapBoard> NewInProcessCapBoard(Clock* clock);

}  // namespace runloom
