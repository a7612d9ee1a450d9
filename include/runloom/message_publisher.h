// MessagePublisher: one message on a named channel, the seam between the
// engine's stage events (runloom/engine.h, StageEventOptions) and where they
// go. Here, apart from the engine, so a publisher (src/redis/) depends on no
// engine code.
#pragma once

#include "absl/status/status.h"

#include <string>

namespace runloom {

// Where stage events go: one message on a named channel (Redis pub/sub in
// `runloom`: redis::NewRedisPublisher, src/redis/redis_publisher.h, in
// runloom::redis; an embedder may bring its own). Thread-safe.
class MessagePublisher {
 public:
  virtual ~MessagePublisher() = default;
  // Sends `payload` on `channel`, connecting first if not connected.
  // kUnavailable when the connection is down or broke (connected() is then
  // false); another error when the server refused the message.
  virtual absl::Status Publish(const std::string& channel, const std::string& payload) = 0;
  // Whether a connection is up (the engine waits out a backoff before it
  // lets Publish connect again).
  virtual bool connected() const = 0;
};

}  // namespace runloom
