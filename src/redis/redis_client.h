// RedisClient: one connection to a Redis server through hiredis, with bounded
// timeouts, commands as argument vectors only, and owned replies.
//
// The seam every Redis user in runloom goes through (stage events today, the
// Redis Streams transport next). It speaks RESP2 (Debian's hiredis 0.14 has
// no RESP3). Commands are sent with redisCommandArgv: each argument is one
// binary-safe string, never a format string, so user data cannot change the
// command. Replies are copied into RedisReply values the caller owns.
//
// Failures are absl::Status: kUnavailable when the server cannot be reached
// or the connection breaks (the message names the server's address), with the
// connection dropped; the next Command() connects again (no backoff here: the
// caller decides how often to retry). A Redis error reply (`-ERR ...`) is a
// RedisReply of type kError, not a failed Status: the command reached the
// server and its answer is the caller's to judge.
//
// Thread-safety: a RedisClient is NOT thread-safe (one hiredis connection
// carries one request/reply stream). Use it from one thread at a time, e.g.
// under a runloom::Mutex the owner holds around each call.
//
// Example:
//   RUNLOOM_ASSIGN_OR_RETURN(RedisUrl url, ParseRedisUrl("redis://127.0.0.1:6379/2"));
//   RedisClient client(url, {});  // no connection yet
//   RUNLOOM_ASSIGN_OR_RETURN(RedisReply r, client.Command({"PUBLISH", "chan", payload}));
//   if (r.type == RedisReply::Type::kInteger) { /* r.integer subscribers got it */ }
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

#include <cstdint>
#include <string>
#include <vector>

struct redisContext;

namespace runloom::redis {

// A parsed `redis://host:port[/db]` URL.
struct RedisUrl {
  std::string host;
  int port = 0;
  int db = 0;  // SELECTed after connecting when not 0
  // "host:port" for messages.
  std::string Address() const;
};

// Parses `redis://host:port[/db]`: host non-empty (a name, an IPv4 address,
// or an IPv6 address in brackets), port 1..65535, db 0..15 (Redis' default
// database count). kInvalidArgument, saying what is wrong and the form
// expected, for anything else (another scheme, a user or password, a query
// string, a missing port).
absl::StatusOr<RedisUrl> ParseRedisUrl(absl::string_view url);

// A reply, owned. `str` holds the bytes of kString, kStatus and kError
// replies; `integer` of kInteger; `elements` of kArray.
struct RedisReply {
  enum class Type { kNil, kInteger, kString, kStatus, kError, kArray };
  Type type = Type::kNil;
  int64_t integer = 0;
  std::string str;
  std::vector<RedisReply> elements;
};

struct RedisClientOptions {
  // How long a connection attempt may take (TCP connect). Shorter: a down
  // server costs callers less; longer: tolerates a slow network.
  absl::Duration connect_timeout = absl::Milliseconds(500);
  // How long one command (send + reply) may take before the connection is
  // dropped as broken (kUnavailable). Also bounds ReadReply().
  absl::Duration command_timeout = absl::Milliseconds(500);
};

class RedisClient {
 public:
  // Does not connect: the first Command() does.
  RedisClient(RedisUrl url, RedisClientOptions options);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // Connects now if not connected (then SELECTs the URL's db). OK when
  // connected; kUnavailable when the server cannot be reached or refuses
  // the SELECT.
  absl::Status Connect();

  // Sends one command (connecting first if needed) and returns its reply.
  // REQUIRES: `argv` is not empty. kUnavailable on a connection or I/O error
  // (including a timeout); the connection is dropped and the next call
  // connects again.
  absl::StatusOr<RedisReply> Command(const std::vector<std::string>& argv);

  // Reads the next reply the server pushes without sending anything (a
  // subscribed connection's messages), waiting up to command_timeout.
  // kFailedPrecondition when not connected; kUnavailable on an I/O error or
  // when nothing arrives in time (the connection is then dropped).
  absl::StatusOr<RedisReply> ReadReply();

  bool connected() const { return ctx_ != nullptr; }
  const RedisUrl& url() const { return url_; }

 private:
  // Drops the connection and returns kUnavailable describing `what` failed.
  absl::Status Broken(absl::string_view what);

  const RedisUrl url_;
  const RedisClientOptions options_;
  redisContext* ctx_ = nullptr;  // null when not connected
};

}  // namespace runloom::redis
