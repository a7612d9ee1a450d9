// The first bytes of a reply or an output, for error messages: one length
// and one form for every step kind.
#pragma once

#include "absl/strings/str_cat.h"

#include <cstddef>
#include <string>

namespace runloom::steps_internal {

inline constexpr size_t kSnippetBytes = 200;

// `text` itself when short, else its first kSnippetBytes bytes and "...".
inline std::string Snippet(const std::string& text) {
  return text.size() <= kSnippetBytes ? text : absl::StrCat(text.substr(0, kSnippetBytes), "...");
}

// Like Snippet, and says how long the whole text was.
inline std::string SnippetWithSize(const std::string& text) {
  if (text.size() <= kSnippetBytes) return text;
  return absl::StrCat(text.substr(0, kSnippetBytes), "... (", text.size(), " bytes)");
}

}  // namespace runloom::steps_internal
