// valijson aborts the process on a bad schema unless it may throw; the
// exceptions stay inside this file.
#define VALIJSON_USE_EXCEPTIONS 1
// GCC 12 at -O3 reports a false -Wrestrict inside valijson's json_pointer.hpp
// (std::string::replace inlined); the code is valijson's, not ours.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

#include "llm/json_schema.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

#include <exception>
#include <string>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validator.hpp>
#include <vector>

namespace runloom {
namespace {

constexpr size_t kMaxReported = 3;

// valijson's context is {"<root>", "[a]", "[0]"}; written as /a/0.
std::string Pointer(const std::vector<std::string>& context) {
  std::string out;
  for (const std::string& part : context) {
    if (part == "<root>") continue;
    absl::string_view p = part;
    if (p.size() >= 2 && p.front() == '[' && p.back() == ']') p = p.substr(1, p.size() - 2);
    if (p.size() >= 2 && p.front() == '"' && p.back() == '"') p = p.substr(1, p.size() - 2);
    out.push_back('/');
    out.append(p.data(), p.size());
  }
  return out.empty() ? "/" : out;
}

}  // namespace

struct JsonSchema::Impl {
  valijson::Schema schema;
  std::string field;  // where the schema was written, for messages
  std::string subject;
};

JsonSchema::JsonSchema(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JsonSchema::~JsonSchema() = default;

absl::StatusOr<std::unique_ptr<JsonSchema>> JsonSchema::Compile(const nlohmann::json& schema,
                                                                const char* field,
                                                                const char* subject) {
  if (!schema.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " must be a JSON Schema object, e.g. {type: object, required: [summary]}, got ",
        schema.type_name()));
  }
  auto impl = std::make_unique<Impl>();
  impl->field = field;
  impl->subject = subject;
  try {
    valijson::SchemaParser parser;
    valijson::adapters::NlohmannJsonAdapter adapter(schema);
    parser.populateSchema(adapter, impl->schema);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is not a valid JSON Schema: ", e.what()));
  }
  return std::unique_ptr<JsonSchema>(new JsonSchema(std::move(impl)));
}

absl::Status JsonSchema::Validate(const nlohmann::json& value) const {
  valijson::ValidationResults results;
  try {
    valijson::Validator validator;
    valijson::adapters::NlohmannJsonAdapter adapter(value);
    if (validator.validate(impl_->schema, adapter, &results)) return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(impl_->subject, " could not be checked against ", impl_->field, ": ",
                     e.what()));
  }
  // valijson reports the innermost mismatch first, then each enclosing one.
  std::vector<std::string> parts;
  valijson::ValidationResults::Error error;
  const size_t total = results.numErrors();
  while (parts.size() < kMaxReported && results.popError(error)) {
    parts.push_back(absl::StrCat("at ", Pointer(error.context), ": ", error.description));
  }
  std::string more = total > parts.size() ? absl::StrCat(" (", total - parts.size(), " more)") : "";
  return absl::InvalidArgumentError(
      absl::StrCat(impl_->subject, " does not match ", impl_->field, ": ",
                   absl::StrJoin(parts, "; "), more));
}

}  // namespace runloom
