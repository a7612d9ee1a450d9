// The event check on every store's write path, in test builds.
//
// runloom/events.h documents ValidateEvent as the check every stored event
// passes. In a RUNLOOM_TESTING build each backend calls CheckEventOnWrite for
// every event it is about to append, with the event exactly as it will be
// stored (after the store completed it, e.g. run.started's attempt), and
// refuses the whole write when one fails. Release builds compile neither the
// calls (they sit inside #ifdef RUNLOOM_TESTING) nor any cost.
//
// Thread-safety: thread-safe.
#pragma once

#include "absl/status/status.h"

#include <string>

namespace runloom::store_internal {

// OK, or kInternal naming the run, the type and what ValidateEvent found:
// the engine built an event its own format does not allow, which is a bug.
// `data_json` is the event's data as stored (JSON text).
absl::Status CheckEventOnWrite(const std::string& run_id, const std::string& type,
                               int schema_version, const std::string& data_json);

// The store conformance suites append synthetic events to test the store
// itself, not the event format; they turn the check off for their process.
// On by default.
void TEST_SetEventCheckOnWrite(bool on);

}  // namespace runloom::store_internal
