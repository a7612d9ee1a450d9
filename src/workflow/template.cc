#include "workflow/template.h"

#include "core/status_macros.h"
#include "workflow/internal/names.h"
#include "workflow/internal/template_scan.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include <set>
#include <utility>

namespace runloom {
namespace workflow_internal {

namespace {
constexpr char kOpen[] = "{{";
constexpr char kClose[] = "}}";
constexpr size_t kDelimLen = 2;

std::string Trim(const std::string& s) {
  return std::string(absl::StripAsciiWhitespace(absl::string_view(s)));
}
}  // namespace

absl::StatusOr<std::vector<TemplatePiece>> ScanTemplate(const std::string& s) {
  std::vector<TemplatePiece> pieces;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t open = s.find(kOpen, pos);
    if (open == std::string::npos) {
      pieces.push_back({false, s.substr(pos)});
      break;
    }
    if (open > pos) {
      pieces.push_back({false, s.substr(pos, open - pos)});
    }
    const size_t close = s.find(kClose, open + kDelimLen);
    if (close == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("unclosed '{{' in \"", s, "\"; close it with '}}'"));
    }
    std::string ref = Trim(s.substr(open + kDelimLen, close - open - kDelimLen));
    if (ref.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "empty template '{{ }}' in \"", s, "\"; write a reference such as {{ inputs.name }}"));
    }
    pieces.push_back({true, std::move(ref)});
    pos = close + kDelimLen;
  }
  return pieces;
}

std::optional<std::string> WholeTemplateRef(const std::string& s) {
  absl::StatusOr<std::vector<TemplatePiece>> pieces = ScanTemplate(Trim(s));
  if (!pieces.ok() || pieces->size() != 1 || !(*pieces)[0].is_ref) {
    return std::nullopt;
  }
  return (*pieces)[0].text;
}

}  // namespace workflow_internal

namespace {

using workflow_internal::ScanTemplate;
using workflow_internal::TemplatePiece;

constexpr const char* kRefForms =
    "write inputs.<name>[.field], steps.<id>.output[.field], steps.<id>.status, "
    "steps.<id>.error, run.id, run.revision, run.entry, run.feedback[.field], "
    "run.rerun_from, loop.iteration or (in a tool's step) args[.field]";

bool IsRefComponent(const std::string& c) {
  if (c.empty()) {
    return false;
  }
  for (char ch : c) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '-') {
      return false;
    }
  }
  return true;
}

absl::Status BadRef(const std::string& ref, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("bad reference '", ref, "': ", why, "; ", kRefForms));
}

void CollectRefs(const nlohmann::json& value, std::vector<std::string>& out,
                 std::set<std::string>& seen) {
  if (value.is_string()) {
    absl::StatusOr<std::vector<TemplatePiece>> pieces = ScanTemplate(value.get<std::string>());
    if (!pieces.ok()) {
      return;
    }
    for (const TemplatePiece& p : *pieces) {
      if (p.is_ref && seen.insert(p.text).second) {
        out.push_back(p.text);
      }
    }
    return;
  }
  if (value.is_object() || value.is_array()) {
    for (const auto& item : value) {
      CollectRefs(item, out, seen);
    }
  }
}

absl::StatusOr<nlohmann::json> ResolveString(const std::string& s, const RefResolver& resolve) {
  if (std::optional<std::string> whole = workflow_internal::WholeTemplateRef(s)) {
    return resolve(*whole);
  }
  RUNLOOM_ASSIGN_OR_RETURN(std::vector<TemplatePiece> pieces, ScanTemplate(s));
  std::string out;
  for (const TemplatePiece& p : pieces) {
    if (!p.is_ref) {
      out += p.text;
      continue;
    }
    RUNLOOM_ASSIGN_OR_RETURN(nlohmann::json v, resolve(p.text));
    if (v.is_string()) {
      out += v.get<std::string>();
    } else {
      out += workflow_internal::DumpJson(v);
    }
  }
  return nlohmann::json(std::move(out));
}

// Literal after the operator: any JSON value. Bare words get a hint to quote them.
absl::StatusOr<nlohmann::json> ParseLiteral(const std::string& text, const std::string& literal) {
  nlohmann::json v = nlohmann::json::parse(literal, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "condition '", text, "': '", literal,
        "' is not a JSON literal; write true, false, null, a number, or a string in double "
        "quotes such as \"approve\""));
  }
  return v;
}

}  // namespace

absl::StatusOr<Ref> ParseRef(const std::string& ref) {
  std::vector<std::string> parts = absl::StrSplit(ref, '.');
  for (const std::string& p : parts) {
    if (!IsRefComponent(p)) {
      return BadRef(ref, "each dot-separated part must be non-empty letters, digits, '_' or '-'");
    }
  }
  Ref out;
  out.root = parts[0];
  if (out.root == "inputs") {
    if (parts.size() < 2) {
      return BadRef(ref, "name the input");
    }
    out.path.assign(parts.begin() + 1, parts.end());
    return out;
  }
  if (out.root == "steps") {
    if (parts.size() < 3) {
      return BadRef(ref, "name the step and what to read from it");
    }
    out.step_id = parts[1];
    out.attr = parts[2];
    out.path.assign(parts.begin() + 3, parts.end());
    if (out.attr != "output" && out.attr != "status" && out.attr != "error") {
      return BadRef(ref, absl::StrCat("a step has output, status and error, not '", out.attr, "'"));
    }
    if (out.attr != "output" && !out.path.empty()) {
      return BadRef(ref, absl::StrCat("steps.<id>.", out.attr, " has no fields"));
    }
    return out;
  }
  if (out.root == "run") {
    out.path.assign(parts.begin() + 1, parts.end());
    static const std::set<std::string> kRunFields = {"id", "revision", "entry", "feedback",
                                                     "rerun_from"};
    if (out.path.empty() || kRunFields.count(out.path[0]) == 0) {
      return BadRef(ref, "unknown run field");
    }
    if (out.path.size() > 1 && out.path[0] != "feedback") {
      return BadRef(ref, absl::StrCat("run.", out.path[0], " has no fields"));
    }
    return out;
  }
  if (out.root == "loop") {
    out.path.assign(parts.begin() + 1, parts.end());
    if (out.path.size() != 1 || out.path[0] != "iteration") {
      return BadRef(ref, "the only loop value is loop.iteration");
    }
    return out;
  }
  if (out.root == "args") {
    // The arguments of an agent's tool call: `args` (all of them) or a field.
    out.path.assign(parts.begin() + 1, parts.end());
    return out;
  }
  return BadRef(ref, absl::StrCat("unknown root '", out.root, "'"));
}

