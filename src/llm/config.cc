#include "llm/config.h"

#include "core/bounded_json.h"
#include "core/duration.h"
#include "core/status_macros.h"
#include "workflow/inputs.h"
#include "workflow/internal/yaml_bounds.h"
#include "workflow/internal/yaml_json.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

#include <cctype>
#include <cmath>
#include <string>
#include <vector>

namespace runloom {
namespace {

constexpr double kMicrosPerUnit = 1e6;
constexpr double kMaxPrice = 1e6;    // per 1,000 tokens: far above any real price
constexpr double kMaxBudget = 1e12;  // price units
constexpr int64_t kMaxTokensLimit = 1'000'000;
constexpr int64_t kMaxConcurrencyLimit = 100'000;
constexpr int64_t kMaxRetryAttempts = 100;
constexpr size_t kMaxNameLength = 64;

// The keys each level of the file accepts: MapReader::CheckKeys refuses any
// other, and ConfigFileKeys() lists them for the documentation check.
using KeyList = std::vector<absl::string_view>;
const KeyList& TopKeys() {
  static const KeyList k = {"providers", "models", "tenants", "step_timeouts", "retention"};
  return k;
}
const KeyList& ProviderKeys() {
  static const KeyList k = {"kind",    "base_url", "api_key", "max_concurrency", "connect_timeout",
                            "timeout", "retry"};
  return k;
}
const KeyList& RetryKeys() {
  static const KeyList k = {"max_attempts", "initial_delay", "max_delay"};
  return k;
}
const KeyList& ModelKeys() {
  static const KeyList k = {"provider", "model", "input_price_per_1k", "output_price_per_1k",
                            "max_tokens"};
  return k;
}
const KeyList& TenantKeys() {
  static const KeyList k = {"budget"};
  return k;
}
const KeyList& RetentionKeys() {
  static const KeyList k = {"keep_runs", "audit_horizon", "workflows"};
  return k;
}

bool IsConfigName(const std::string& s) {
  if (s.empty() || s.size() > kMaxNameLength || !std::islower(static_cast<unsigned char>(s[0]))) {
    return false;
  }
  for (char c : s) {
    if (!std::islower(static_cast<unsigned char>(c)) &&
        !std::isdigit(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

// Reads one mapping of the file, naming "<source>:<line>: <path>" in errors.
class MapReader {
 public:
  MapReader(const YAML::Node& root, const std::string& source, std::vector<std::string> path,
            const nlohmann::json& value)
      : root_(root), source_(source), path_(std::move(path)), value_(value) {}

  absl::Status Error(const std::string& key, absl::string_view what) const {
    std::vector<std::string> at = path_;
    if (!key.empty()) at.push_back(key);
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ":", workflow_internal::LineAtPath(root_, at), ": ",
                     at.empty() ? std::string("(top level)") : absl::StrJoin(at, "."), ": ", what));
  }

  absl::Status CheckObject(absl::string_view example) const {
    if (value_.is_object()) return absl::OkStatus();
    return Error("", absl::StrCat("must be a mapping, e.g. ", example));
  }

  absl::Status CheckKeys(const KeyList& allowed) const {
    for (const auto& [key, v] : value_.items()) {
      bool ok = false;
      for (absl::string_view a : allowed) ok = ok || a == key;
      if (!ok) {
        return Error(key,
                     absl::StrCat("unknown key; allowed here: ", absl::StrJoin(allowed, ", ")));
      }
    }
    return absl::OkStatus();
  }

  bool Has(const std::string& key) const { return value_.contains(key) && !value_[key].is_null(); }
  const nlohmann::json& Get(const std::string& key) const { return value_[key]; }

  absl::StatusOr<std::string> String(const std::string& key, const std::string& fallback) const {
    if (!Has(key)) return fallback;
    if (!value_[key].is_string() || value_[key].get_ref<const std::string&>().empty()) {
      return Error(key, "must be a non-empty string");
    }
    return value_[key].get<std::string>();
  }

  absl::StatusOr<int64_t> Int(const std::string& key, int64_t min, int64_t max,
                              int64_t fallback) const {
    if (!Has(key)) return fallback;
    const nlohmann::json& v = value_[key];
    if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > max) {
      return Error(key,
                   absl::StrCat("must be an integer from ", min, " to ", max, ", got ",
                                v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
    }
    return v.get<int64_t>();
  }

  // A retention age (ParseAge: "30d", "12h"), or `none` (InfiniteDuration()).
  absl::StatusOr<absl::Duration> Age(const std::string& key) const {
    const nlohmann::json& v = value_[key];
    if (v.is_string() && v.get_ref<const std::string&>() == "none") {
      return absl::InfiniteDuration();
    }
    absl::StatusOr<absl::Duration> d = v.is_string() ? ParseAge(v.get_ref<const std::string&>())
                                                     : absl::InvalidArgumentError("not a string");
    if (!d.ok() || *d <= absl::ZeroDuration()) {
      return Error(key,
                   "must be a positive age such as \"30d\" or \"12h\", or none (keep forever)");
    }
    return *d;
  }

  absl::StatusOr<absl::Duration> Duration(const std::string& key, absl::Duration fallback) const {
    if (!Has(key)) return fallback;
    const nlohmann::json& v = value_[key];
    absl::StatusOr<absl::Duration> d = v.is_string()
                                           ? ParseDuration(v.get_ref<const std::string&>())
                                           : absl::InvalidArgumentError("not a string");
    if (!d.ok() || *d <= absl::ZeroDuration()) {
      return Error(key, "must be a positive duration such as \"500ms\", \"30s\" or \"2m\"");
    }
    return *d;
  }

  // A non-negative decimal amount, in micro-units.
  absl::StatusOr<int64_t> Micros(const std::string& key, double max, bool required) const {
    if (!Has(key)) {
      if (required) return Error(key, "is required (a number, e.g. 0.5)");
      return 0;
    }
    const nlohmann::json& v = value_[key];
    const double amount = v.is_number() ? v.get<double>() : -1;
    if (!v.is_number() || !std::isfinite(amount) || amount < 0 || amount > max) {
      return Error(key,
                   absl::StrCat("must be a number from 0 to ", max, ", got ",
                                v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
    }
    const double micros = amount * kMicrosPerUnit;
    if (std::fabs(micros - std::round(micros)) > 1e-6 * std::max(1.0, micros)) {
      return Error(key,
                   "has more than 6 decimal places; runloom counts in millionths of the "
                   "price unit");
    }
    return static_cast<int64_t>(std::llround(micros));
  }

  MapReader Child(const std::string& key) const {
    std::vector<std::string> at = path_;
    at.push_back(key);
    return MapReader(root_, source_, std::move(at), value_[key]);
  }

 private:
  const YAML::Node& root_;
  const std::string& source_;
  std::vector<std::string> path_;
  const nlohmann::json& value_;
};

absl::StatusOr<ProviderConfig> ReadProvider(const MapReader& r, const std::string& name) {
  RUNLOOM_RETURN_IF_ERROR(r.CheckObject("{kind: openai, base_url: http://127.0.0.1:8000/v1}"));
  RUNLOOM_RETURN_IF_ERROR(r.CheckKeys(ProviderKeys()));
  ProviderConfig p;
  p.name = name;
  RUNLOOM_ASSIGN_OR_RETURN(std::string kind, r.String("kind", ""));
  if (kind == "openai") {
    p.kind = ProviderKind::kOpenAi;
  } else if (kind == "anthropic") {
    p.kind = ProviderKind::kAnthropic;
  } else if (kind == "fake") {
    p.kind = ProviderKind::kFake;
  } else {
    return r.Error("kind", absl::StrCat(kind.empty() ? "is required" : "is '" + kind + "'",
                                        "; allowed: openai, anthropic, fake"));
  }
  const std::string default_url = p.kind == ProviderKind::kOpenAi ? "https://api.openai.com/v1"
                                  : p.kind == ProviderKind::kAnthropic
                                      ? "https://api.anthropic.com/v1"
                                      : "";
  RUNLOOM_ASSIGN_OR_RETURN(p.base_url, r.String("base_url", default_url));
  if (p.kind != ProviderKind::kFake && p.base_url.rfind("http://", 0) != 0 &&
      p.base_url.rfind("https://", 0) != 0) {
    return r.Error("base_url", absl::StrCat("is '", p.base_url,
                                            "'; use an http:// or https:// URL, e.g. "
                                            "http://127.0.0.1:8000/v1"));
  }
  while (!p.base_url.empty() && p.base_url.back() == '/') p.base_url.pop_back();
  if (r.Has("api_key")) {
    // The value itself is never echoed: it may be a key pasted by mistake.
    std::optional<std::string> secret = SecretRefName(r.Get("api_key"));
    if (!secret) {
      return r.Error("api_key",
                     "must be a secret reference such as secret://OPENAI_KEY, not the key "
                     "itself; put the key in the environment variable "
                     "RUNLOOM_SECRET_OPENAI_KEY (or the RUNLOOM_SECRETS_FILE file)");
    }
    p.api_key_secret = *secret;
  }
  RUNLOOM_ASSIGN_OR_RETURN(int64_t cap,
                           r.Int("max_concurrency", 1, kMaxConcurrencyLimit, p.max_concurrency));
  p.max_concurrency = static_cast<int>(cap);
  RUNLOOM_ASSIGN_OR_RETURN(p.connect_timeout, r.Duration("connect_timeout", p.connect_timeout));
  RUNLOOM_ASSIGN_OR_RETURN(p.timeout, r.Duration("timeout", p.timeout));
  if (r.Has("retry")) {
    MapReader rr = r.Child("retry");
    RUNLOOM_RETURN_IF_ERROR(
        rr.CheckObject("{max_attempts: 3, initial_delay: 500ms, max_delay: 30s}"));
    RUNLOOM_RETURN_IF_ERROR(rr.CheckKeys(RetryKeys()));
    RUNLOOM_ASSIGN_OR_RETURN(int64_t attempts,
                             rr.Int("max_attempts", 1, kMaxRetryAttempts, p.retry.max_attempts));
    p.retry.max_attempts = static_cast<int>(attempts);
    RUNLOOM_ASSIGN_OR_RETURN(p.retry.initial_delay,
                             rr.Duration("initial_delay", p.retry.initial_delay));
    RUNLOOM_ASSIGN_OR_RETURN(p.retry.max_delay, rr.Duration("max_delay", p.retry.max_delay));
    if (p.retry.max_delay < p.retry.initial_delay) {
      return rr.Error("max_delay", "must not be shorter than initial_delay");
    }
  }
  return p;
}

absl::StatusOr<ModelConfig> ReadModel(const MapReader& r, const std::string& alias,
                                      const LlmConfig& config) {
  RUNLOOM_RETURN_IF_ERROR(r.CheckObject("{provider: local, model: qwen2.5-7b-instruct}"));
  RUNLOOM_RETURN_IF_ERROR(r.CheckKeys(ModelKeys()));
  ModelConfig m;
  m.alias = alias;
  RUNLOOM_ASSIGN_OR_RETURN(m.provider, r.String("provider", ""));
  if (m.provider.empty()) return r.Error("provider", "is required: name one of `providers`");
  if (!config.providers.contains(m.provider)) {
    std::vector<std::string> names;
    for (const auto& [name, p] : config.providers) names.push_back(name);
    return r.Error("provider", absl::StrCat("'", m.provider, "' is not declared under providers (",
                                            names.empty() ? "none are" : absl::StrJoin(names, ", "),
                                            "); add it there or fix the name"));
  }
  RUNLOOM_ASSIGN_OR_RETURN(m.model, r.String("model", alias));
  RUNLOOM_ASSIGN_OR_RETURN(m.input_micros_per_1k, r.Micros("input_price_per_1k", kMaxPrice, false));
  RUNLOOM_ASSIGN_OR_RETURN(m.output_micros_per_1k,
                           r.Micros("output_price_per_1k", kMaxPrice, false));
  if (r.Has("max_tokens")) {
    RUNLOOM_ASSIGN_OR_RETURN(m.max_tokens, r.Int("max_tokens", 1, kMaxTokensLimit, 0));
  }
  return m;
}

template <typename T, typename F>
absl::Status ReadSection(const MapReader& top, const std::string& section,
                         absl::string_view example, std::map<std::string, T>& out, F read) {
  if (!top.Has(section)) return absl::OkStatus();
  MapReader r = top.Child(section);
  RUNLOOM_RETURN_IF_ERROR(r.CheckObject(example));
  for (const auto& [name, v] : top.Get(section).items()) {
    if (!IsConfigName(name)) {
      return r.Error(name,
                     "is not a valid name: use lower-case letters, digits, '_', '-' and "
                     "'.', starting with a letter (at most 64)");
    }
    RUNLOOM_ASSIGN_OR_RETURN(out[name], read(r.Child(name), name));
  }
  return absl::OkStatus();
}

absl::StatusOr<LlmConfig> ReadConfig(const YAML::Node& root, const std::string& source) {
  RUNLOOM_RETURN_IF_ERROR(workflow_internal::CheckMapKeys(root, source));
  const nlohmann::json json = workflow_internal::YamlToJson(root);
  LlmConfig config;
  if (json.is_null()) return config;  // an empty file: nothing configured
  MapReader top(root, source, {}, json);
  RUNLOOM_RETURN_IF_ERROR(top.CheckObject("providers: {...}, models: {...}, tenants: {...}"));
  RUNLOOM_RETURN_IF_ERROR(top.CheckKeys(TopKeys()));
  RUNLOOM_RETURN_IF_ERROR(ReadSection(
      top, "providers", "{local: {kind: openai}}", config.providers,
      [](const MapReader& r, const std::string& name) { return ReadProvider(r, name); }));
  RUNLOOM_RETURN_IF_ERROR(ReadSection(top, "models", "{writer: {provider: local}}", config.models,
                                      [&config](const MapReader& r, const std::string& alias) {
                                        return ReadModel(r, alias, config);
                                      }));
  RUNLOOM_RETURN_IF_ERROR(
      ReadSection(top, "tenants", "{acme: {budget: 50}}", config.tenants,
                  [](const MapReader& r, const std::string& name) -> absl::StatusOr<TenantConfig> {
                    RUNLOOM_RETURN_IF_ERROR(r.CheckObject("{budget: 50}"));
                    RUNLOOM_RETURN_IF_ERROR(r.CheckKeys(TenantKeys()));
                    TenantConfig t;
                    t.name = name;
                    RUNLOOM_ASSIGN_OR_RETURN(t.budget_micros, r.Micros("budget", kMaxBudget, true));
                    return t;
                  }));
  if (top.Has("step_timeouts")) {
    MapReader r = top.Child("step_timeouts");
    RUNLOOM_RETURN_IF_ERROR(r.CheckObject("{exec: 2h, llm: 5m}"));
    for (const auto& [kind, v] : top.Get("step_timeouts").items()) {
      if (!IsConfigName(kind)) {
        return r.Error(kind, "is not a step kind's name (lower-case letters, digits, '_')");
      }
      if (v.is_string() && v.get_ref<const std::string&>() == "none") {
        config.step_timeouts[kind] = absl::InfiniteDuration();
        continue;
      }
      absl::StatusOr<absl::Duration> d = r.Duration(kind, absl::ZeroDuration());
      if (!d.ok()) {
        return r.Error(kind, "must be a positive duration such as \"30s\" or \"2h\", or none");
      }
      config.step_timeouts[kind] = *d;
    }
  }
  if (top.Has("retention")) {
    MapReader r = top.Child("retention");
    RUNLOOM_RETURN_IF_ERROR(r.CheckObject("{keep_runs: 30d, audit_horizon: 90d}"));
    RUNLOOM_RETURN_IF_ERROR(r.CheckKeys(RetentionKeys()));
    if (r.Has("keep_runs")) {
      RUNLOOM_ASSIGN_OR_RETURN(config.keep_runs, r.Age("keep_runs"));
    }
    if (r.Has("audit_horizon")) {
      RUNLOOM_ASSIGN_OR_RETURN(config.audit_horizon, r.Age("audit_horizon"));
    }
    if (r.Has("workflows")) {
      MapReader w = r.Child("workflows");
      RUNLOOM_RETURN_IF_ERROR(w.CheckObject("{blog: 7d}"));
      for (const auto& [name, v] : r.Get("workflows").items()) {
        (void)v;
        RUNLOOM_ASSIGN_OR_RETURN(config.keep_runs_by_workflow[name], w.Age(name));
      }
    }
  }
  return config;
}

}  // namespace

std::string ToString(ProviderKind kind) {
  switch (kind) {
    case ProviderKind::kOpenAi:
      return "openai";
    case ProviderKind::kAnthropic:
      return "anthropic";
    case ProviderKind::kFake:
      return "fake";
  }
  return "fake";
}

int64_t CallCostMicros(int64_t input_micros_per_1k, int64_t output_micros_per_1k,
                       int64_t input_tokens, int64_t output_tokens) {
  constexpr int64_t kPer = 1000;
  // Tokens and prices are bounded (1e6 tokens, 1e12 micros per 1K), but a
  // provider's usage is untrusted: saturate rather than overflow.
  auto part = [](int64_t tokens, int64_t price) -> int64_t {
    if (tokens <= 0 || price <= 0) return 0;
    const __int128 micros = (static_cast<__int128>(tokens) * price + kPer - 1) / kPer;
    return micros > INT64_MAX ? INT64_MAX : static_cast<int64_t>(micros);
  };
  const int64_t in = part(input_tokens, input_micros_per_1k);
  const int64_t out = part(output_tokens, output_micros_per_1k);
  return in > INT64_MAX - out ? INT64_MAX : in + out;
}

absl::StatusOr<LlmConfig> ParseLlmConfig(const std::string& yaml_text, const std::string& source,
                                         const LoadLimits& limits) {
  RUNLOOM_RETURN_IF_ERROR(workflow_internal::CheckYamlBounds(yaml_text, source, limits));
  try {
    return ReadConfig(YAML::Load(yaml_text), source);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ":", e.mark.line + 1, ":",
                                                   e.mark.column + 1, ": invalid YAML: ", e.msg,
                                                   "; fix the syntax at that position"));
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat(source, ": unexpected error while reading the config: ", e.what()));
  }
}

absl::StatusOr<LlmConfig> LoadLlmConfigFile(const std::string& path, const LoadLimits& limits) {
  absl::StatusOr<std::string> text = ReadFileBounded(path, "config file", limits);
  if (!text.ok()) {
    if (text.status().code() == absl::StatusCode::kNotFound) {
      return absl::NotFoundError(
          absl::StrCat("config file '", path, "' not found; check --config or RUNLOOM_CONFIG"));
    }
    return text.status();
  }
  return ParseLlmConfig(*text, path, limits);
}

std::vector<std::string> ConfigFileKeys() {
  std::vector<std::string> out;
  auto add = [&out](absl::string_view prefix, const KeyList& keys) {
    for (absl::string_view k : keys) out.push_back(absl::StrCat(prefix, k));
  };
  for (absl::string_view k : ProviderKeys()) {
    if (k != "retry") out.push_back(absl::StrCat("providers.NAME.", k));
  }
  add("providers.NAME.retry.", RetryKeys());
  add("models.ALIAS.", ModelKeys());
  add("tenants.NAME.", TenantKeys());
  out.push_back("step_timeouts.KIND");
  out.push_back("retention.keep_runs");
  out.push_back("retention.audit_horizon");
  out.push_back("retention.workflows.NAME");
  return out;
}

}  // namespace runloom
