// The field table behind ValidateEvent: one row per event type, listing its
// schema_version and its data fields. It is the C++ twin of
// schemas/events/<type>.schema.json; events_test compares the two.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace runloom::events_internal {

enum class FieldKind {
  kString,   // JSON string, at least min_length characters
  kDigest,   // JSON string "sha256:" + 64 lower-case hex digits
  kInteger,  // JSON integer (not 1.0), at least `minimum` when set
  kBoolean,
};

struct FieldSpec {
  std::string name;
  FieldKind kind = FieldKind::kString;
  bool required = true;
  size_t min_length = 0;            // kString
  std::optional<int64_t> minimum;   // kInteger
  std::vector<std::string> one_of;  // kString: the allowed values, when not empty
};

struct EventSpec {
  std::string type;
  int schema_version = 1;
  std::vector<FieldSpec> fields;
};

// Every type, in AllEventTypes() order.
const std::vector<EventSpec>& EventSpecs();

// The row of `type`, or nullptr.
const EventSpec* FindEventSpec(std::string_view type);

}  // namespace runloom::events_internal
