// The LLM concurrency cap on Redis (llm/cap_board.h), for deployments whose
// workers share a Redis queue (`--queue redis://`): every worker's executors
// read the cap the controllers publish, and a cap nobody renews expires on
// the Redis server by itself.
//
// Key: `<key_prefix>:llm_cap:<provider>` (the store's `runloom:{INSTANCE}`
// prefix, docs/formats/redis-streams.md), a string holding the cap in
// decimal, written with `SET key cap PX ttl_ms`. The TTL runs on the Redis
// server's clock.
//
// Thread-safety: thread-safe (one connection under a mutex).
#pragma once

#include "llm/cap_board.h"
#include "transport/redis/redis_client.h"

#include <memory>
#include <string>

namespace runloom::redis {

// Does not connect: the first Publish or Read does (kUnavailable while the
// server cannot be reached, each call trying again).
std::shared_ptr<CapBoard> NewRedisCapBoard(RedisUrl url, std::string key_prefix,
                                           RedisClientOptions options = {});

}  // namespace runloom::redis
