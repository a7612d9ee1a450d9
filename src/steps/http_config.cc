#include "steps/http_config.h"

#include "core/status_macros.h"
#include "steps/internal/config.h"
#include "workflow/inputs.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#include <algorithm>
#include <array>
#include <cstdint>

namespace runloom::steps_internal {
namespace {

constexpr char kKind[] = "http";
constexpr int kMinStatus = 100;
constexpr int kMaxStatus = 599;
constexpr size_t kMaxActionBytes = 64;
constexpr size_t kMaxHeaderNameBytes = 128;
constexpr std::array<const char*, 5> kMethods = {"GET", "POST", "PUT", "PATCH", "DELETE"};
// Headers runloom sets itself (lower case).
constexpr std::array<const char*, 6> kReservedHeaders = {
    "host", "content-length", "transfer-encoding", "connection", "idempotency-key", "expect"};

absl::Status Err(const std::string& key, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(kKind, " step: key '", key, "' ", what));
}

// `shown` names the key in messages (e.g. "lookup.method").
absl::StatusOr<std::string> ReadMethod(const ConfigReader& r, const std::string& key,
                                       const std::string& shown) {
  const nlohmann::json& v = r.Get(key);
  if (v.is_null() || r.Deferred(key)) return std::string("GET");
  if (!v.is_string()) return Err(shown, absl::StrCat("must be a string, got ", v.dump()));
  const std::optional<std::string> m = v.get<std::string>();
  const std::string upper = absl::AsciiStrToUpper(*m);
  for (const char* ok : kMethods) {
    if (upper == ok) return upper;
  }
  return Err(shown, absl::StrCat("must be GET, POST, PUT, PATCH or DELETE, got '", *m, "'"));
}

// "" while templated (checked when the step runs).
absl::StatusOr<std::string> ReadUrl(const ConfigReader& r, const std::string& key,
                                    const std::string& shown) {
  if (!r.Has(key)) {
    return absl::InvalidArgumentError(absl::StrCat(kKind, " step: missing required key '", shown,
                                                   "', e.g. \"http://127.0.0.1:8765/actions\""));
  }
  const nlohmann::json& v = r.Get(key);
  if (!v.is_string()) return Err(shown, absl::StrCat("must be a string, got ", v.dump()));
  if (r.Deferred(key)) return std::string();
  const std::string& url = v.get_ref<const std::string&>();
  if (url.size() > kMaxUrlBytes) {
    return Err(shown, absl::StrCat("is ", url.size(), " bytes; at most ", kMaxUrlBytes));
  }
  if (!absl::StartsWith(url, "http://") && !absl::StartsWith(url, "https://")) {
    return Err(shown, absl::StrCat("must start with http:// or https://, got '", url, "'"));
  }
  for (char c : url) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) {
      return Err(shown, "must not contain spaces or control characters; percent-encode them");
    }
  }
  return url;
}

