// Step counts: how many of a run's steps succeeded, failed or were skipped
// in one revision, computed from its step records as distinct (revision,
// path) pairs, never kept as counters that each attempt increments. So an
// at-least-once redelivery, a repeated execution after a crash, or a write
// retried after a lost reply cannot count a step twice (reference 002:
// "step counts are computed as distinct terminal steps, not increments").
// Nested steps count each: a loop's iterations ("refine[2]/write") and a
// parallel's branches ("fanout/security/sec"), and so do the containers.
// A pure function; the wire form (`step_counts`) and `runloom status` show it.
//
// Thread-safety: stateless.
#pragma once

#include "runloom/run.h"

#include <cstdint>
#include <vector>

namespace runloom::engine_internal {

struct StepCounts {
  int64_t revision = 1;
  int succeeded = 0;
  int failed = 0;
  int skipped = 0;
  int total() const { return succeeded + failed + skipped; }
};

// The counts of `revision` among `records` (records of other revisions are
// ignored; of two records with one path, the first is counted).
StepCounts CountSteps(const std::vector<StepRecord>& records, int64_t revision);

}  // namespace runloom::engine_internal
