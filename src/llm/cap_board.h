// CapBoard: where the processes of a deployment meet over each provider's
// cap on model calls in flight (reference 002, "Layer 4": "Sense and Decide
// communicate strictly through Redis"). Three things live on it:
//   Sense   every process's controller appends a report of its calls, its
//           store's pool and its CPU each tick (Report); the controller that
//           decides reads them all (ReadReports).
//   Decide  one controller per provider decides: it holds a lease on the
//           board (Lead) that expires when it stops renewing it, so another
//           process takes over; only the holder can publish (Publish is
//           fenced by the lease).
//   Actuate the cap, with a time-to-live. A cap older than its TTL is gone:
//           an executor that finds none falls back to the provider's static
//           cap (LlmSlots), so a dead controller cannot freeze a low cap
//           forever. Any process may lower it at once on a 429 (Cut); only
//           the leader raises it.
// Two implementations:
//   NewInProcessCapBoard   one process (the SQLite store): maps with
//                          deadlines on the given Clock.
//   redis::NewRedisCapBoard  several processes (`--queue redis://`): keys
//                          and a stream per provider (llm/redis_cap_board.h);
//                          it also counts the calls in flight of every
//                          process against the cap (TakeSlot/ReturnSlot).
//
// Thread-safety: implementations are thread-safe.
#pragma once

#include "runloom/clock.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace runloom {

// One process's view of one provider over one controller tick. Counts are
// over the window since its last report; in_flight and cpu_busy are at the
// window's end. Every field is bounded when read back (a board's contents
// are not trusted).
struct SenseReport {
  std::string reporter;  // the reporting controller's id (host:pid:seq)
  int64_t ok = 0;
  int64_t rate_limited = 0;
  int64_t errors = 0;
  bool waited = false;  // a call found every slot taken (there is demand)
  absl::Duration latency_sum = absl::ZeroDuration();  // of the ok calls
  std::optional<int64_t> limit_requests;              // newest x-ratelimit-limit-requests
  std::optional<int> cut;                             // this process cut the cap to this at a 429
  std::optional<int> cut_from;                        // the cap in force at that 429
  int in_flight = 0;                                  // calls in flight in the process now
  // The process's store pool over the window (pool_size 0 = no pool).
  int pool_size = 0;
  int64_t pool_acquires = 0;
  int64_t pool_waited = 0;
  int64_t pool_exhausted = 0;
  absl::Duration pool_wait = absl::ZeroDuration();
  std::optional<double> cpu_busy;  // the machine's CPUs, 0..1
};

class CapBoard {
 public:
  virtual ~CapBoard() = default;

  // ---- Decide: one controller per provider ----
  // Takes, or keeps, the lease on deciding `provider`'s cap for `candidate`
  // for `lease`. Returns who holds it now: `candidate` when it won or kept
  // it; another holder while that one's lease is unexpired.
  // kUnavailable when the board cannot be reached.
  virtual absl::StatusOr<std::string> Lead(const std::string& provider,
                                           const std::string& candidate, absl::Duration lease) = 0;
  // Publishes `cap` (>= 1) for `provider`, fresh for `ttl`, if `leader`
  // holds the lease: false, with nothing written, when it does not.
  // kUnavailable when the board cannot be reached.
  virtual absl::StatusOr<bool> Publish(const std::string& provider, const std::string& leader,
                                       int cap, absl::Duration ttl) = 0;
  // Lowers `provider`'s cap to `cap` at once, fresh for `ttl` (a 429 in any
  // process); never raises a fresh cap. kUnavailable as Publish.
  virtual absl::Status Cut(const std::string& provider, int cap, absl::Duration ttl) = 0;
  // The fresh cap of `provider`; nullopt when none was published or it
  // expired. kUnavailable when the board cannot be reached; kDataLoss when
  // what it holds is not a cap.
  virtual absl::StatusOr<std::optional<int>> Read(const std::string& provider) = 0;

  // ---- Sense: every process reports ----
  // Appends `report`; returns its position (an opaque, increasing id).
  // The board keeps the last few thousand reports of each provider.
  virtual absl::StatusOr<std::string> Report(const std::string& provider,
                                             const SenseReport& report) = 0;
  // The reports after position `*after` ("" = from the oldest kept), oldest
  // first, at most 1,000; `*after` moves to the last one returned. A report
  // that does not decode is skipped and counted in `*malformed` (if set).
  virtual absl::StatusOr<std::vector<SenseReport>> ReadReports(const std::string& provider,
                                                               std::string* after,
                                                               int* malformed = nullptr) = 0;

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

// A controller id unique among the processes of a deployment and the
// controllers of this process: "host:pid:seq".
std::string NewControllerId();

}  // namespace runloom
