// Request bodies: untrusted JSON parsed with the bounded parser
// (core/bounded_json.h) and checked against the fields a route accepts, so
// malformed JSON, a wrong type and an unknown field are each a 400 that names
// the field, before anything is written.
//
// Thread-safety: pure functions.
#pragma once

#include "api/http_types.h"

#include "nlohmann/json.hpp"

#include <optional>
#include <string>
#include <vector>

namespace runloom::api {

enum class FieldType { kString, kInteger, kObject, kAny };

struct FieldSpec {
  std::string name;
  FieldType type;
  bool required = false;
};

struct ParsedBody {
  nlohmann::json value = nlohmann::json::object();
  std::optional<HttpResponse> error;  // set: answer with it, nothing else
};

// Parses `body` as one JSON object whose keys are all in `fields` with the
// declared types and with every required one present. An empty body is an
// empty object. Errors are 400 with code "bad_json" (no field),
// "unknown_field", "wrong_type" or "missing_field" (field set).
ParsedBody ParseBody(const std::string& body, const std::vector<FieldSpec>& fields);

}  // namespace runloom::api
