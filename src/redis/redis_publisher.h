// NewRedisPublisher: a MessagePublisher (runloom/stage_events.h) on Redis pub/sub,
// for stage events: each message one PUBLISH on one connection.
//
// Thread-safety: thread-safe (one connection under a mutex).
#pragma once

#include "runloom/stage_events.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <memory>
#include <string>

namespace runloom::redis {

// Parses `url` (redis://host:port[/db]; kInvalidArgument when malformed, or
// for a timeout that is not positive); connects to nothing: the first
// Publish does. `timeout` bounds one connect and one PUBLISH, so a step
// start waits at most about twice this for its event. Shorter: less waiting
// on a slow Redis; longer: fewer drops.
absl::StatusOr<std::shared_ptr<MessagePublisher>> NewRedisPublisher(
    const std::string& url, absl::Duration timeout = absl::Milliseconds(250));

}  // namespace runloom::redis
