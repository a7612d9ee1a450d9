#include "workflow/internal/yaml_json.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include <cstdint>
#include <optional>
#include <set>

namespace runloom::workflow_internal {
namespace {

constexpr char kPlainTag[] = "?";
constexpr char kNonPlainTag[] = "!";
constexpr char kStrTag[] = "tag:yaml.org,2002:str";
constexpr int kHexBase = 16;
constexpr int kOctalBase = 8;

bool AllDigits(const std::string& s, size_t from, int base) {
  if (from >= s.size()) {
    return false;
  }
  for (size_t i = from; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const bool ok = base == kHexBase ? absl::ascii_isxdigit(c) : (c >= '0' && c < '0' + base);
    if (!ok) {
      return false;
    }
  }
  return true;
}

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? with a '.' or an exponent.
bool IsCoreFloat(const std::string& s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) {
    ++i;
  }
  size_t digits = 0;
  bool marker = false;
  while (i < s.size() && absl::ascii_isdigit(static_cast<unsigned char>(s[i]))) {
    ++i;
    ++digits;
  }
  if (i < s.size() && s[i] == '.') {
    marker = true;
    ++i;
    while (i < s.size() && absl::ascii_isdigit(static_cast<unsigned char>(s[i]))) {
      ++i;
      ++digits;
    }
  }
  if (digits == 0) {
    return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    marker = true;
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) {
      ++i;
    }
    if (!AllDigits(s, i, 10)) {
      return false;
    }
    i = s.size();
  }
  return marker && i == s.size();
}

// REQUIRES: `digits` holds only 0-7. nullopt on overflow.
std::optional<uint64_t> ParseOctal(const std::string& digits) {
  constexpr int kBitsPerDigit = 3;
  uint64_t u = 0;
  for (char c : digits) {
    if (u > (UINT64_MAX >> kBitsPerDigit)) {
      return std::nullopt;
    }
    u = u * kOctalBase + static_cast<uint64_t>(c - '0');
  }
  return u;
}

nlohmann::json ResolvePlain(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") {
    return nullptr;
  }
  if (s == "true" || s == "True" || s == "TRUE") {
    return true;
  }
  if (s == "false" || s == "False" || s == "FALSE") {
    return false;
  }
  const size_t sign = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (AllDigits(s, sign, 10)) {
    int64_t i = 0;
    if (absl::SimpleAtoi(s, &i)) {
      return i;
    }
    uint64_t u = 0;
    if (absl::SimpleAtoi(s, &u)) {
      return u;
    }
    double d = 0;
    if (absl::SimpleAtod(s, &d)) {
      return d;
    }
    return s;
  }
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o') &&
      AllDigits(s, 2, s[1] == 'x' ? kHexBase : kOctalBase)) {
    uint64_t u = 0;
    bool ok = false;
    if (s[1] == 'x') {
      ok = absl::SimpleHexAtoi(s.substr(2), &u);
    } else if (std::optional<uint64_t> octal = ParseOctal(s.substr(2))) {
      u = *octal;
      ok = true;
    }
    if (ok) {
      return u <= static_cast<uint64_t>(INT64_MAX) ? nlohmann::json(static_cast<int64_t>(u))
                                                   : nlohmann::json(u);
    }
    return s;
  }
  if (IsCoreFloat(s)) {
    double d = 0;
    if (absl::SimpleAtod(s, &d)) {
      return d;
    }
  }
  return s;
}

}  // namespace

int LineOf(const YAML::Node& node) {
  if (!node.IsDefined()) {
    return 0;
  }
  return node.Mark().line + 1;
}

absl::Status ErrorAt(const std::string& source, const YAML::Node& at, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ":", LineOf(at), ": ", what));
}

nlohmann::json ScalarToJson(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) {
    return nullptr;
  }
  const std::string& tag = node.Tag();
  if (tag == kNonPlainTag || tag == kStrTag) {
    return node.Scalar();
  }
  if (tag == kPlainTag || tag.empty()) {
    return ResolvePlain(node.Scalar());
  }
  // Other explicit tags (!!int, !!bool, custom): type the text as if plain.
  return ResolvePlain(node.Scalar());
}

nlohmann::json YamlToJson(const YAML::Node& node) {
  if (node.IsMap()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto it = node.begin(); it != node.end(); ++it) {
      out[it->first.Scalar()] = YamlToJson(it->second);
    }
    return out;
  }
  if (node.IsSequence()) {
    nlohmann::json out = nlohmann::json::array();
    for (auto it = node.begin(); it != node.end(); ++it) {
      out.push_back(YamlToJson(*it));
    }
    return out;
  }
  return ScalarToJson(node);
}

absl::Status CheckMapKeys(const YAML::Node& node, const std::string& source) {
  if (node.IsMap()) {
    std::set<std::string> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!it->first.IsScalar()) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ":", LineOf(it->first),
                         ": a mapping key must be plain text; write the key as a word"));
      }
      if (!seen.insert(it->first.Scalar()).second) {
        return absl::InvalidArgumentError(absl::StrCat(source, ":", LineOf(it->first),
                                                       ": duplicate key '", it->first.Scalar(),
                                                       "'; keep only one of them"));
      }
      absl::Status s = CheckMapKeys(it->second, source);
      if (!s.ok()) {
        return s;
      }
    }
  } else if (node.IsSequence()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      absl::Status s = CheckMapKeys(*it, source);
      if (!s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

int LineAtPath(const YAML::Node& node, const std::vector<std::string>& path) {
  YAML::Node cur;
  cur.reset(node);
  int line = LineOf(node);
  for (const std::string& part : path) {
    bool found = false;
    if (cur.IsMap()) {
      for (auto it = cur.begin(); it != cur.end(); ++it) {
        if (it->first.IsScalar() && it->first.Scalar() == part) {
          line = LineOf(it->first);
          // reset() rebinds; operator= would overwrite the document's node.
          cur.reset(it->second);
          found = true;
          break;
        }
      }
    } else if (cur.IsSequence()) {
      size_t index = 0;
      if (absl::SimpleAtoi(part, &index) && index < cur.size()) {
        const YAML::Node& seq = cur;
        const YAML::Node element = seq[index];
        cur.reset(element);
        line = LineOf(cur);
        found = true;
      }
    }
    if (!found) {
      break;
    }
  }
  return line;
}

}  // namespace runloom::workflow_internal
