// YAML nodes as JSON values, with YAML 1.2 core-schema scalar typing, and the
// source lines of nodes. yaml-cpp keeps every scalar as text; here a plain
// (unquoted) scalar becomes null, a boolean, an integer or a float when it
// reads as one, and a quoted or block scalar is always a string.
//
// These helpers may throw yaml-cpp exceptions; the loader catches them.
#pragma once

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

#include <string>
#include <vector>

namespace runloom::workflow_internal {

// The 1-based line where `node` starts; 0 for an undefined node.
int LineOf(const YAML::Node& node);

// kInvalidArgument "<source>:<line of at>: <what>": the loader's error form.
absl::Status ErrorAt(const std::string& source, const YAML::Node& at, const std::string& what);

// The typed value of a scalar (or null) node: "42" -> 42, "'42'" -> "42",
// "true" -> true, "~" -> null, "1.5e3" -> 1500.0. ".inf" and ".nan" stay
// strings, since JSON cannot hold them.
nlohmann::json ScalarToJson(const YAML::Node& node);

// The whole subtree as JSON. REQUIRES: CheckMapKeys(node) passed.
nlohmann::json YamlToJson(const YAML::Node& node);

// Every mapping key in the subtree is a scalar and appears once. kInvalidArgument
// "<source>:<line>: ..." for the first offender.
absl::Status CheckMapKeys(const YAML::Node& node, const std::string& source);

// The line of what `path` names below `node`: a mapping key's own line, a
// sequence element's line (path parts written as digits). When part of the
// path is missing, the line of the deepest node found.
int LineAtPath(const YAML::Node& node, const std::vector<std::string>& path);

}  // namespace runloom::workflow_internal
