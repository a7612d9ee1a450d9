#include "transport/redis/redis_cap_board.h"

#include "runloom/mutex.h"

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include <algorithm>
#include <cstdint>

namespace runloom::redis {
namespace {

constexpr int64_t kMaxCap = 1'000'000;

class RedisCapBoard final : public CapBoard {
 public:
  RedisCapBoard(RedisUrl url, std::string key_prefix, RedisClientOptions options)
      : key_prefix_(std::move(key_prefix)),
        address_(url.Address()),
        client_(std::move(url), options) {}

  absl::Status Publish(const std::string& provider, int cap, absl::Duration ttl) override {
    const int64_t ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(ttl));
    runloom::MutexLock l(&mu_);
    absl::StatusOr<RedisReply> r =
        client_.Command({"SET", Key(provider), absl::StrCat(cap), "PX", absl::StrCat(ms)});
    if (!r.ok()) return r.status();
    if (r->type == RedisReply::Type::kError) {
      return absl::UnavailableError(
          absl::StrCat("redis ", address_, " refused SET ", Key(provider), ": ", r->str));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::optional<int>> Read(const std::string& provider) override {
    runloom::MutexLock l(&mu_);
    absl::StatusOr<RedisReply> r = client_.Command({"GET", Key(provider)});
    if (!r.ok()) return r.status();
    if (r->type == RedisReply::Type::kNil) return std::optional<int>();
    int64_t cap = 0;
    if (r->type != RedisReply::Type::kString || r->str.size() > 12 ||
        !absl::SimpleAtoi(r->str, &cap) || cap < 1 || cap > kMaxCap) {
      return absl::DataLossError(absl::StrCat(
          "redis key ", Key(provider), " on ", address_,
          " does not hold a cap (a positive integer); delete it and the controller rewrites it"));
    }
    return std::optional<int>(static_cast<int>(cap));
  }

  std::string Describe() const override { return absl::StrCat("redis ", address_); }

 private:
  std::string Key(const std::string& provider) const {
    return absl::StrCat(key_prefix_, ":llm_cap:", provider);
  }

  const std::string key_prefix_;
  const std::string address_;
  runloom::Mutex mu_;
  RedisClient client_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::shared_ptr<CapBoard> NewRedisCapBoard(RedisUrl url, std::string key_prefix,
                                           RedisClientOptions options) {
  return std::make_shared<RedisCapBoard>(std::move(url), std::move(key_prefix), options);
}

}  // namespace runloom::redis
