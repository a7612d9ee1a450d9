#include "redis/redis_client.h"

#include "core/status_macros.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

#include <hiredis/hiredis.h>
#include <optional>
#include <sys/time.h>

namespace runloom::redis {
namespace {

constexpr absl::string_view kScheme = "redis://";
constexpr absl::string_view kForm = "redis://host:port[/db]";
constexpr int kMaxPort = 65535;
constexpr int kMaxDb = 15;

absl::Status BadUrl(absl::string_view url, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("Redis URL '", url, "': ", what, "; write it as ",
                                                 kForm, " (e.g. redis://127.0.0.1:6379/0)"));
}

timeval BoundedTimeval(absl::Duration d) {
  if (d < absl::ZeroDuration()) d = absl::ZeroDuration();
  return absl::ToTimeval(d);
}

// A decimal number in [lo, hi] written with digits only (SimpleAtoi alone
// also takes a sign and surrounding spaces).
std::optional<int> ParseBounded(absl::string_view text, int lo, int hi) {
  constexpr size_t kMaxDigits = 5;
  if (text.empty() || text.size() > kMaxDigits) return std::nullopt;
  for (char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  int n = 0;
  if (!absl::SimpleAtoi(text, &n) || n < lo || n > hi) return std::nullopt;
  return n;
}

// Copies a hiredis reply tree into an owned value.
RedisReply Copy(const redisReply& r) {
  RedisReply out;
  switch (r.type) {
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r.integer;
      break;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
      out.type = r.type == REDIS_REPLY_STRING   ? RedisReply::Type::kString
                 : r.type == REDIS_REPLY_STATUS ? RedisReply::Type::kStatus
                                                : RedisReply::Type::kError;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      out.elements.reserve(r.elements);
      for (size_t i = 0; i < r.elements; ++i) out.elements.push_back(Copy(*r.element[i]));
      break;
    default:
      out.type = RedisReply::Type::kNil;
  }
  return out;
}

// Takes ownership of a reply hiredis returned and copies it.
RedisReply TakeReply(void* raw) {
  auto* reply = static_cast<redisReply*>(raw);
  RedisReply out = Copy(*reply);
  freeReplyObject(reply);
  return out;
}

}  // namespace

std::string RedisUrl::Address() const {
  const bool v6 = absl::StrContains(host, ':');
  return v6 ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
}

absl::StatusOr<RedisUrl> ParseRedisUrl(absl::string_view url) {
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, kScheme)) {
    return BadUrl(url,
                  "the scheme must be redis:// (rediss://, unix sockets and others are "
                  "not supported)");
  }
  if (absl::StrContains(rest, '@')) return BadUrl(url, "a user or password is not supported");
  if (absl::StrContains(rest, '?') || absl::StrContains(rest, '#')) {
    return BadUrl(url, "query strings and fragments are not supported");
  }
  RedisUrl out;
  absl::string_view authority = rest;
  absl::string_view path;
  if (size_t slash = rest.find('/'); slash != absl::string_view::npos) {
    authority = rest.substr(0, slash);
    path = rest.substr(slash + 1);
  }
  absl::string_view port_text;
  if (absl::ConsumePrefix(&authority, "[")) {
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) return BadUrl(url, "an IPv6 host is missing its ']'");
    out.host = std::string(authority.substr(0, close));
    absl::string_view after = authority.substr(close + 1);
    if (!absl::ConsumePrefix(&after, ":")) return BadUrl(url, "the port is missing");
    port_text = after;
  } else {
    const size_t colon = authority.rfind(':');
    if (colon == absl::string_view::npos) return BadUrl(url, "the port is missing");
    out.host = std::string(authority.substr(0, colon));
    port_text = authority.substr(colon + 1);
  }
  if (out.host.empty()) return BadUrl(url, "the host is empty");
  const std::optional<int> port = ParseBounded(port_text, 1, kMaxPort);
  if (!port) {
    return BadUrl(url, absl::StrCat("the port '", port_text, "' is not a number in 1..", kMaxPort));
  }
  out.port = *port;
  if (!path.empty()) {
    const std::optional<int> db = ParseBounded(path, 0, kMaxDb);
    if (!db) {
      return BadUrl(url, absl::StrCat("the database '", path, "' is not a number in 0..", kMaxDb));
    }
    out.db = *db;
  }
  return out;
}

RedisClient::RedisClient(RedisUrl url, RedisClientOptions options)
    : url_(std::move(url)), options_(options) {}

RedisClient::~RedisClient() {
  if (ctx_ != nullptr) redisFree(ctx_);
}

absl::Status RedisClient::Broken(absl::string_view what) {
  std::string why = "no connection";
  if (ctx_ != nullptr) {
    why = ctx_->errstr[0] != '\0' ? ctx_->errstr : "unknown error";
    redisFree(ctx_);
    ctx_ = nullptr;
  }
  return absl::UnavailableError(absl::StrCat("Redis at ", url_.Address(), ": ", what, ": ", why,
                                             "; check that the server is running and reachable"));
}

absl::Status RedisClient::Connect() {
  if (ctx_ != nullptr) return absl::OkStatus();
  ctx_ = redisConnectWithTimeout(url_.host.c_str(), url_.port,
                                 BoundedTimeval(options_.connect_timeout));
  if (ctx_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("Redis at ", url_.Address(), ": connect: out of memory"));
  }
  if (ctx_->err != 0) return Broken("connect");
  if (redisSetTimeout(ctx_, BoundedTimeval(options_.command_timeout)) != REDIS_OK) {
    return Broken("setting the command timeout");
  }
  if (url_.db == 0) return absl::OkStatus();
  RUNLOOM_ASSIGN_OR_RETURN(RedisReply r, Command({"SELECT", std::to_string(url_.db)}));
  if (r.type == RedisReply::Type::kError) {
    redisFree(ctx_);
    ctx_ = nullptr;
    return absl::UnavailableError(absl::StrCat("Redis at ", url_.Address(), ": SELECT ", url_.db,
                                               " refused: ", r.str,
                                               "; use a database the server has"));
  }
  return absl::OkStatus();
}

absl::StatusOr<RedisReply> RedisClient::Command(const std::vector<std::string>& argv) {
  if (argv.empty()) return absl::InvalidArgumentError("Redis command: empty argument vector");
  RUNLOOM_RETURN_IF_ERROR(Connect());
  std::vector<const char*> args;
  std::vector<size_t> lens;
  args.reserve(argv.size());
  lens.reserve(argv.size());
  for (const std::string& a : argv) {
    args.push_back(a.data());
    lens.push_back(a.size());
  }
  void* raw = redisCommandArgv(ctx_, static_cast<int>(args.size()), args.data(), lens.data());
  if (raw == nullptr) return Broken(absl::StrCat(argv[0], " failed"));
  return TakeReply(raw);
}

absl::StatusOr<RedisReply> RedisClient::ReadReply() {
  if (ctx_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("Redis at ", url_.Address(), ": ReadReply without a connection"));
  }
  void* raw = nullptr;
  if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) {
    return Broken("reading a reply");
  }
  return TakeReply(raw);
}

}  // namespace runloom::redis
