#include "workflow/internal/names.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <array>
#include <utility>

namespace runloom {
namespace {

constexpr std::array<std::pair<TriggerRule, const char*>, 4> kTriggerRules = {{
    {TriggerRule::kAllSuccess, "all_success"},
    {TriggerRule::kAllDone, "all_done"},
    {TriggerRule::kNoneFailedMinOneSuccess, "none_failed_min_one_success"},
    {TriggerRule::kOneSuccess, "one_success"},
}};

// The classes `retry_on` accepts (ToString(ErrorClass) in runloom/run.h
// names them).
constexpr std::array<std::pair<ErrorClass, const char*>, 5> kErrorClasses = {{
    {ErrorClass::kError, "error"},
    {ErrorClass::kTimeout, "timeout"},
    {ErrorClass::kUnavailable, "unavailable"},
    {ErrorClass::kRateLimited, "rate_limited"},
    {ErrorClass::kInvalid, "invalid"},
}};

bool IsLowerOrDigit(char c) {
  return absl::ascii_islower(static_cast<unsigned char>(c)) ||
         absl::ascii_isdigit(static_cast<unsigned char>(c));
}

}  // namespace

std::string_view ToString(TriggerRule r) {
  for (const auto& [rule, name] : kTriggerRules) {
    if (rule == r) {
      return name;
    }
  }
  return "unknown";
}

namespace workflow_internal {

std::optional<TriggerRule> ParseTriggerRule(const std::string& s) {
  for (const auto& [rule, name] : kTriggerRules) {
    if (s == name) {
      return rule;
    }
  }
  return std::nullopt;
}

std::optional<ErrorClass> ParseErrorClass(const std::string& s) {
  for (const auto& [cls, name] : kErrorClasses) {
    if (s == name) {
      return cls;
    }
  }
  return std::nullopt;
}

std::string TriggerRuleNames() {
  std::vector<std::string> names;
  for (const auto& entry : kTriggerRules) {
    names.emplace_back(entry.second);
  }
  return absl::StrJoin(names, ", ");
}

std::string ErrorClassNames() {
  std::vector<std::string> names;
  for (const auto& entry : kErrorClasses) {
    names.emplace_back(entry.second);
  }
  return absl::StrJoin(names, ", ");
}

const std::vector<std::string>& InputTypes() {
  static const std::vector<std::string> kTypes = {"string",  "integer", "number",
                                                  "boolean", "object",  "array"};
  return kTypes;
}

bool IsInputType(const std::string& type) {
  for (const std::string& t : InputTypes()) {
    if (t == type) {
      return true;
    }
  }
  return false;
}

bool MatchesInputType(const std::string& type, const nlohmann::json& v) {
  if (type == "string") {
    return v.is_string();
  }
  if (type == "integer") {
    return v.is_number_integer();
  }
  if (type == "number") {
    return v.is_number();
  }
  if (type == "boolean") {
    return v.is_boolean();
  }
  if (type == "object") {
    return v.is_object();
  }
  if (type == "array") {
    return v.is_array();
  }
  return false;
}

bool IsWorkflowName(const std::string& s) {
  if (s.empty() || !absl::ascii_islower(static_cast<unsigned char>(s[0]))) {
    return false;
  }
  for (char c : s) {
    if (!IsLowerOrDigit(c) && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

bool IsStepId(const std::string& s) {
  if (s.empty() || !absl::ascii_islower(static_cast<unsigned char>(s[0]))) {
    return false;
  }
  for (char c : s) {
    if (!IsLowerOrDigit(c) && c != '_') {
      return false;
    }
  }
  return true;
}

bool IsInputName(const std::string& s) {
  if (s.empty() || absl::ascii_isdigit(static_cast<unsigned char>(s[0]))) {
    return false;
  }
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') {
      return false;
    }
  }
  return true;
}

bool IsBranchName(const std::string& s) {
  if (s.empty()) {
    return false;
  }
  for (char c : s) {
    if (!IsLowerOrDigit(c) && c != '_') {
      return false;
    }
  }
  return true;
}

std::string BranchName(const Branch& b, size_t index) {
  return b.name.empty() ? absl::StrCat("b", index) : b.name;
}

std::string DumpJson(const nlohmann::json& v) {
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool IsOutcomeWord(const std::string& s) {
  return s == "approved" || s == "completed" || s == "rejected" || s == "unresolved" ||
         s == "failed";
}

}  // namespace workflow_internal
}  // namespace runloom
