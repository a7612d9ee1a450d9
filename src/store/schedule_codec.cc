#include "store/schedule_codec.h"

#include "schedule/policy.h"

namespace runloom::store_internal {

absl::StatusOr<std::string> EncodeSchedule(const ScheduleRecord& s) {
  RUNLOOM_RETURN_IF_ERROR(Annotate(CheckScheduleId(s.id), "schedule id"));
  RUNLOOM_RETURN_IF_ERROR(RequireNonEmpty(s.workflow, "schedule workflow"));
  RUNLOOM_RETURN_IF_ERROR(RequireNonEmpty(s.cron, "schedule cron"));
  RUNLOOM_RETURN_IF_ERROR(RequireNonEmpty(s.timezone, "schedule timezone"));
  RUNLOOM_RETURN_IF_ERROR(Annotate(CheckOverlapPolicy(s.overlap), "schedule overlap"));
  RUNLOOM_RETURN_IF_ERROR(Annotate(CheckCatchUpPolicy(s.catch_up), "schedule catch_up"));
  if (!s.inputs.is_object()) {
    return absl::InvalidArgumentError("schedule inputs must be a JSON object");
  }
  RUNLOOM_ASSIGN_OR_RETURN(std::string text,
                           DumpJson(s.inputs, absl::StrCat("the inputs of schedule ", s.id)));
  if (text.size() > kMaxScheduleInputsBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the inputs of schedule ", s.id, " are ",
                                                   text.size(), " bytes, over the limit of ",
                                                   kMaxScheduleInputsBytes));
  }
  return text;
}

}  // namespace runloom::store_internal
