#include "store/schedule_codec.h"

#include "absl/strings/ascii.h"

namespace runloom::store_internal {
namespace {

bool IsScheduleId(const std::string& id) {
  if (id.empty() || id.size() > kMaxScheduleId) return false;
  for (char c : id) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '.' && c != ':' && c != '-') return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::string> EncodeSchedule(const ScheduleRecord& s) {
  if (!IsScheduleId(s.id)) {
    return absl::InvalidArgumentError(absl::StrCat("schedule id '", s.id.substr(0, kMaxScheduleId),
                                                   "' must be 1 to ", kMaxScheduleId,
                                                   " of A-Z a-z 0-9 _ . : -"));
  }
  RUNLOOM_RETURN_IF_ERROR(RequireNonEmpty(s.workflow, "schedule workflow"));
  RUNLOOM_RETURN_IF_ERROR(RequireNonEmpty(s.cron, "schedule cron"));
  RUNLOOM_RETURN_IF_ERROR(RequireNonEmpty(s.timezone, "schedule timezone"));
  if (s.overlap != "skip" && s.overlap != "allow" && s.overlap != "cancel") {
    return absl::InvalidArgumentError(
        absl::StrCat("schedule overlap '", s.overlap, "': allowed: skip, allow, cancel"));
  }
  if (s.catch_up != "none" && s.catch_up != "latest" && s.catch_up != "all") {
    return absl::InvalidArgumentError(
        absl::StrCat("schedule catch_up '", s.catch_up, "': allowed: none, latest, all"));
  }
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
