#include "llm/redis_cap_board.h"

#include "runloom/clock.h"
#include "runloom/mutex.h"

#include "core/periodic_task.h"

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits.h>
#include <unistd.h>
#include <vector>

namespace runloom::redis {
namespace {

constexpr int64_t kMaxCap = 1'000'000;

// KEYS[1] the slots set; ARGV: cap, slot TTL in ms, holder. 1 = taken (or
// already held: a retried take after a lost reply), 0 = all taken.
// replicate_commands lets a script write after TIME on Redis < 5 (a no-op
// since).
constexpr char kTakeScript[] = R"lua(
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[3]) and
   redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[3])
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
)lua";

// KEYS[1] the slots set; ARGV: slot TTL in ms, holders. Renews the holders
// still present (XX: a slot that already expired may be someone else's now).
constexpr char kRenewScript[] = R"lua(
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
)lua";

// Boards made in this process, so two boards' holder ids never collide.
std::atomic<int64_t> boards_made{0};

std::string HolderPrefix() {
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return absl::StrCat(host, ":", getpid(), ":", boards_made.fetch_add(1), ":");
}

class RedisCapBoard final : public CapBoard {
 public:
  RedisCapBoard(RedisUrl url, std::string key_prefix, RedisClientOptions options,
                RedisSlotOptions slots)
      : key_prefix_(std::move(key_prefix)),
        address_(url.Address()),
        holder_prefix_(HolderPrefix()),
        slot_ttl_ms_(std::max<int64_t>(1, absl::ToInt64Milliseconds(slots.slot_ttl))),
        client_(std::move(url), options),
        renewer_(RealClock(), std::max(absl::Milliseconds(1), slots.slot_ttl / 3),
                 [this] { Renew(); }) {}
  ~RedisCapBoard() override { renewer_.Stop(); }

  absl::Status Publish(const std::string& provider, int cap, absl::Duration ttl) override {
    const int64_t ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(ttl));
    runloom::MutexLock l(&mu_);
    absl::StatusOr<RedisReply> r =
        client_.Command({"SET", CapKey(provider), absl::StrCat(cap), "PX", absl::StrCat(ms)});
    if (!r.ok()) return r.status();
    if (r->type == RedisReply::Type::kError) {
      return absl::UnavailableError(
          absl::StrCat("redis ", address_, " refused SET ", CapKey(provider), ": ", r->str));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::optional<int>> Read(const std::string& provider) override {
    runloom::MutexLock l(&mu_);
    absl::StatusOr<RedisReply> r = client_.Command({"GET", CapKey(provider)});
    if (!r.ok()) return r.status();
    if (r->type == RedisReply::Type::kNil) return std::optional<int>();
    int64_t cap = 0;
    if (r->type != RedisReply::Type::kString || r->str.size() > 12 ||
        !absl::SimpleAtoi(r->str, &cap) || cap < 1 || cap > kMaxCap) {
      return absl::DataLossError(absl::StrCat(
          "redis key ", CapKey(provider), " on ", address_,
          " does not hold a cap (a positive integer); delete it and the controller rewrites it"));
    }
    return std::optional<int>(static_cast<int>(cap));
  }

  std::string Describe() const override { return absl::StrCat("redis ", address_); }

  bool CountsSlots() const override { return true; }

  absl::StatusOr<std::optional<std::string>> TakeSlot(const std::string& provider,
                                                      int cap) override {
    std::string holder = absl::StrCat(holder_prefix_, next_holder_.fetch_add(1));
    {
      runloom::MutexLock l(&mu_);
      absl::StatusOr<RedisReply> r =
          RetriedLocked(l, {"EVAL", kTakeScript, "1", SlotsKey(provider),
                            absl::StrCat(std::max(1, cap)), absl::StrCat(slot_ttl_ms_), holder});
      if (!r.ok()) return r.status();
      if (r->type != RedisReply::Type::kInteger) {
        return absl::UnavailableError(absl::StrCat(
            "redis ", address_, " refused to take a slot in ", SlotsKey(provider), ": ", r->str));
      }
      if (r->integer == 0) return std::optional<std::string>();
      held_[provider].insert(holder);
    }
    renewer_.Start();  // idempotent while running
    return std::optional<std::string>(std::move(holder));
  }

  absl::Status ReturnSlot(const std::string& provider, const std::string& holder) override {
    runloom::MutexLock l(&mu_);
    auto it = held_.find(provider);
    if (it != held_.end()) {
      it->second.erase(holder);
      if (it->second.empty()) held_.erase(it);
    }
    absl::StatusOr<RedisReply> r = RetriedLocked(l, {"ZREM", SlotsKey(provider), holder});
    if (!r.ok()) return r.status();
    if (r->type == RedisReply::Type::kError) {
      return absl::UnavailableError(
          absl::StrCat("redis ", address_, " refused ZREM ", SlotsKey(provider), ": ", r->str));
    }
    return absl::OkStatus();
  }

 private:
  std::string CapKey(const std::string& provider) const {
    return absl::StrCat(key_prefix_, ":llm_cap:", provider);
  }
  std::string SlotsKey(const std::string& provider) const {
    return absl::StrCat(key_prefix_, ":llm_slots:", provider);
  }

  // One command, sent again once when a connection that was up broke (a
  // Redis restart): both scripts and ZREM are idempotent.
  absl::StatusOr<RedisReply> RetriedLocked(const runloom::MutexLock&,
                                           const std::vector<std::string>& argv)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const bool was_connected = client_.connected();
    absl::StatusOr<RedisReply> r = client_.Command(argv);
    if (!r.ok() && was_connected && r.status().code() == absl::StatusCode::kUnavailable) {
      r = client_.Command(argv);
    }
    return r;
  }

  // The renewer's tick. A failure is left to the next tick: a slot lives
  // three periods, so one missed renewal loses nothing.
  void Renew() ABSL_LOCKS_EXCLUDED(mu_) {
    runloom::MutexLock l(&mu_);
    for (const auto& [provider, holders] : held_) {
      std::vector<std::string> argv = {"EVAL", kRenewScript, "1", SlotsKey(provider),
                                       absl::StrCat(slot_ttl_ms_)};
      argv.insert(argv.end(), holders.begin(), holders.end());
      (void)RetriedLocked(l, argv);
    }
  }

  // Constant after construction.
  const std::string key_prefix_;
  const std::string address_;
  const std::string holder_prefix_;
  const int64_t slot_ttl_ms_;

  std::atomic<int64_t> next_holder_{0};
  runloom::Mutex mu_;
  RedisClient client_ ABSL_GUARDED_BY(mu_);
  // provider -> the holders of this board's slots, renewed until returned.
  absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>> held_ ABSL_GUARDED_BY(mu_);
  PeriodicTask renewer_;  // last: stopped before the rest goes
};

}  // namespace

std::shared_ptr<CapBoard> NewRedisCapBoard(RedisUrl url, std::string key_prefix,
                                           RedisClientOptions options, RedisSlotOptions slots) {
  return std::make_shared<RedisCapBoard>(std::move(url), std::move(key_prefix), options, slots);
}

}  // namespace runloom::redis
