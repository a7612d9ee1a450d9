// Query-string and header integers, checked as untrusted input: a value that
// is not a decimal integer in range is a 400 naming it.
//
// Thread-safety: pure functions.
#pragma once

#include "api/http_types.h"

#include "absl/time/time.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace runloom::api {

struct QueryInt {
  std::optional<int64_t> value;       // nullopt: absent (and no error)
  std::optional<HttpResponse> error;  // set: answer with it
};

// `text` (named `name` in the error) as an integer in [min, max].
QueryInt ParseInt(const std::string& text, const std::string& name, int64_t min, int64_t max);
// The query parameter `name`, if present, as ParseInt.
QueryInt ReadQueryInt(const HttpRequest& request, const std::string& name, int64_t min,
                      int64_t max);

struct QueryTime {
  std::optional<absl::Time> value;    // nullopt: absent (and no error)
  std::optional<HttpResponse> error;  // set: answer with it
};

// The query parameter `name`, if present, as an RFC 3339 time
// ("2026-12-06T05:00:00Z"); at most kMaxQueryTimeBytes long, else a 400.
inline constexpr size_t kMaxQueryTimeBytes = 64;
QueryTime ReadQueryTime(const HttpRequest& request, const std::string& name);

}  // namespace runloom::api

namespace runloom::api {

// Splits a query string ("a=1&b=x%20y") into decoded pairs; a repeated key
// keeps the last value; a malformed pair is skipped.
std::map<std::string, std::string> ParseQuery(const std::string& query);

}  // namespace runloom::api
