// Stage events (reference 004), as an embedder sets them up:
// StageEventOptions (EngineOptions::stage_events) and MessagePublisher, one
// message on a named channel, the seam between the engine's stage events and
// where they go. Here, apart from the engine, so a publisher (src/redis/)
// depends on no engine code. What is published: docs/operations.md, "Stage
// events"; the engine side: src/engine/observe/stage_events.h.
#pragma once

#include "absl/status/status.h"

#include <memory>
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

struct StageEventOptions {
  // Where events are published; nullptr (the default) = stage events off,
  // and no connection is made, not even a connect.
  std::shared_ptr<MessagePublisher> publisher;
  // Channel: {channel_prefix}:{tenant_id}:{node_id}.
  std::string channel_prefix = "pipeline";
  // After a failure the engine does not let the publisher reconnect for 1 s,
  // doubling to 30 s while it stays down (events in between are dropped
  // with a warning each), so a down server costs steps nothing. The
  // publisher bounds one connect and one send (redis::NewRedisPublisher's
  // timeout, 250 ms by default).
};

}  // namespace runloom