std::vector<std::string> TemplateRefs(const nlohmann::json& value) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  CollectRefs(value, out, seen);
  return out;
}

absl::StatusOr<nlohmann::json> ResolveTemplates(const nlohmann::json& value,
                                                const RefResolver& resolve) {
  if (value.is_string()) {
    return ResolveString(value.get<std::string>(), resolve);
  }
  if (value.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto it = value.begin(); it != value.end(); ++it) {
      RUNLOOM_ASSIGN_OR_RETURN(out[it.key()], ResolveTemplates(it.value(), resolve));
    }
    return out;
  }
  if (value.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& item : value) {
      RUNLOOM_ASSIGN_OR_RETURN(nlohmann::json v, ResolveTemplates(item, resolve));
      out.push_back(std::move(v));
    }
    return out;
  }
  return value;
}

absl::StatusOr<Condition> ParseCondition(const std::string& text) {
  Condition c;
  c.text = text;
  std::string rest = std::string(absl::StripAsciiWhitespace(absl::string_view(text)));
  if (rest.empty()) {
    return absl::InvalidArgumentError(
        "empty condition; write <ref> or <ref> == <value>, e.g. steps.edit.output.approved == "
        "true");
  }
  std::string ref;
  if (rest.rfind("{{", 0) == 0) {
    const size_t close = rest.find("}}");
    if (close == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("condition '", text, "': unclosed '{{'; close it with '}}'"));
    }
    ref = std::string(absl::StripAsciiWhitespace(absl::string_view(rest).substr(2, close - 2)));
    rest = rest.substr(close + 2);
  } else {
    const size_t end = rest.find_first_of(" \t\n=!");
    ref = rest.substr(0, end);
    rest = end == std::string::npos ? "" : rest.substr(end);
  }
  absl::StatusOr<Ref> parsed = ParseRef(ref);
  if (!parsed.ok()) {
    return Annotate(parsed.status(), absl::StrCat("condition '", text, "'"));
  }
  c.ref = ref;
  rest = std::string(absl::StripAsciiWhitespace(absl::string_view(rest)));
  if (rest.empty()) {
    return c;
  }
  const std::string op = rest.substr(0, 2);
  if (op != "==" && op != "!=") {
    return absl::InvalidArgumentError(
        absl::StrCat("condition '", text, "': expected == or != after '", ref,
                     "'; write <ref>, <ref> == <value> or <ref> != <value>"));
  }
  c.op = op;
  const std::string literal =
      std::string(absl::StripAsciiWhitespace(absl::string_view(rest).substr(2)));
  if (literal.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("condition '", text, "': nothing after ", op,
                                                   "; write the value to compare with"));
  }
  RUNLOOM_ASSIGN_OR_RETURN(c.value, ParseLiteral(text, literal));
  return c;
}

bool IsTruthy(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      return false;
    case nlohmann::json::value_t::boolean:
      return v.get<bool>();
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float:
      return v.get<double>() != 0.0;
    case nlohmann::json::value_t::string:
      return !v.get_ref<const std::string&>().empty();
    case nlohmann::json::value_t::array:
    case nlohmann::json::value_t::object:
    case nlohmann::json::value_t::binary:
      return !v.empty();
  }
  return false;
}

absl::StatusOr<bool> EvaluateCondition(const Condition& c, const RefResolver& resolve) {
  RUNLOOM_ASSIGN_OR_RETURN(nlohmann::json v, resolve(c.ref));
  if (c.op.empty()) {
    return IsTruthy(v);
  }
  if (c.op == "==") {
    return v == c.value;
  }
  if (c.op == "!=") {
    return v != c.value;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("condition '", c.text, "': unknown operator '", c.op, "'; use == or !="));
}

std::optional<nlohmann::json> JsonAtPath(const nlohmann::json& value,
                                         const std::vector<std::string>& path) {
  const nlohmann::json* cur = &value;
  for (const std::string& key : path) {
    if (cur->is_object()) {
      auto it = cur->find(key);
      if (it == cur->end()) {
        return std::nullopt;
      }
      cur = &*it;
    } else if (cur->is_array()) {
      size_t index = 0;
      if (key.empty() || !absl::ascii_isdigit(static_cast<unsigned char>(key[0])) ||
          !absl::SimpleAtoi(key, &index) || index >= cur->size()) {
        return std::nullopt;
      }
      cur = &(*cur)[index];
    } else {
      return std::nullopt;
    }
  }
  return *cur;
}

}  // namespace runloom