// RFC 9110 token characters.
bool IsHeaderName(const std::string& name) {
  if (name.empty() || name.size() > kMaxHeaderNameBytes) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

absl::StatusOr<HeaderValue> ReadHeaderValue(const std::string& name, const nlohmann::json& v,
                                            bool unresolved) {
  const std::string key = "headers." + name;
  if (!v.is_string()) return Err(key, absl::StrCat("must be a string, got ", v.dump()));
  const std::string& text = v.get_ref<const std::string&>();
  if (text.size() > kMaxHeaderValueBytes) {
    return Err(key, absl::StrCat("is ", text.size(), " bytes; at most ", kMaxHeaderValueBytes));
  }
  if (unresolved && IsTemplate(v)) return HeaderValue{};
  if (text.find_first_of("\r\n") != std::string::npos || text.find('\0') != std::string::npos) {
    return Err(key, "must not contain CR, LF or NUL");
  }
  HeaderValue out;
  const size_t at = text.find(kSecretScheme);
  if (at == std::string::npos) {
    out.prefix = text;
    return out;
  }
  std::optional<std::string> name_of = SecretRefName(nlohmann::json(text.substr(at)));
  if (!name_of.has_value()) {
    return Err(key,
               "has a secret reference that is not secret://NAME at the end of the value "
               "(NAME: letters, digits and _, not starting with a digit)");
  }
  out.prefix = text.substr(0, at);
  out.secret_name = std::move(name_of);
  return out;
}

absl::StatusOr<std::vector<std::pair<std::string, HeaderValue>>> ReadHeaders(const ConfigReader& r,
                                                                             bool unresolved) {
  std::vector<std::pair<std::string, HeaderValue>> out;
  if (!r.Has("headers")) return out;
  const nlohmann::json& h = r.Get("headers");
  if (!h.is_object()) {
    return Err("headers", absl::StrCat("must be a map of name: value, got ", h.dump()));
  }
  if (h.size() > kMaxHeaders) {
    return Err("headers", absl::StrCat("has ", h.size(), " entries; at most ", kMaxHeaders));
  }
  for (const auto& item : h.items()) {
    if (!IsHeaderName(item.key())) {
      return Err("headers", absl::StrCat("has an invalid header name '", item.key(), "'"));
    }
    const std::string lower = absl::AsciiStrToLower(item.key());
    for (const char* reserved : kReservedHeaders) {
      if (lower == reserved) {
        return Err("headers",
                   absl::StrCat("sets '", item.key(), "', which runloom sets itself; remove it"));
      }
    }
    RUNLOOM_ASSIGN_OR_RETURN(HeaderValue v, ReadHeaderValue(item.key(), item.value(), unresolved));
    out.emplace_back(item.key(), std::move(v));
  }
  return out;
}

absl::StatusOr<StatusSet> ReadStatuses(const std::string& key, const nlohmann::json& v,
                                       bool unresolved) {
  StatusSet out;
  if (unresolved && IsTemplate(v)) return out;
  const nlohmann::json list = v.is_array() ? v : nlohmann::json::array({v});
  if (list.empty() || list.size() > static_cast<size_t>(kMaxStatus - kMinStatus + 1)) {
    return Err(key, "must be a status or a non-empty list of statuses, e.g. [200, 201]");
  }
  for (const nlohmann::json& s : list) {
    if (!s.is_number_integer() || s.get<int64_t>() < kMinStatus || s.get<int64_t>() > kMaxStatus) {
      return Err(key, absl::StrCat("must hold HTTP statuses from ", kMinStatus, " to ", kMaxStatus,
                                   ", got ", s.dump()));
    }
    out.insert(s.get<int>());
  }
  return out;
}

absl::StatusOr<std::string> ReadAction(const ConfigReader& r) {
  RUNLOOM_ASSIGN_OR_RETURN(std::optional<std::string> a, r.String("action"));
  if (!a.has_value() || r.Deferred("action")) return std::string(kDefaultAction);
  const bool ok =
      !a->empty() && a->size() <= kMaxActionBytes && std::all_of(a->begin(), a->end(), [](char c) {
        return absl::ascii_islower(static_cast<unsigned char>(c)) ||
               absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '.' ||
               c == '-';
      });
  if (!ok) {
    return Err("action", absl::StrCat("must be 1-", kMaxActionBytes,
                                      " characters of a-z, 0-9, _, . and -, got '", *a, "'"));
  }
  return *a;
}

absl::StatusOr<HttpLookup> ReadLookup(const nlohmann::json& v, bool unresolved) {
  if (!v.is_object()) return Err("lookup", "must be a map, e.g. {url: \"http://.../lookup\"}");
  for (const auto& item : v.items()) {
    const std::string& k = item.key();
    if (k != "url" && k != "method" && k != "found" && k != "missing") {
      return Err("lookup", absl::StrCat("has unknown key '", k,
                                        "'; allowed keys: found, method, missing, url"));
    }
  }
  ConfigReader r(kKind, v, unresolved);
  HttpLookup out;
  RUNLOOM_ASSIGN_OR_RETURN(out.method, ReadMethod(r, "method", "lookup.method"));
  RUNLOOM_ASSIGN_OR_RETURN(out.url, ReadUrl(r, "url", "lookup.url"));
  if (r.Has("found")) {
    RUNLOOM_ASSIGN_OR_RETURN(out.found, ReadStatuses("lookup.found", r.Get("found"), unresolved));
  }
  if (r.Has("missing")) {
    RUNLOOM_ASSIGN_OR_RETURN(out.missing,
                             ReadStatuses("lookup.missing", r.Get("missing"), unresolved));
  }
  for (int s : out.found) {
    if (out.missing.count(s) > 0) {
      return Err("lookup", absl::StrCat("lists ", s, " in both found and missing"));
    }
  }
  return out;
}

}  // namespace

bool StatusIn(const StatusSet& set, int status) {
  if (set.empty()) return status >= 200 && status <= 299;
  return set.count(status) > 0;
}

absl::StatusOr<HttpStepConfig> ParseHttpConfig(const nlohmann::json& config, bool unresolved) {
  ConfigReader r(kKind, config, unresolved);
  RUNLOOM_RETURN_IF_ERROR(r.CheckKeys({"method", "url", "headers", "body", "expect",
                                       "max_response_bytes", "write", "action", "lookup"}));
  HttpStepConfig out;
  RUNLOOM_ASSIGN_OR_RETURN(out.method, ReadMethod(r, "method", "method"));
  RUNLOOM_ASSIGN_OR_RETURN(out.url, ReadUrl(r, "url", "url"));
  RUNLOOM_ASSIGN_OR_RETURN(out.headers, ReadHeaders(r, unresolved));
  if (r.Has("body")) {
    if (out.method == "GET" && !r.Deferred("method")) {
      return Err("body", "is not sent with GET; use POST, PUT or PATCH");
    }
    out.body = r.Get("body");
    const size_t bytes = out.body->dump().size();
    if (bytes > kMaxRequestBodyBytes) {
      return Err("body",
                 absl::StrCat("is ", bytes, " bytes serialized; at most ", kMaxRequestBodyBytes));
    }
  }
  if (r.Has("expect")) {
    RUNLOOM_ASSIGN_OR_RETURN(out.expect, ReadStatuses("expect", r.Get("expect"), unresolved));
  }
  RUNLOOM_ASSIGN_OR_RETURN(
      std::optional<int64_t> max_bytes,
      r.Int("max_response_bytes", 1, static_cast<int64_t>(kMaxResponseBytesLimit)));
  if (max_bytes.has_value()) out.max_response_bytes = static_cast<size_t>(*max_bytes);
  RUNLOOM_ASSIGN_OR_RETURN(std::optional<bool> write, r.Bool("write"));
  out.write = write.value_or(false);
  if (!out.write && (r.Has("action") || r.Has("lookup"))) {
    return Err(r.Has("action") ? "action" : "lookup",
               "applies only to a write; add `write: true` (or remove it)");
  }
  RUNLOOM_ASSIGN_OR_RETURN(out.action, ReadAction(r));
  if (r.Has("lookup")) {
    RUNLOOM_ASSIGN_OR_RETURN(out.lookup, ReadLookup(r.Get("lookup"), unresolved));
  }
  return out;
}

}  // namespace runloom::steps_internal
