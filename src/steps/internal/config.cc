#include "steps/internal/config.h"

#include "core/duration.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace runloom::steps_internal {
namespace {
const nlohmann::json& NullJson() {
  static const nlohmann::json* const kNull = new nlohmann::json(nullptr);
  return *kNull;
}
// More digits than this cannot be an int64 we care about; also keeps stoll safe.
constexpr size_t kMaxIntDigits = 18;
}  // namespace

bool IsTemplate(const nlohmann::json& value) {
  return value.is_string() && value.get_ref<const std::string&>().find("{{") != std::string::npos;
}

ConfigReader::ConfigReader(std::string kind, const nlohmann::json& config, bool unresolved)
    : kind_(std::move(kind)), config_(config), unresolved_(unresolved) {}

absl::Status ConfigReader::CheckKeys(std::initializer_list<std::string_view> allowed) const {
  std::set<std::string> names;
  for (std::string_view a : allowed) {
    names.emplace(a);
  }
  const std::string list = names.empty() ? "(none)" : absl::StrJoin(names, ", ");
  if (config_.is_null()) {
    return absl::OkStatus();
  }
  if (!config_.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(kind_, " step: config must be a map of keys (",
                                                   list, "), got ", config_.dump()));
  }
  for (const auto& item : config_.items()) {
    if (names.count(item.key()) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(kind_, " step: unknown key '", item.key(), "'; allowed keys: ", list));
    }
  }
  return absl::OkStatus();
}

bool ConfigReader::Has(const std::string& key) const {
  return config_.is_object() && config_.contains(key);
}

const nlohmann::json& ConfigReader::Get(const std::string& key) const {
  if (!Has(key)) {
    return NullJson();
  }
  return config_.at(key);
}

bool ConfigReader::Deferred(const std::string& key) const {
  return unresolved_ && IsTemplate(Get(key));
}

absl::StatusOr<std::optional<std::string>> ConfigReader::String(const std::string& key) const {
  if (!Has(key)) {
    return std::nullopt;
  }
  const nlohmann::json& v = Get(key);
  if (!v.is_string()) {
    return Error(key, absl::StrCat("must be a string, got ", v.dump()));
  }
  return v.get<std::string>();
}

absl::StatusOr<std::optional<bool>> ConfigReader::Bool(const std::string& key) const {
  if (!Has(key)) {
    return std::nullopt;
  }
  const nlohmann::json& v = Get(key);
  if (!v.is_boolean()) {
    return Error(key, absl::StrCat("must be true or false, got ", v.dump()));
  }
  return v.get<bool>();
}

absl::StatusOr<std::optional<int64_t>> ConfigReader::Int(const std::string& key, int64_t min,
                                                         int64_t max) const {
  if (!Has(key) || Deferred(key)) {
    return std::nullopt;
  }
  const nlohmann::json& v = Get(key);
  std::optional<int64_t> n;
  if (v.is_number_integer()) {
    n = v.get<int64_t>();
  } else if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    const bool digits =
        !s.empty() && s.size() <= kMaxIntDigits && std::all_of(s.begin(), s.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c)) != 0;
        });
    if (digits) {
      n = std::stoll(s);
    }
  }
  if (!n.has_value() || *n < min || *n > max) {
    return Error(key,
                 absl::StrCat("must be an integer from ", min, " to ", max, ", got ", v.dump()));
  }
  return n;
}

absl::StatusOr<std::optional<absl::Duration>> ConfigReader::Duration(const std::string& key) const {
  if (!Has(key) || Deferred(key)) {
    return std::nullopt;
  }
  const nlohmann::json& v = Get(key);
  if (!v.is_string()) {
    return Error(
        key,
        absl::StrCat("must be a duration such as \"250ms\", \"2s\" or \"1m30s\", got ", v.dump()));
  }
  absl::StatusOr<absl::Duration> d = ParseDuration(v.get_ref<const std::string&>());
  if (!d.ok()) {
    return Error(key, std::string(d.status().message()));
  }
  return *d;
}

absl::StatusOr<std::optional<absl::Time>> ConfigReader::Timestamp(const std::string& key) const {
  if (!Has(key) || Deferred(key)) {
    return std::nullopt;
  }
  const nlohmann::json& v = Get(key);
  if (!v.is_string()) {
    return Error(key, absl::StrCat("must be an ISO 8601 time such as \"2026-12-24T18:00:00Z\", got ",
                                   v.dump()));
  }
  absl::StatusOr<absl::Time> t = ParseTimestamp(v.get_ref<const std::string&>());
  if (!t.ok()) {
    return Error(key, std::string(t.status().message()));
  }
  return *t;
}

absl::Status ConfigReader::Error(const std::string& key, std::string_view what) const {
  return absl::InvalidArgumentError(
      absl::StrCat(kind_, " step: key '", key, "' ", std::string(what)));
}

absl::Status ConfigReader::Missing(const std::string& key, std::string_view example) const {
  return absl::InvalidArgumentError(
      absl::StrCat(kind_, " step: missing required key '", key, "', e.g. ", std::string(example)));
}

}  // namespace runloom::steps_internal
