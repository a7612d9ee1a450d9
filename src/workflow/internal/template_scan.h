// Splits a string into literal text and "{{ ref }}" pieces; shared by the
// template resolver and the validator.
#pragma once

#include "absl/status/statusor.h"

#include <optional>
#include <string>
#include <vector>

namespace runloom::workflow_internal {

struct TemplatePiece {
  bool is_ref = false;
  std::string text;  // literal text, or the reference with surrounding blanks trimmed
};

// kInvalidArgument for an unclosed "{{" or an empty "{{ }}". A string with no
// "{{" is one literal piece (or none when empty).
absl::StatusOr<std::vector<TemplatePiece>> ScanTemplate(const std::string& s);

// The reference when `s` is exactly one "{{ ref }}" with only blanks around it.
std::optional<std::string> WholeTemplateRef(const std::string& s);

}  // namespace runloom::workflow_internal
