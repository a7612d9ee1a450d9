#include "engine/rules/step_counts.h"

#include <set>
#include <string>

namespace runloom::engine_internal {

StepCounts CountSteps(const std::vector<StepRecord>& records, int64_t revision) {
  StepCounts c;
  c.revision = revision;
  std::set<std::string> seen;
  for (const StepRecord& r : records) {
    if (r.revision != revision || !seen.insert(r.path).second) continue;
    switch (r.state) {
      case StepState::kSucceeded:
        ++c.succeeded;
        break;
      case StepState::kFailed:
        ++c.failed;
        break;
      case StepState::kSkipped:
        ++c.skipped;
        break;
    }
  }
  return c;
}

}  // namespace runloom::engine_internal
