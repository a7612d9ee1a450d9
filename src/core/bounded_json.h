// Untrusted JSON and files, read under LoadLimits (runloom/limits.h).
//
// nlohmann::json::parse has no bound on nesting or size: a deep "[[[[..."
// exhausts the stack when the value is destroyed, a large text the memory.
// ParseJsonBounded counts values and depth through the parser's callback and
// stops at the first one past a limit, before the rest is read.
//
// Errors are kInvalidArgument naming the source, the limit and how to get
// under it, e.g. "input file 'in.json': nesting deeper than 64 levels
// (limit max_depth); flatten the value".
//
// Thread-safety: pure functions, thread-safe.
#pragma once

#include "runloom/limits.h"

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

#include <string>

namespace runloom {

// The bounds on a step's output parsed as JSON (exec stdout, a model's
// reply): up to 64 MiB and 1,000,000 values, nested at most 64 deep.
LoadLimits StepOutputLimits();

// Parses `text` (named `source` in errors) as one JSON value within `limits`
// (max_bytes, max_nodes, max_depth).
absl::StatusOr<nlohmann::json> ParseJsonBounded(absl::string_view text, absl::string_view source,
                                                const LoadLimits& limits = {});

// Reads the regular file `path` whole, refusing one over limits.max_bytes
// before reading it. `what` names it in errors ("workflow file", "input
// file"). kNotFound: no such file; kInvalidArgument: not a regular file, too
// large, or unreadable.
absl::StatusOr<std::string> ReadFileBounded(const std::string& path, absl::string_view what,
                                            const LoadLimits& limits = {});

// ReadFileBounded, then ParseJsonBounded; errors name "<what> '<path>'".
absl::StatusOr<nlohmann::json> ReadJsonFileBounded(const std::string& path, absl::string_view what,
                                                   const LoadLimits& limits = {});

// "<source>: <what> (limit <name> = <value>); <fix>" as kInvalidArgument: the
// one wording every bounded reader uses.
absl::Status LimitError(absl::string_view source, absl::string_view what, absl::string_view limit,
                        int64_t value, absl::string_view fix);
// True for an error LimitError made (told apart from a syntax error by a
// status payload, not by its text).
bool IsLimitError(const absl::Status& status);

}  // namespace runloom
