// CheckYamlBounds: refuses YAML text past LoadLimits before anything is built.
//
// yaml-cpp's YAML::Load keeps an alias as a second reference to its anchor's
// node, so the document stays small, but every walk over it (key checks,
// conversion to JSON) visits each alias's subtree again: nine levels of
// nine-fold aliases are 10^9 visits. This check reads the parser's events
// once, computing each anchor's expanded size and height as its subtree
// closes, and adds them at every alias: the expanded node count and depth
// are known after O(events) work, with memory for one number per anchor.
//
// Thread-safety: pure function, thread-safe.
#pragma once

#include "runloom/limits.h"

#include "absl/status/status.h"

#include <string>
#include "absl/strings/string_view.h"

namespace runloom::workflow_internal {

// kInvalidArgument "<source>:<line>: ... (limit max_nodes = N); ..." when the
// text is over max_bytes, or its expanded node count or depth is over the
// limits; kInvalidArgument (not a limit error) for an alias inside its own
// anchor's node (`&a [*a]`), which would make the loaded value cyclic.
// Syntax errors are left to the loader's own parse (OK here).
absl::Status CheckYamlBounds(absl::string_view text, const std::string& source,
                             const LoadLimits& limits);

}  // namespace runloom::workflow_internal
