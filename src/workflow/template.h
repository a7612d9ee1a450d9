// Templates ("{{ steps.parse.output.text }}"), references and `when:`/`until:`
// conditions: the small expression language of workflow files.
//
// A reference names a value the engine knows while a run executes:
//   inputs.<name>[.field...]           a frozen run input
//   steps.<id>.output[.field...]       a finished step's recorded output
//   steps.<id>.status | steps.<id>.error
//   run.id | run.revision | run.entry | run.rerun_from | run.feedback[.field...]
//   loop.iteration                     the current iteration (1-based) of the enclosing loop
// Fields walk object keys; a field written as digits also indexes an array.
//
// This module only parses and substitutes. The engine supplies a RefResolver
// that looks values up in its step records; a resolver error propagates
// unchanged, so the engine decides what a missing record means.
//
// Thread-safety: every function here is pure and thread-safe.
#pragma once

#include "runloom/workflow.h"

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace runloom {

// A parsed reference.
//   "steps.a.output.b.c" -> {root "steps", step_id "a", attr "output", path {"b","c"}}
//   "inputs.x.y"         -> {root "inputs", path {"x","y"}}
//   "run.revision"       -> {root "run", path {"revision"}}
//   "loop.iteration"     -> {root "loop", path {"iteration"}}
struct Ref {
  std::string root;     // inputs | steps | run | loop | args (in an agent's tool step)
  std::string step_id;  // root == "steps" only
  std::string attr;     // root == "steps" only: output | status | error
  std::vector<std::string> path;
};

// Parses and checks the shape of a reference (not whether the input or step
// exists: ValidateWorkflow does that). kInvalidArgument says which forms exist.
absl::StatusOr<Ref> ParseRef(const std::string& ref);

// Every reference written as "{{ ref }}" in any string inside `value` (object
// keys are not templated), in order of first appearance, without duplicates.
// Malformed templates (an unclosed "{{") are skipped here; ValidateWorkflow
// reports them.
std::vector<std::string> TemplateRefs(const nlohmann::json& value);

// Looks up one reference ("inputs.x", "steps.a.output.b", ...) while a run executes.
using RefResolver = std::function<absl::StatusOr<nlohmann::json>(const std::string& ref)>;

// Substitutes every template in `value`.
//  - A string that is exactly one "{{ ref }}" (whitespace around it allowed)
//    becomes the referenced JSON value, keeping its type.
//  - Otherwise each "{{ ref }}" in the string is replaced by the value's text:
//    strings as they are, everything else as compact JSON.
//  - Objects and arrays recurse; keys are left alone.
// Returns the resolver's first error unchanged, or kInvalidArgument for an
// unclosed "{{".
//
// Example:
//   ResolveTemplates({{"doc", "{{ inputs.id }}"}, {"msg", "id={{ inputs.id }}"}}, resolve)
//   -> {"doc": 42, "msg": "id=42"}      when resolve("inputs.id") yields 42
absl::StatusOr<nlohmann::json> ResolveTemplates(const nlohmann::json& value,
                                                const RefResolver& resolve);

// Parses a condition: <ref> [ (== | !=) <JSON literal> ]. The reference may
// also be written as "{{ ref }}". Condition::text keeps `text` as written.
// kInvalidArgument says what is wrong and how to write it.
//
// Example: ParseCondition(R"(steps.edit.output.verdict == "approve")")
absl::StatusOr<Condition> ParseCondition(const std::string& text);

// Evaluates `c`: a bare reference is truthy unless it is null, false, 0, "",
// [] or {}; == and != compare JSON values (1 == 1.0). Resolver errors propagate.
absl::StatusOr<bool> EvaluateCondition(const Condition& c, const RefResolver& resolve);

// True unless `v` is null, false, 0, "", an empty array or an empty object.
bool IsTruthy(const nlohmann::json& v);

// The value below `value` at `path`: object keys, and array indexes written
// as digits. nullopt when any part is absent. An empty path yields `value`.
std::optional<nlohmann::json> JsonAtPath(const nlohmann::json& value,
                                         const std::vector<std::string>& path);

}  // namespace runloom
