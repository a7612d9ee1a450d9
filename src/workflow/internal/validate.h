// The validator behind ValidateWorkflow, parameterized by where lines come
// from: the loader knows the YAML line of every key, a C++-built workflow only
// StepDef::line.
#pragma once

#include "runloom/workflow.h"

#include "absl/status/status.h"

#include <functional>
#include <string>
#include <vector>

namespace runloom::workflow_internal {

// Where a problem sits: a step (nullptr for the workflow itself) and the keys
// below it, e.g. {"input", "text"} for a template in the step's config, or
// {"inputs", "format", "default"} at workflow level. Array elements are indexes
// written as digits.
struct Location {
  const StepDef* step = nullptr;
  std::vector<std::string> field;
};

// How the validator reports a problem at a location.
using FailAt = std::function<absl::Status(const Location&, const std::string&)>;

// The 1-based source line of `loc`, or 0 when unknown.
using LineLookup = std::function<int(const Location& loc)>;

// Checks `wf`; the first problem found, in document order, is returned as
// kInvalidArgument "<where>: <what is wrong>; <how to fix it>", where <where> is
// "<source_path>:<line>" when both are known, else the source path, else the
// workflow name.
absl::Status Validate(const Workflow& wf, const LineLookup& line_of);

}  // namespace runloom::workflow_internal
