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
#include <cmath>
#include <cstdint>
#include <limits.h>
#include <optional>
#include <string_view>
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

// KEYS[1] the controller lease; ARGV: candidate, lease in ms. Takes a free
// (or expired: the server dropped it) lease, renews the candidate's own,
// and returns the holder either way.
constexpr char kLeadScript[] = R"lua(
local holder = redis.call('GET', KEYS[1])
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return ARGV[1]
end
if holder == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return holder
)lua";

// KEYS[1] the cap, KEYS[2] the lease; ARGV: leader, cap, TTL in ms.
// 1 = published, 0 = the leader does not hold the lease (nothing written).
constexpr char kPublishScript[] = R"lua(
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
)lua";

// KEYS[1] the cap; ARGV: cap, TTL in ms. Lowers the cap (or sets one where
// none is fresh); 0 = the cap was already as low.
constexpr char kCutScript[] = R"lua(
local now = tonumber(redis.call('GET', KEYS[1]))
if now and now <= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
)lua";

// KEYS[1] the sense stream; ARGV: entries kept, key TTL in ms, then the
// report's field/value pairs. XADD trimmed to about the entries kept; the
// key PEXPIREs so a deployment gone leaves nothing behind.
constexpr char kReportScript[] = R"lua(
local fields = {}
for i = 3, #ARGV do fields[#fields + 1] = ARGV[i] end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(fields))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return id
)lua";

// Reports kept per provider (a few minutes of a large deployment's ticks),
// read at most per call, and how long the stream outlives its last report.
constexpr int64_t kReportsKept = 4096;
constexpr int64_t kReportsRead = 1000;
constexpr int64_t kSenseTtlMs = 10 * 60 * 1000;

// A report's fields in the stream (docs/formats/redis-streams.md). Every
// count is a decimal integer in [0, 10^12]; durations in microseconds.
constexpr int64_t kMaxCount = 1'000'000'000'000;

void EncodeReport(const SenseReport& r, std::vector<std::string>& argv) {
  auto add = [&argv](const char* name, int64_t v) {
    argv.push_back(name);
    argv.push_back(absl::StrCat(std::clamp<int64_t>(v, 0, kMaxCount)));
  };
  argv.push_back("reporter");
  argv.push_back(r.reporter);
  add("ok", r.ok);
  add("rate_limited", r.rate_limited);
  add("errors", r.errors);
  add("waited", r.waited ? 1 : 0);
  add("latency_us", absl::ToInt64Microseconds(r.latency_sum));
  if (r.limit_requests) add("limit_requests", *r.limit_requests);
  if (r.cut) add("cut", *r.cut);
  if (r.cut_from) add("cut_from", *r.cut_from);
  add("in_flight", r.in_flight);
  add("pool_size", r.pool_size);
  add("pool_acquires", r.pool_acquires);
  add("pool_waited", r.pool_waited);
  add("pool_exhausted", r.pool_exhausted);
  add("pool_wait_us", absl::ToInt64Microseconds(r.pool_wait));
  if (r.cpu_busy) add("cpu_permille", std::lround(*r.cpu_busy * 1000));
}

// The numeric fields of a report, by name (values already in [0, 10^12]).
using ReportField = void (*)(SenseReport&, int64_t);
int Small(int64_t v) { return static_cast<int>(std::min<int64_t>(v, 1'000'000)); }
// Never destroyed (a static of a type with a destructor).
const absl::flat_hash_map<std::string_view, ReportField>& ReportFields() {
  static const auto* const fields = new absl::flat_hash_map<std::string_view, ReportField>{
      {"ok", [](SenseReport& r, int64_t v) { r.ok = v; }},
      {"rate_limited", [](SenseReport& r, int64_t v) { r.rate_limited = v; }},
      {"errors", [](SenseReport& r, int64_t v) { r.errors = v; }},
      {"waited", [](SenseReport& r, int64_t v) { r.waited = v != 0; }},
      {"latency_us", [](SenseReport& r, int64_t v) { r.latency_sum = absl::Microseconds(v); }},
      {"limit_requests", [](SenseReport& r, int64_t v) { r.limit_requests = v; }},
      {"cut", [](SenseReport& r, int64_t v) { r.cut = std::max(1, Small(v)); }},
      {"cut_from", [](SenseReport& r, int64_t v) { r.cut_from = std::max(1, Small(v)); }},
      {"in_flight", [](SenseReport& r, int64_t v) { r.in_flight = Small(v); }},
      {"pool_size", [](SenseReport& r, int64_t v) { r.pool_size = Small(v); }},
      {"pool_acquires", [](SenseReport& r, int64_t v) { r.pool_acquires = v; }},
      {"pool_waited", [](SenseReport& r, int64_t v) { r.pool_waited = v; }},
      {"pool_exhausted", [](SenseReport& r, int64_t v) { r.pool_exhausted = v; }},
      {"pool_wait_us", [](SenseReport& r, int64_t v) { r.pool_wait = absl::Microseconds(v); }},
      {"cpu_permille",
       [](SenseReport& r, int64_t v) {
         r.cpu_busy = static_cast<double>(std::min<int64_t>(v, 1000)) / 1000.0;
       }},
  };
  return *fields;
}

