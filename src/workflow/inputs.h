// Run inputs: checking what a caller passed against a workflow's declared
// inputs, and freezing them into the object a run stores.
//
// Thread-safety: pure functions, thread-safe.
#pragma once

#include "runloom/workflow.h"

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

#include <optional>
#include <string>

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
//  - a secret input given as a reference "secret://NAME" is stored as that
//    reference (whichever process executes a step resolves it, see
//    src/engine/secrets.h); one given as a value is checked but left out of
//    the result, so it is never stored, and no error message repeats it.
// Errors: kInvalidArgument "input 'x': <what is wrong>; <how to fix it>".
//
// Example: FreezeInputs(wf, {{"pages", "3"}}) -> {"pages": 3, "format": "txt"}
absl::StatusOr<nlohmann::json> FreezeInputs(const Workflow& wf, const nlohmann::json& given);

// Checks the inputs a schedule keeps for every run it starts (a schedule
// created by `runloom schedule create` or the API, or declared in the
// workflow's `schedules:`): an object FreezeInputs accepts, whose secret
// inputs are references ("secret://NAME"), since a value only the creating
// process knows could not reach the process that fires a tick. Errors:
// kInvalidArgument "inputs: <what>" or "inputs.<name>: <what>".
absl::Status CheckScheduleInputs(const Workflow& wf, const nlohmann::json& inputs);

// The scheme of a secret reference.
inline constexpr char kSecretScheme[] = "secret://";

// NAME when `value` is the string "secret://NAME" and NAME is a valid secret
// name ([A-Za-z_][A-Za-z0-9_]*, at most 128 characters); nullopt otherwise.
std::optional<std::string> SecretRefName(const nlohmann::json& value);

}  // namespace runloom
