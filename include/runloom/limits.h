// LoadLimits: how much untrusted text runloom agrees to load.
//
// Workflow files, `--input-file`, `--input k=<json>`, decision edits, step
// output parsed as JSON, and (later) HTTP request bodies are all parsed
// under these bounds. A parser checks them while it reads, before it builds
// anything large: an alias bomb ("billion laughs") or a 50 MB file is refused
// after a bounded amount of work, with an error naming the limit, the source
// and how to get under it; nothing is written.
//
// Thread-safety: a plain value.
#pragma once

#include <cstdint>

namespace runloom {

struct LoadLimits {
  // Size of the text, in bytes.
  int64_t max_bytes = int64_t{1} << 20;  // 1 MiB
  // Values (scalars, mappings, sequences) after expanding YAML aliases: an
  // alias counts the whole subtree it stands for, every time it is used.
  int64_t max_nodes = 100'000;
  // Nesting of mappings and sequences (an alias adds its subtree's depth).
  int max_depth = 64;
  // Steps in a workflow, counting those inside loops and parallel branches.
  int max_steps = 1'000;
};

}  // namespace runloom
