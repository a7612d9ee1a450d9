// Sample events built with the real factories, as the store would hold them
// (seq 1, 2, ... and `at` assigned). events_dump prints them and
// tests/events/validate.mjs checks them against the JSON Schemas, so a factory
// that drifts from its schema fails a test.
#pragma once

#include "runloom/run.h"

#include <vector>

namespace runloom {

// At least one event of every type in AllEventTypes(); for types with
// optional fields, one with all of them set and one with none. Deterministic:
// the same list on every call.
std::vector<Event> SampleEvents();

}  // namespace runloom
