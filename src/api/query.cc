#include "api/query.h"

#include "api/errors.h"
#include "core/escape.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace runloom::api {

QueryInt ParseInt(const std::string& text, const std::string& name, int64_t min, int64_t max) {
  QueryInt out;
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v) || v < min || v > max) {
    out.error = ErrorResponse(
        400, "invalid_argument",
        absl::StrCat(name, " must be an integer from ", min, max == INT64_MAX ? " up" : " to ",
                     max == INT64_MAX ? std::string() : absl::StrCat(max)),
        name);
    return out;
  }
  out.value = v;
  return out;
}

QueryInt ReadQueryInt(const HttpRequest& request, const std::string& name, int64_t min,
                      int64_t max) {
  auto it = request.query.find(name);
  if (it == request.query.end()) return {};
  return ParseInt(it->second, name, min, max);
}

QueryTime ReadQueryTime(const HttpRequest& request, const std::string& name) {
  QueryTime out;
  auto it = request.query.find(name);
  if (it == request.query.end()) return out;
  absl::Time t;
  std::string err;
  if (it->second.size() > kMaxQueryTimeBytes ||
      !absl::ParseTime(absl::RFC3339_full, it->second, &t, &err)) {
    out.error = ErrorResponse(
        400, "invalid_argument",
        absl::StrCat(name, " must be an RFC 3339 time such as 2026-01-02T15:04:05Z"), name);
    return out;
  }
  out.value = t;
  return out;
}

}  // namespace runloom::api

namespace runloom::api {

std::map<std::string, std::string> ParseQuery(const std::string& query) {
  std::map<std::string, std::string> out;
  for (absl::string_view pair : absl::StrSplit(query, '&', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
    std::optional<std::string> k = PercentDecode(kv.first, true);
    std::optional<std::string> v = PercentDecode(kv.second, true);
    if (k && v) out[*k] = *v;
  }
  return out;
}

}  // namespace runloom::api
