// StageEventsSetting (commands.h): --stage-events and its environment.
#include "cli/commands.h"
#include "redis/redis_publisher.h"

#include "absl/strings/str_cat.h"

#include <cstdlib>

namespace runloom::cli {

absl::StatusOr<StageEventOptions> StageEventsSetting(const std::string& flag) {
  StageEventOptions out;
  std::string source = "--stage-events";
  std::string url = flag;
  if (url.empty()) {
    const char* env = std::getenv("RUNLOOM_STAGE_EVENTS");
    url = env != nullptr ? env : "";
    source = "RUNLOOM_STAGE_EVENTS";
  }
  if (url.empty()) return out;  // off: no Redis at all
  absl::StatusOr<std::shared_ptr<MessagePublisher>> publisher = redis::NewRedisPublisher(url);
  if (!publisher.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", publisher.status().message()));
  }
  out.publisher = *std::move(publisher);
  if (const char* prefix = std::getenv("RUNLOOM_STAGE_EVENTS_PREFIX");
      prefix != nullptr && *prefix != '\0') {
    out.channel_prefix = prefix;
  }
  return out;
}

}  // namespace runloom::cli
