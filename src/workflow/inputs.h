// Run inputs: checking what a caller passed against a workflow's declared
// inputs, and freezing them into the object a run stores.
//
// Thread-safety: pure functions, thread-safe.
#pragma once

#include "runloom/workflow.h"

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace runloom {

// Checks `given` (a JSON object of name -> value; null counts as {}) against
// wf.inputs and returns the frozen inputs:
//  - every given name must be declared (the error lists the declared ones);
//  - a required input with no default must be given (a null value counts as
//    not given);
//  - values must have the declared type. Strings are converted when the CLI
//    passes them (--input k=v gives strings): "42" for an integer, "1.5" for a
//    number, "true"/"false" for a boolean, JSON text for an object or array;
//  - a value must be one of the input's enum values when it has any;
//  - declared inputs not given take their default (none: left out);
//  - secret inputs are checked but left out of the result, so they are never
//    stored.
// Errors: kInvalidArgument "input 'x': <what is wrong>; <how to fix it>".
//
// Example: FreezeInputs(wf, {{"pages", "3"}}) -> {"pages": 3, "format": "txt"}
absl::StatusOr<nlohmann::json> FreezeInputs(const Workflow& wf, const nlohmann::json& given);

}  // namespace runloom
