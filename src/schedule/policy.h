// A schedule's id and its overlap and catch-up policies (issue 23): what
// each accepts, checked the same way wherever a schedule is written
// (`runloom schedule create`, POST /api/v1/schedules, a workflow's
// `schedules:`, the store).
// What each policy does is src/engine/schedules.h's business.
//
// Thread-safety: pure functions, thread-safe.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

#include <cstddef>

namespace runloom {

// The longest schedule id, in bytes.
inline constexpr size_t kMaxScheduleIdBytes = 128;

// kInvalidArgument "'<id>': 1 to 128 of A-Z a-z 0-9 _ . : -" (the id cut
// to 128 bytes) unless `id` is a schedule id.
absl::Status CheckScheduleId(absl::string_view id);

// kInvalidArgument "'<value>'; allowed: skip, allow, cancel" unless `value`
// is an overlap policy (what a tick does while the previous run is
// unfinished).
absl::Status CheckOverlapPolicy(absl::string_view value);

// kInvalidArgument "'<value>'; allowed: none, latest, all" unless `value` is
// a catch-up policy (which ticks missed while nothing fired still fire).
absl::Status CheckCatchUpPolicy(absl::string_view value);

}  // namespace runloom
