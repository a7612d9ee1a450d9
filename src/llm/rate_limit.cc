#include "llm/rate_limit.h"

#include "core/duration.h"

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace runloom {
namespace {

constexpr char kPayloadUrl[] = "runloom.dev/rate_limit";
constexpr int64_t kMaxCount = 1'000'000'000;
constexpr double kMaxRetryAfterSeconds = 24 * 3600;
constexpr size_t kMaxValueBytes = 32;

std::optional<int64_t> ParseCount(absl::string_view value) {
  int64_t n = 0;
  if (value.size() > kMaxValueBytes || !absl::SimpleAtoi(value, &n) || n < 0 || n > kMaxCount) {
    return std::nullopt;
  }
  return n;
}

// "2", "1.5" (seconds, as HTTP sends it) or a duration such as "250ms".
std::optional<absl::Duration> ParseRetryAfter(absl::string_view value) {
  if (value.size() > kMaxValueBytes) return std::nullopt;
  double seconds = 0;
  if (absl::SimpleAtod(value, &seconds)) {
    if (!(seconds >= 0 && seconds <= kMaxRetryAfterSeconds)) return std::nullopt;
    return absl::Seconds(seconds);
  }
  absl::StatusOr<absl::Duration> d = ParseDuration(std::string_view(value.data(), value.size()));
  if (!d.ok() || *d < absl::ZeroDuration() || *d > absl::Seconds(kMaxRetryAfterSeconds)) {
    return std::nullopt;
  }
  return *d;
}

}  // namespace

std::string RateLimitTelemetry::ToString() const {
  std::string out;
  auto add = [&out](const std::string& part) {
    absl::StrAppend(&out, out.empty() ? "" : " ", part);
  };
  if (limit_requests) add(absl::StrCat("limit=", *limit_requests, "/min"));
  if (remaining_requests) add(absl::StrCat("remaining=", *remaining_requests));
  if (retry_after) add(absl::StrCat("retry-after=", runloom::FormatDuration(*retry_after)));
  return out.empty() ? "none" : out;
}

RateLimitTelemetry ParseRateLimitHeaders(
    const std::vector<std::pair<std::string, std::string>>& headers) {
  RateLimitTelemetry out;
  for (const auto& [raw_name, raw_value] : headers) {
    const std::string name = absl::AsciiStrToLower(raw_name);
    const absl::string_view value = absl::StripAsciiWhitespace(raw_value);
    if (name == "retry-after") {
      out.retry_after = ParseRetryAfter(value);
    } else if (name == "x-ratelimit-limit-requests" ||
               name == "anthropic-ratelimit-requests-limit") {  // OpenAI's and Anthropic's names
      out.limit_requests = ParseCount(value);
    } else if (name == "x-ratelimit-remaining-requests" ||
               name == "anthropic-ratelimit-requests-remaining") {
      out.remaining_requests = ParseCount(value);
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> RateLimitHeaders(
    const RateLimitTelemetry& telemetry) {
  std::vector<std::pair<std::string, std::string>> out;
  if (telemetry.retry_after) {
    out.emplace_back("retry-after", absl::StrCat(absl::ToDoubleSeconds(*telemetry.retry_after)));
  }
  if (telemetry.limit_requests) {
    out.emplace_back("x-ratelimit-limit-requests", absl::StrCat(*telemetry.limit_requests));
  }
  if (telemetry.remaining_requests) {
    out.emplace_back("x-ratelimit-remaining-requests", absl::StrCat(*telemetry.remaining_requests));
  }
  return out;
}

void AttachRateLimit(absl::Status& status, const RateLimitTelemetry& telemetry) {
  if (status.ok() || telemetry.empty()) return;
  std::string encoded;
  for (const auto& [name, value] : RateLimitHeaders(telemetry)) {
    absl::StrAppend(&encoded, name, ":", value, "\n");
  }
  status.SetPayload(kPayloadUrl, absl::Cord(encoded));
}

RateLimitTelemetry RateLimitOf(const absl::Status& status) {
  absl::optional<absl::Cord> payload = status.GetPayload(kPayloadUrl);
  if (!payload) return {};
  std::vector<std::pair<std::string, std::string>> headers;
  for (absl::string_view line : absl::StrSplit(std::string(*payload), '\n', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits(':', 1));
    headers.push_back(std::move(kv));
  }
  return ParseRateLimitHeaders(headers);
}

}  // namespace runloom
