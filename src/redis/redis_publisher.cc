#include "redis/redis_publisher.h"

#include "runloom/mutex.h"

#include "redis/redis_client.h"

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"

#include <utility>

namespace runloom::redis {
namespace {

class RedisPublisher final : public MessagePublisher {
 public:
  RedisPublisher(RedisUrl url, absl::Duration timeout)
      : client_(std::move(url), {.connect_timeout = timeout, .command_timeout = timeout}) {}

  absl::Status Publish(const std::string& channel, const std::string& payload) override
      ABSL_LOCKS_EXCLUDED(mu_) {
    runloom::MutexLock l(&mu_);
    absl::StatusOr<RedisReply> r = client_.Command({"PUBLISH", channel, payload});
    if (!r.ok()) return r.status();  // kUnavailable; the connection is dropped
    if (r->type == RedisReply::Type::kError) {
      return absl::FailedPreconditionError(absl::StrCat("PUBLISH refused: ", r->str));
    }
    return absl::OkStatus();
  }

  bool connected() const override ABSL_LOCKS_EXCLUDED(mu_) {
    runloom::MutexLock l(&mu_);
    return client_.connected();
  }

 private:
  mutable runloom::Mutex mu_;
  RedisClient client_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::shared_ptr<MessagePublisher>> NewRedisPublisher(const std::string& url,
                                                                    absl::Duration timeout) {
  absl::StatusOr<RedisUrl> parsed = ParseRedisUrl(url);
  if (!parsed.ok()) return absl::InvalidArgumentError(parsed.status().message());
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("Redis publisher: timeout must be positive (default 250ms)");
  }
  return std::make_shared<RedisPublisher>(*std::move(parsed), timeout);
}

}  // namespace runloom::redis
