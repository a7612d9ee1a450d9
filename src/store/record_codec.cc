#include "store/record_codec.h"

#include "absl/strings/str_cat.h"

#include <exception>

namespace runloom::store_internal {

std::string StatusName(RunStatus s) { return std::string(ToString(s)); }
std::string PartyName(Party p) { return std::string(ToString(p)); }

std::string StepStateName(StepState s) { return std::string(ToString(s)); }

std::string ErrorClassName(const std::optional<ErrorClass>& c) {
  return c.has_value() ? std::string(ToString(*c)) : std::string();
}

absl::Status RequireNonEmpty(const std::string& value, std::string_view what) {
  if (value.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(what), " is empty"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> DumpJson(const nlohmann::json& value, std::string_view what) {
  try {
    return value.dump();
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(what), " cannot be stored as JSON: ",
                                                   e.what(), "; strings must be valid UTF-8"));
  }
}

absl::StatusOr<nlohmann::json> ParseJson(const std::string& text, std::string_view what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat("corrupt JSON in ", std::string(what), ": ", e.what()));
  }
}

absl::Status CheckNewToken(const TokenRecord& token, const std::string& token_hash) {
  if (token.id.empty()) return absl::InvalidArgumentError("token id is empty");
  if (token.name.empty()) return absl::InvalidArgumentError("token name is empty");
  if (token_hash.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("token ", token.name, " has an empty hash"));
  }
  return absl::OkStatus();
}

}  // namespace runloom::store_internal
