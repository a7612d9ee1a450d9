// PoolUse: what a store's connection pool has done since it opened, the
// measure of the LLM concurrency cap's pool limiter (src/llm/
// concurrency_controller.h). Counters only grow; a reader takes the
// difference between two readings.
#pragma once

#include "absl/time/time.h"

#include <cstdint>

namespace runloom {

struct PoolUse {
  int size = 0;                                // connections the pool may open
  int64_t acquires = 0;                        // connections handed out
  int64_t waited = 0;                          // of those, handed out only after waiting for one
  int64_t exhausted = 0;                       // acquisitions that gave up (no connection in time)
  absl::Duration wait = absl::ZeroDuration();  // time spent waiting, summed
};

}  // namespace runloom
