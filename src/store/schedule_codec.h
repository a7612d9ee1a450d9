// What every backend shares of schedules (ScheduleStore,
// include/runloom/store.h): the checks of what a schedule row may hold, and
// the row codec. The engine checks the cron expression, the time zone and
// the workflow first, naming the field; these checks hold for every caller
// of the store.
//
// Thread-safety: stateless functions.
#pragma once

#include "runloom/store.h"

#include "store/record_codec.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#include <string>

namespace runloom::store_internal {

// The columns a ScheduleRecord is read from, in ScheduleFromRow's order.
#define RUNLOOM_SCHEDULE_COLUMNS                                                           \
  "id, workflow_name, cron, timezone, inputs, overlap, catch_up, paused, next_fire_at, " \
  "last_run_id, last_fired_at, created_at, updated_at"

inline constexpr size_t kMaxScheduleInputsBytes = 64 * 1024;

template <typename Row>
absl::StatusOr<ScheduleRecord> ScheduleFromRow(const Row& row) {
  ScheduleRecord s;
  s.id = row.ColumnText(0);
  s.workflow = row.ColumnText(1);
  s.cron = row.ColumnText(2);
  s.timezone = row.ColumnText(3);
  RUNLOOM_ASSIGN_OR_RETURN(s.inputs,
                           ParseJson(row.ColumnText(4), absl::StrCat("schedules.inputs of ", s.id)));
  s.overlap = row.ColumnText(5);
  s.catch_up = row.ColumnText(6);
  s.paused = row.ColumnInt(7) != 0;
  s.next_fire_at = row.ColumnTime(8);
  s.last_run_id = row.ColumnText(9);
  s.last_fired_at = row.ColumnOptionalTime(10);
  s.created_at = row.ColumnTime(11);
  s.updated_at = row.ColumnTime(12);
  return s;
}

// The checks of PutSchedule, and the inputs' JSON text: kInvalidArgument
// naming the field.
absl::StatusOr<std::string> EncodeSchedule(const ScheduleRecord& s);

}  // namespace runloom::store_internal
