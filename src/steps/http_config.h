// The config of an `http` step, read and checked (the step itself is in
// http_step.cc). Keys:
//
//   method:   GET (default), POST, PUT, PATCH or DELETE.
//   url:      required; http:// or https://, at most 2048 bytes, no spaces
//             or control characters.
//   headers:  map of header name (a token, at most 128 bytes) -> string
//             value (at most 32 headers; a value at most 4096 bytes, no
//             CR/LF). A value may end in a secret reference, "secret://NAME"
//             or e.g. "Bearer secret://NAME": resolved when the step runs
//             (RUNLOOM_SECRET_<NAME>, RUNLOOM_SECRETS_FILE) and never written
//             anywhere. Host, Content-Length, Transfer-Encoding, Connection,
//             Expect and Idempotency-Key are set by runloom and refused.
//   body:     any JSON (templates resolved), sent as application/json; at
//             most 1 MiB serialized. Not with GET.
//   expect:   a status or a list of statuses (100-599) that mean success;
//             default any 2xx.
//   max_response_bytes: 1 .. 16 MiB, default 1 MiB; a larger body fails.
//   write:    true = an external write through the write_operations ledger
//             (an Idempotency-Key header, intent before, result after,
//             reconciliation on a retry). Default false.
//   action:   (write only) the write's name within the step, [a-z0-9_.-],
//             at most 64 characters; default "write".
//   lookup:   (write only) how to find out whether a write whose response
//             was lost was applied: {url (required), method (GET), found
//             (statuses, default 200), missing (statuses, default 404)}. It
//             is sent with the step's headers and the same Idempotency-Key.
//             Without it, a retry resends the write with the same
//             Idempotency-Key and relies on the server to apply it once.
// The request timeout is the step's `timeout` (default 30 s).
//
// The same parser serves Validate (templates unresolved; a templated value
// is checked when the step runs) and Execute (every value final).
//
// Thread-safety: stateless functions.
#pragma once

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace runloom::steps_internal {

inline constexpr size_t kMaxUrlBytes = 2048;
inline constexpr size_t kMaxHeaders = 32;
inline constexpr size_t kMaxHeaderValueBytes = 4096;
inline constexpr size_t kMaxRequestBodyBytes = size_t{1} << 20;
inline constexpr size_t kDefaultMaxResponseBytes = size_t{1} << 20;
inline constexpr size_t kMaxResponseBytesLimit = size_t{16} << 20;
inline constexpr char kDefaultAction[] = "write";

// A header value: literal text, or literal text followed by a secret
// reference (secret_name set; the value sent is prefix + the secret).
struct HeaderValue {
  std::string prefix;
  std::optional<std::string> secret_name;
};

// Statuses that mean one thing; empty = any 2xx.
using StatusSet = std::set<int>;
bool StatusIn(const StatusSet& set, int status);

struct HttpLookup {
  std::string method = "GET";
  std::string url;
  StatusSet found = {200};
  StatusSet missing = {404};
};

struct HttpStepConfig {
  std::string method = "GET";
  std::string url;  // "" while templated (Validate)
  std::vector<std::pair<std::string, HeaderValue>> headers;
  std::optional<nlohmann::json> body;
  StatusSet expect;
  size_t max_response_bytes = kDefaultMaxResponseBytes;
  bool write = false;
  std::string action = kDefaultAction;
  std::optional<HttpLookup> lookup;
};

// Reads `config` (StepDef::config, or the resolved config). kInvalidArgument
// naming the key, what is wrong and how to fix it.
absl::StatusOr<HttpStepConfig> ParseHttpConfig(const nlohmann::json& config, bool unresolved);

}  // namespace runloom::steps_internal
