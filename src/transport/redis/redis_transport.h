// The Redis Streams transport: jobs on one stream read by one consumer
// group, fed from the store's outbox by a relay (docs/formats/redis-streams.md).
//
// The store's database stays the source of truth. It holds the outbox (rows
// written in the same transaction as the state change that needs an
// executor), the dead letters, and the time authority; Redis holds only
// messages. So a Redis that loses everything (a restart without
// persistence) loses only messages: the consumer group is created again on
// NOGROUP, and the reconciler re-enqueues runs that FindMessages no longer
// accounts for.
//
// Time: visibility deadlines follow the store's time authority, not Redis'
// idle times. Claim reads the database's Now(), and each claimed message's
// deadline (Now() + visibility) goes into a sorted set; a later Claim
// reclaims with XCLAIM the messages whose deadline the authority has passed.
// Why not XAUTOCLAIM's min-idle-time: idle time is measured by the Redis
// server's clock, which is neither the authority the leases use nor movable
// by the conformance suites' TimeControl, and a deadline per message lets
// Release make one message visible at once. Each Claim is one Lua script, so
// two consumers never reclaim the same message for one deadline.
//
// Poison: an entry that names no run (no 'run' field: written by something
// else, or damaged), or a run the database does not have, can never be
// carried out; it is dead-lettered at once with that reason (logged as an
// error), never returned and never retried (reference 002). The queue
// tables cannot hold either: their run_id is a foreign key of runs.
//
// Residue: a message whose run is leased, finished or paused is
// acknowledged instead of returned (the lease, or the end, stands for it;
// the queue-table transports delete the message when the lease is taken,
// which a stream apart from the database cannot). So is a message delivered
// again (deliveries > 1) whose run is running with an expired lease: it was
// the run's message before that lease, and the sweeper owns the recovery of
// an expired lease (it re-enqueues with a fresh message, which is returned).
//
// Deliveries: the group's delivery count (XPENDING). A due message already
// delivered max_deliveries times is dead-lettered instead of reclaimed:
// recorded in the database (with the reason, once per message id), copied
// to the dead-letter stream, then XACK'd and XDEL'd.
//
// Release (best effort): a held message is handed to the consumer
// "released" with its delivery count lowered by one and its deadline set to
// 0, so the next Claim reclaims it at once (as the queue tables do). A message
// that is gone or not held is left alone.
//
// Outages: a relay that cannot publish records the reason on the outbox row
// and goes on to the next (the row comes back after a backoff); after a
// failed connect, commands fail at once for a moment instead of each waiting
// out the connect timeout.
//
// Thread-safety: thread-safe; one Redis connection under a mutex.
#pragma once

#include "runloom/transport.h"

#include "transport/stream_database.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "redis/redis_client.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace runloom::transport_internal {

struct RedisTransportOptions {
  TransportOptions transport;
  // Prefix of every key (docs/formats/redis-streams.md); the store derives
  // it from its database's instance id. Not empty.
  std::string key_prefix;
  redis::RedisClientOptions client;
  // How often the relay looks at the outbox without a wake-up (rows whose
  // publish failed come back after their backoff; a NOTIFY may be missed).
  absl::Duration relay_interval = absl::Seconds(1);
  // Outbox rows published per relay pass.
  int relay_batch = 100;
};

// Connects to `url` (so an unreachable Redis fails here, kUnavailable,
// naming the server), creates the consumer group if missing, and starts the
// relay thread. `db` is shared with the store.
absl::StatusOr<std::unique_ptr<Transport>> NewRedisTransport(const redis::RedisUrl& url,
                                                             RedisTransportOptions options,
                                                             std::shared_ptr<StreamDatabase> db);

// OK when a Redis server answers PING at `url`; kUnavailable naming the
// server and how to fix it otherwise. Writes nothing.
absl::Status CheckRedisReachable(const redis::RedisUrl& url,
                                 const redis::RedisClientOptions& options);

}  // namespace runloom::transport_internal
