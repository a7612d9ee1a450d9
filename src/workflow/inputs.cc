#include "workflow/inputs.h"

#include "core/bounded_json.h"
#include "core/status_macros.h"
#include "workflow/internal/names.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace runloom {
namespace {

// Doubles hold every integer up to 2^53 exactly.
constexpr double kMaxExactInteger = 9007199254740992.0;

absl::Status InputError(const std::string& name, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("input '", name, "': ", what));
}

// A string given for a non-string input (from the CLI) becomes the typed value.
std::optional<nlohmann::json> ConvertString(const std::string& type, const std::string& raw) {
  const std::string s(absl::StripAsciiWhitespace(absl::string_view(raw)));
  if (type == "integer") {
    int64_t i = 0;
    if (absl::SimpleAtoi(s, &i)) {
      return nlohmann::json(i);
    }
    return std::nullopt;
  }
  if (type == "number") {
    double d = 0;
    if (!s.empty() && absl::SimpleAtod(s, &d) && std::isfinite(d)) {
      int64_t i = 0;
      if (absl::SimpleAtoi(s, &i)) {
        return nlohmann::json(i);
      }
      return nlohmann::json(d);
    }
    return std::nullopt;
  }
  if (type == "boolean") {
    if (s == "true") {
      return nlohmann::json(true);
    }
    if (s == "false") {
      return nlohmann::json(false);
    }
    return std::nullopt;
  }
  return std::nullopt;
}

std::string Example(const std::string& type) {
  if (type == "integer") {
    return "a whole number such as 42";
  }
  if (type == "number") {
    return "a number such as 1.5";
  }
  if (type == "boolean") {
    return "true or false";
  }
  if (type == "object") {
    return "a JSON object such as {\"k\": 1}";
  }
  if (type == "array") {
    return "a JSON array such as [1, 2]";
  }
  return "text";
}

absl::StatusOr<nlohmann::json> CheckValue(const InputDef& in, const nlohmann::json& value) {
  nlohmann::json v = value;
  if (!workflow_internal::MatchesInputType(in.type, v)) {
    std::optional<nlohmann::json> converted;
    if (v.is_string()) {
      if (in.type == "object" || in.type == "array") {
        // JSON text from a CLI or a form, parsed under the load limits; one
        // past them is refused with the limit named.
        absl::StatusOr<nlohmann::json> parsed = ParseJsonBounded(
            v.get_ref<const std::string&>(), absl::StrCat("input '", in.name, "'"));
        if (!parsed.ok() && IsLimitError(parsed.status())) return parsed.status();
        if (parsed.ok() && (in.type == "object" ? parsed->is_object() : parsed->is_array())) {
          converted = *std::move(parsed);
        }
      } else {
        converted = ConvertString(in.type, v.get<std::string>());
      }
    } else if (in.type == "integer" && v.is_number_float()) {
      // 3.0 from a JSON client is the integer 3; 3.5 is not.
      const double d = v.get<double>();
      if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) <= kMaxExactInteger) {
        converted = nlohmann::json(static_cast<int64_t>(d));
      }
    }
    if (!converted) {
      return InputError(in.name, absl::StrCat("got ", workflow_internal::DumpJson(v), ", expected ",
                                              in.type, "; pass ", Example(in.type)));
    }
    v = std::move(*converted);
  }
  if (!in.allowed.empty() &&
      std::find(in.allowed.begin(), in.allowed.end(), v) == in.allowed.end()) {
    std::vector<std::string> allowed;
    for (const nlohmann::json& a : in.allowed) {
      allowed.push_back(a.is_string() ? a.get<std::string>() : workflow_internal::DumpJson(a));
    }
    return InputError(
        in.name, absl::StrCat(v.is_string() ? v.get<std::string>() : workflow_internal::DumpJson(v),
                              " is not allowed; use one of ", absl::StrJoin(allowed, ", ")));
  }
  return v;
}

}  // namespace

absl::StatusOr<nlohmann::json> FreezeInputs(const Workflow& wf, const nlohmann::json& given) {
  if (!given.is_null() && !given.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "inputs must be a JSON object of name -> value, got ", workflow_internal::DumpJson(given)));
  }
  std::vector<std::string> declared;
  for (const InputDef& in : wf.inputs) {
    declared.push_back(in.name);
  }
  if (given.is_object()) {
    for (auto it = given.begin(); it != given.end(); ++it) {
      if (std::find(declared.begin(), declared.end(), it.key()) == declared.end()) {
        return InputError(
            it.key(), absl::StrCat("not declared by workflow '", wf.name, "'; ",
                                   declared.empty() ? "it declares no inputs"
                                                    : absl::StrCat("declared inputs: ",
                                                                   absl::StrJoin(declared, ", "))));
      }
    }
  }
  nlohmann::json frozen = nlohmann::json::object();
  for (const InputDef& in : wf.inputs) {
    nlohmann::json value;
    if (given.is_object() && given.contains(in.name) && !given.at(in.name).is_null()) {
      value = given.at(in.name);
    } else if (in.default_value) {
      value = *in.default_value;
    } else if (in.required) {
      return InputError(in.name, "required but not given; pass a value for it");
    } else {
      continue;
    }
    if (in.secret) {
      // A reference is stored (any worker resolves it); a value is checked
      // but never stored, and no error repeats it.
      if (value.is_string() &&
          absl::StartsWith(value.get_ref<const std::string&>(), kSecretScheme)) {
        if (!SecretRefName(value).has_value()) {
          return InputError(in.name,
                            "a secret reference is secret://NAME with NAME made of "
                            "letters, digits and _ (not starting with a digit)");
        }
        frozen[in.name] = value;
        continue;
      }
      if (!CheckValue(in, value).ok()) {
        return InputError(in.name,
                          absl::StrCat("the secret value is not a valid ", in.type, "; pass ",
                                       Example(in.type), ", or a reference secret://NAME"));
      }
      continue;
    }
    RUNLOOM_ASSIGN_OR_RETURN(frozen[in.name], CheckValue(in, value));
  }
  return frozen;
}

std::optional<std::string> SecretRefName(const nlohmann::json& value) {
  if (!value.is_string()) return std::nullopt;
  const std::string& s = value.get_ref<const std::string&>();
  if (!absl::StartsWith(s, kSecretScheme)) return std::nullopt;
  const std::string name = s.substr(sizeof(kSecretScheme) - 1);
  constexpr size_t kMaxName = 128;
  if (name.empty() || name.size() > kMaxName || absl::ascii_isdigit(name[0])) return std::nullopt;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') return std::nullopt;
  }
  return name;
}

absl::Status CheckScheduleInputs(const Workflow& wf, const nlohmann::json& inputs) {
  if (!inputs.is_object()) return absl::InvalidArgumentError("inputs: must be a JSON object");
  for (const InputDef& in : wf.inputs) {
    if (in.secret && inputs.contains(in.name) && !SecretRefName(inputs[in.name]).has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("inputs.", in.name,
                       ": is secret: a schedule keeps its inputs, so give a reference "
                       "secret://NAME, resolved where each run executes"));
    }
  }
  absl::StatusOr<nlohmann::json> frozen = FreezeInputs(wf, inputs);
  if (!frozen.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("inputs: ", frozen.status().message()));
  }
  return absl::OkStatus();
}

}  // namespace runloom