// nullopt when the entry is not a report this version writes: a field list
// of odd length, a count out of range, no reporter. Unknown fields are
// skipped (a newer worker's).
std::optional<SenseReport> DecodeReport(const RedisReply& fields) {
  if (fields.type != RedisReply::Type::kArray || fields.elements.size() % 2 != 0 ||
      fields.elements.size() > 64) {
    return std::nullopt;
  }
  SenseReport r;
  for (size_t i = 0; i < fields.elements.size(); i += 2) {
    const RedisReply& name = fields.elements[i];
    const RedisReply& value = fields.elements[i + 1];
    if (name.type != RedisReply::Type::kString || value.type != RedisReply::Type::kString) {
      return std::nullopt;
    }
    if (name.str == "reporter") {
      if (value.str.empty() || value.str.size() > 512) return std::nullopt;
      r.reporter = value.str;
      continue;
    }
    int64_t v = 0;
    if (value.str.size() > 13 || !absl::SimpleAtoi(value.str, &v) || v < 0 || v > kMaxCount) {
      return std::nullopt;
    }
    if (auto field = ReportFields().find(name.str); field != ReportFields().end()) {
      field->second(r, v);
    }
  }
  if (r.reporter.empty()) return std::nullopt;
  return r;
}

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

  absl::StatusOr<std::string> Lead(const std::string& provider, const std::string& candidate,
                                   absl::Duration lease) override {
    runloom::MutexLock l(&mu_);
    absl::StatusOr<RedisReply> r = RetriedLocked(
        l, {"EVAL", kLeadScript, "1", LeaseKey(provider), candidate, absl::StrCat(Ms(lease))});
    if (!r.ok()) return r.status();
    if (r->type != RedisReply::Type::kString || r->str.empty() || r->str.size() > 512) {
      return absl::UnavailableError(absl::StrCat("redis ", address_, " refused the lease ",
                                                 LeaseKey(provider), ": ", r->str));
    }
    return r->str;
  }

  absl::StatusOr<bool> Publish(const std::string& provider, const std::string& leader, int cap,
                               absl::Duration ttl) override {
    runloom::MutexLock l(&mu_);
    absl::StatusOr<RedisReply> r =
        RetriedLocked(l, {"EVAL", kPublishScript, "2", CapKey(provider), LeaseKey(provider), leader,
                          absl::StrCat(cap), absl::StrCat(Ms(ttl))});
    if (!r.ok()) return r.status();
    if (r->type != RedisReply::Type::kInteger) {
      return absl::UnavailableError(
          absl::StrCat("redis ", address_, " refused to publish ", CapKey(provider), ": ", r->str));
    }
    return r->integer == 1;
  }

  absl::Status Cut(const std::string& provider, int cap, absl::Duration ttl) override {
    runloom::MutexLock l(&mu_);
    absl::StatusOr<RedisReply> r = RetriedLocked(
        l, {"EVAL", kCutScript, "1", CapKey(provider), absl::StrCat(cap), absl::StrCat(Ms(ttl))});
    if (!r.ok()) return r.status();
    if (r->type != RedisReply::Type::kInteger) {
      return absl::UnavailableError(
          absl::StrCat("redis ", address_, " refused to cut ", CapKey(provider), ": ", r->str));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Report(const std::string& provider,
                                     const SenseReport& report) override {
    std::vector<std::string> argv = {"EVAL",
                                     kReportScript,
                                     "1",
                                     SenseKey(provider),
                                     absl::StrCat(kReportsKept),
                                     absl::StrCat(kSenseTtlMs)};
    EncodeReport(report, argv);
    runloom::MutexLock l(&mu_);
    // Not retried: a report sent twice would count its calls twice, and one
    // lost report is one tick of telemetry.
    absl::StatusOr<RedisReply> r = client_.Command(argv);
    if (!r.ok()) return r.status();
    if (r->type != RedisReply::Type::kString) {
      return absl::UnavailableError(
          absl::StrCat("redis ", address_, " refused XADD ", SenseKey(provider), ": ", r->str));
    }
    return r->str;
  }

  absl::StatusOr<std::vector<SenseReport>> ReadReports(const std::string& provider,
                                                       std::string* after,
                                                       int* malformed) override {
    if (malformed != nullptr) *malformed = 0;
    const std::string from = after->empty() ? "-" : absl::StrCat("(", *after);
    runloom::MutexLock l(&mu_);
    absl::StatusOr<RedisReply> r = RetriedLocked(
        l, {"XRANGE", SenseKey(provider), from, "+", "COUNT", absl::StrCat(kReportsRead)});
    if (!r.ok()) return r.status();
    if (r->type != RedisReply::Type::kArray) {
      return absl::UnavailableError(
          absl::StrCat("redis ", address_, " refused XRANGE ", SenseKey(provider), ": ", r->str));
    }
    std::vector<SenseReport> out;
    for (const RedisReply& entry : r->elements) {
      if (entry.type != RedisReply::Type::kArray || entry.elements.size() != 2 ||
          entry.elements[0].type != RedisReply::Type::kString) {
        if (malformed != nullptr) ++*malformed;
        continue;
      }
      *after = entry.elements[0].str;
      std::optional<SenseReport> report = DecodeReport(entry.elements[1]);
      if (report.has_value()) {
        out.push_back(*std::move(report));
      } else if (malformed != nullptr) {
        ++*malformed;
      }
    }
    return out;
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
  std::string LeaseKey(const std::string& provider) const {
    return absl::StrCat(key_prefix_, ":llm_controller:", provider);
  }
  std::string SenseKey(const std::string& provider) const {
    return absl::StrCat(key_prefix_, ":llm_sense:", provider);
  }
  static int64_t Ms(absl::Duration d) { return std::max<int64_t>(1, absl::ToInt64Milliseconds(d)); }

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
