// The LLM concurrency cap on Redis (llm/cap_board.h), for deployments whose
// workers share a Redis queue (`--queue redis://`): every worker reports its
// telemetry to a stream, one worker's controller per provider (the holder of
// a lease) reads them all, decides, and publishes the cap every worker's
// executors read; a cap nobody renews expires on the Redis server by itself.
// The board also counts the calls in flight of every worker against the cap
// (a distributed counting semaphore), so the cap bounds the calls a provider
// sees from the whole deployment.
//
// Keys (the store's `runloom:{INSTANCE}` prefix, docs/formats/redis-streams.md):
//   `<key_prefix>:llm_cap:<provider>`    a string holding the cap in
//       decimal. Written by the lease holder (a script: SET ... PX only while
//       the lease names it) and lowered by any worker at a 429 (a script:
//       SET only when lower than a fresh cap).
//   `<key_prefix>:llm_controller:<provider>`  the lease: a string naming
//       the controller that decides (`host:pid:seq`), SET NX PX by the lead
//       script, PEXPIREd by its holder every tick.
//   `<key_prefix>:llm_sense:<provider>`  a stream: one entry per worker per
//       tick, its SenseReport's fields (XADD MAXLEN ~ 4096; the key PEXPIREs
//       10 minutes after the last report). The holder reads it with XRANGE
//       from the last entry it read.
//   `<key_prefix>:llm_slots:<provider>`  a sorted set: one member per call
//       in flight (its holder id, `host:pid:board:seq`), scored by the slot's
//       expiry in Unix milliseconds of the Redis server's clock. TakeSlot is
//       one Lua script (EVAL): drop expired members, admit when ZCARD < cap,
//       ZADD with now + slot_ttl. ReturnSlot is ZREM. A background thread
//       renews this board's slots every slot_ttl / 3 (ZADD XX), so a slot
//       outlives a crashed holder by at most slot_ttl.
// Every TTL runs on the Redis server's clock, so workers' clocks never meet.
//
// Thread-safety: thread-safe (one connection under a mutex).
#pragma once

#include "llm/cap_board.h"
#include "redis/redis_client.h"

#include "absl/time/time.h"

#include <memory>
#include <string>

namespace runloom::redis {

struct RedisSlotOptions {
  // How long a slot lives past its last renewal: the longest a crashed
  // worker's calls keep counting against the cap. Renewed every third of
  // it; shorter frees a dead worker's slots sooner but renews more often.
  absl::Duration slot_ttl = absl::Seconds(15);
};

// Does not connect: the first call does (kUnavailable while the server
// cannot be reached, each call trying again).
std::shared_ptr<CapBoard> NewRedisCapBoard(RedisUrl url, std::string key_prefix,
                                           RedisClientOptions options = {},
                                           RedisSlotOptions slots = {});

}  // namespace runloom::redis
