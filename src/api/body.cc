#include "api/body.h"

#include "api/errors.h"
#include "core/bounded_json.h"

#include "absl/strings/str_cat.h"

namespace runloom::api {
namespace {

// Bodies are capped by the server (ServerOptions::max_body_bytes); these
// bound what that many bytes may expand to.
constexpr int64_t kMaxBodyNodes = 100'000;
constexpr int kMaxBodyDepth = 64;

bool HasType(const nlohmann::json& v, FieldType t) {
  switch (t) {
    case FieldType::kString:
      return v.is_string();
    case FieldType::kInteger:
      return v.is_number_integer();
    case FieldType::kObject:
      return v.is_object();
    case FieldType::kAny:
      return true;
  }
  return false;
}

const char* TypeName(FieldType t) {
  switch (t) {
    case FieldType::kString:
      return "a string";
    case FieldType::kInteger:
      return "an integer";
    case FieldType::kObject:
      return "an object";
    case FieldType::kAny:
      return "any JSON value";
  }
  return "";
}

}  // namespace

ParsedBody ParseBody(const std::string& body, const std::vector<FieldSpec>& fields) {
  ParsedBody out;
  if (!body.empty()) {
    LoadLimits limits;
    limits.max_bytes = static_cast<int64_t>(body.size());
    limits.max_nodes = kMaxBodyNodes;
    limits.max_depth = kMaxBodyDepth;
    absl::StatusOr<nlohmann::json> parsed = ParseJsonBounded(body, "request body", limits);
    if (!parsed.ok()) {
      out.error = ErrorResponse(400, "bad_json", std::string(parsed.status().message()));
      return out;
    }
    out.value = *std::move(parsed);
  }
  if (!out.value.is_object()) {
    out.error = ErrorResponse(400, "bad_json", "the request body must be a JSON object");
    return out;
  }
  for (const auto& [key, v] : out.value.items()) {
    const FieldSpec* spec = nullptr;
    for (const FieldSpec& f : fields) {
      if (f.name == key) spec = &f;
    }
    if (spec == nullptr) {
      out.error =
          ErrorResponse(400, "unknown_field",
                        absl::StrCat("unknown field '", key.substr(0, 64), "'"), key.substr(0, 64));
      return out;
    }
    if (!HasType(v, spec->type)) {
      out.error = ErrorResponse(
          400, "wrong_type", absl::StrCat("field '", key, "' must be ", TypeName(spec->type)), key);
      return out;
    }
  }
  for (const FieldSpec& f : fields) {
    if (f.required && !out.value.contains(f.name)) {
      out.error = ErrorResponse(400, "missing_field",
                                absl::StrCat("field '", f.name, "' is required"), f.name);
      return out;
    }
  }
  return out;
}

}  // namespace runloom::api
