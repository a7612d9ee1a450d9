// A tool's arguments: the JSON Schema a client sees and the check a call
// passes, both made from the tool's ArgSpec list (tools.h).
#include "core/log.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mcp/tools.h"

#include <algorithm>

namespace runloom::mcp {
namespace {

// How much of a caller's value a refusal quotes back.
constexpr size_t kQuotedBytes = 64;

const char* TypeName(ArgType t) {
  switch (t) {
    case ArgType::kString:
      return "string";
    case ArgType::kInteger:
      return "integer";
    case ArgType::kBoolean:
      return "boolean";
    case ArgType::kObject:
      return "object";
    case ArgType::kAny:
      return "any JSON value";
  }
  return "value";
}

bool HasType(const nlohmann::json& v, ArgType t) {
  switch (t) {
    case ArgType::kString:
      return v.is_string();
    case ArgType::kInteger:
      return v.is_number_integer();
    case ArgType::kBoolean:
      return v.is_boolean();
    case ArgType::kObject:
      return v.is_object();
    case ArgType::kAny:
      return true;
  }
  return false;
}

wire::Refusal Invalid(const std::string& field, std::string message) {
  return {absl::StatusCode::kInvalidArgument, "invalid_argument", std::move(message), field};
}

std::string Names(const std::vector<ArgSpec>& specs) {
  std::vector<std::string> names;
  for (const ArgSpec& a : specs) names.push_back(a.name);
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

// The checks of one present argument beyond its type.
std::optional<wire::Refusal> CheckValue(const ArgSpec& a, const nlohmann::json& v) {
  if (a.type == ArgType::kInteger) {
    const int64_t n = v.get<int64_t>();
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return Invalid(a.name, absl::StrCat(a.name, " is too large: give ", a.min, " to ", a.max));
    }
    if (n < a.min || n > a.max) {
      return Invalid(a.name, absl::StrCat(a.name, " is ", n, ": give ", a.min, " to ", a.max));
    }
  }
  if (a.type == ArgType::kString) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s.size() > kMaxStringArgBytes) {
      return Invalid(a.name, absl::StrCat(a.name, " is ", s.size(), " bytes; at most ",
                                          kMaxStringArgBytes, " are accepted"));
    }
    if (!a.one_of.empty() && std::find(a.one_of.begin(), a.one_of.end(), s) == a.one_of.end()) {
      return Invalid(a.name, absl::StrCat(a.name, " '", s.substr(0, kQuotedBytes),
                                          "' is not one of: ", absl::StrJoin(a.one_of, ", ")));
    }
  }
  return std::nullopt;
}

}  // namespace

nlohmann::json InputSchema(const std::vector<ArgSpec>& args) {
  nlohmann::json props = nlohmann::json::object();
  nlohmann::json required = nlohmann::json::array();
  for (const ArgSpec& a : args) {
    nlohmann::json p = {{"description", a.description}};
    if (a.type != ArgType::kAny) p["type"] = TypeName(a.type);
    if (a.type == ArgType::kInteger) {
      p["minimum"] = a.min;
      if (a.max != INT64_MAX) p["maximum"] = a.max;
    }
    if (a.type == ArgType::kString) {
      p["maxLength"] = kMaxStringArgBytes;
      if (!a.one_of.empty()) p["enum"] = a.one_of;
    }
    props[a.name] = std::move(p);
    if (a.required) required.push_back(a.name);
  }
  nlohmann::json schema = {
      {"type", "object"}, {"properties", std::move(props)}, {"additionalProperties", false}};
  if (!required.empty()) schema["required"] = std::move(required);
  return schema;
}

std::optional<wire::Refusal> CheckArgs(const std::vector<ArgSpec>& specs,
                                       const nlohmann::json& args) {
  if (!args.is_object()) {
    return Invalid("",
                   absl::StrCat("arguments must be an object; this tool takes: ", Names(specs)));
  }
  for (auto it = args.begin(); it != args.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::json& value = it.value();
    auto spec = std::find_if(specs.begin(), specs.end(),
                             [&key](const ArgSpec& a) { return a.name == key; });
    if (spec == specs.end()) {
      return Invalid(key, absl::StrCat("unknown argument '", key.substr(0, kQuotedBytes),
                                       "': this tool takes: ", Names(specs)));
    }
    if (!HasType(value, spec->type)) {
      const bool an = spec->type == ArgType::kInteger || spec->type == ArgType::kObject;
      return Invalid(key, absl::StrCat(key, " must be ", an ? "an " : "a ", TypeName(spec->type)));
    }
    if (std::optional<wire::Refusal> bad = CheckValue(*spec, value)) return bad;
  }
  for (const ArgSpec& a : specs) {
    if (a.required && !args.contains(a.name)) {
      return Invalid(a.name, absl::StrCat(a.name, " is required (", a.description, ")"));
    }
  }
  return std::nullopt;
}

wire::Refusal EngineRefusal(const absl::Status& s) {
  const std::string code(wire::ErrorCode(s.code()));
  if (code == "internal") {
    Log(DefaultLogger(), LogLevel::kError, "mcp: a tool answered internal for ", s.ToString());
    return {s.code(), code, "internal error; see runloom mcp's stderr", ""};
  }
  return {s.code(), code, std::string(s.message()), ""};
}

}  // namespace runloom::mcp
