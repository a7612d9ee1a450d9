#include "engine/rules/trigger_rules.h"

#include "absl/strings/str_cat.h"

namespace runloom::engine_internal {

TriggerDecision EvaluateTrigger(TriggerRule rule, const std::vector<Upstream>& upstream) {
  int succeeded = 0, failed = 0;
  std::string blocker;
  for (const Upstream& u : upstream) {
    if (u.state == StepState::kSucceeded) ++succeeded;
    if (u.state == StepState::kFailed) ++failed;
    if (u.state != StepState::kSucceeded && blocker.empty()) {
      blocker = absl::StrCat(u.step_id, " ", std::string(ToString(u.state)));
    }
  }
  const size_t nd = upstream.size();
  TriggerDecision d;
  switch (rule) {
    case TriggerRule::kAllSuccess:
      d.run = succeeded == static_cast<int>(nd);
      d.skip_reason = absl::StrCat("trigger all_success: upstream ", blocker);
      break;
    case TriggerRule::kAllDone:
      break;
    case TriggerRule::kNoneFailedMinOneSuccess:
      d.run = failed == 0 && (nd == 0 || succeeded > 0);
      d.skip_reason = failed > 0
                          ? absl::StrCat("trigger none_failed_min_one_success: upstream ", blocker)
                          : "trigger none_failed_min_one_success: no upstream succeeded";
      break;
    case TriggerRule::kOneSuccess:
      d.run = nd == 0 || succeeded > 0;
      d.skip_reason = "trigger one_success: no upstream succeeded";
      break;
  }
  return d;
}

}  // namespace runloom::engine_internal
