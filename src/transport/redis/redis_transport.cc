#include "transport/redis/redis_transport.h"

#include "runloom/clock.h"
#include "runloom/mutex.h"

#include "core/log.h"
#include "core/status_macros.h"
#include "transport/claim_helpers.h"

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <utility>

namespace runloom::transport_internal {
namespace {

using redis::RedisClient;
using redis::RedisReply;
using redis::RedisUrl;

constexpr char kGroup[] = "runloom";
// How long (authority time) a dead-lettering may take before another Claim
// retries it (the database side records each message once).
constexpr absl::Duration kDeadLetterHold = absl::Seconds(30);
// After a connection attempt failed, commands fail at once for this long
// instead of each waiting out the connect timeout (a relay pass over many
// rows, or every claim, against a Redis that does not answer).
constexpr absl::Duration kDownPause = absl::Milliseconds(500);
// How often WaitForMessages looks at Redis and at the authority's clock.
constexpr absl::Duration kPollInterval = absl::Milliseconds(100);
// Dead-letter stream entries kept (approximately); the database keeps all.
constexpr char kDeadStreamMaxLen[] = "10000";

// KEYS: stream, claims. ARGV: group, consumer, max, now, deadline, cap,
// dead-letter hold deadline. Returns {claimed, to_dead_letter}, each a list
// of {id, run, deliveries}. Reclaims due messages first, then reads new ones.
// A message being dead-lettered is held by the consumer 'dead-letters'.
constexpr char kClaimScript[] = R"lua(
local stream, claims = KEYS[1], KEYS[2]
local group, consumer = ARGV[1], ARGV[2]
local max, cap = tonumber(ARGV[3]), tonumber(ARGV[6])
local function run_of(fields)
  for i = 1, #fields, 2 do
    if fields[i] == 'run' then return fields[i + 1] end
  end
  return ''
end
local out, dead = {}, {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', claims, '-inf', ARGV[4], 'LIMIT', 0, max)) do
  local p = redis.call('XPENDING', stream, group, id, id, 1)
  local e = redis.call('XRANGE', stream, id, id)
  if #p == 0 or #e == 0 then
    redis.call('ZREM', claims, id)
    redis.call('XACK', stream, group, id)
    redis.call('XDEL', stream, id)
  else
    local n = tonumber(p[1][4])
    if n >= cap then
      redis.call('XCLAIM', stream, group, 'dead-letters', 0, id, 'RETRYCOUNT', n, 'JUSTID')
      redis.call('ZADD', claims, ARGV[7], id)
      dead[#dead + 1] = {id, run_of(e[1][2]), n}
    else
      redis.call('XCLAIM', stream, group, consumer, 0, id, 'RETRYCOUNT', n + 1, 'JUSTID')
      redis.call('ZADD', claims, ARGV[5], id)
      out[#out + 1] = {id, run_of(e[1][2]), n + 1}
    end
  end
end
if #out < max then
  local r = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', max - #out,
                       'STREAMS', stream, '>')
  if r then
    for _, e in ipairs(r[1][2]) do
      redis.call('ZADD', claims, ARGV[5], e[1])
      out[#out + 1] = {e[1], run_of(e[2]), 1}
    end
  end
end
return {out, dead}
)lua";

// KEYS: stream, claims, index, dead stream. ARGV: group, id, run, "1" to
// copy the message to the dead-letter stream first (only while it is still
// held), deliveries, reason, the dead stream's length cap. Removes the
// message for good (ack, residue, dead letter).
constexpr char kFinishScript[] = R"lua(
if ARGV[4] == '1' and redis.call('ZSCORE', KEYS[2], ARGV[2]) then
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[7], '*', 'message_id', ARGV[2],
             'run', ARGV[3], 'deliveries', ARGV[5], 'reason', ARGV[6])
end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[2])
if redis.call('HGET', KEYS[3], ARGV[3]) == ARGV[2] then redis.call('HDEL', KEYS[3], ARGV[3]) end
return 1
)lua";

// KEYS: stream, claims, index. ARGV: run. A message that no consumer holds
// yet is the pending message (not doubled); otherwise a new one.
constexpr char kPublishScript[] = R"lua(
local cur = redis.call('HGET', KEYS[3], ARGV[1])
if cur and not redis.call('ZSCORE', KEYS[2], cur)
   and #redis.call('XRANGE', KEYS[1], cur, cur) > 0 then
  return cur
end
local id = redis.call('XADD', KEYS[1], '*', 'run', ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], id)
return id
)lua";

// KEYS: stream, index. ARGV: run ids. For each, 1 when its indexed entry is
// still in the stream. An index entry whose stream entry is gone (deleted
// by hand, trimmed) is dropped, so the reconciler enqueues the run again.
constexpr char kFindScript[] = R"lua(
local out = {}
for i, run in ipairs(ARGV) do
  local id = redis.call('HGET', KEYS[2], run)
  out[i] = 0
  if id then
    if #redis.call('XRANGE', KEYS[1], id, id) > 0 then
      out[i] = 1
    else
      redis.call('HDEL', KEYS[2], run)
    end
  end
end
return out
)lua";

// KEYS: stream, claims. ARGV: group, id. A held message becomes due at
// once, its delivery given back (the next claim counts it again).
constexpr char kReleaseScript[] = R"lua(
if not redis.call('ZSCORE', KEYS[2], ARGV[2]) then return 0 end
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 then return 0 end
local n = math.max(tonumber(p[1][4]) - 1, 0)
redis.call('XCLAIM', KEYS[1], ARGV[1], 'released', 0, ARGV[2], 'RETRYCOUNT', n, 'JUSTID')
redis.call('ZADD', KEYS[2], 0, ARGV[2])
return 1
)lua";

// KEYS: stream, claims. ARGV: group, now. 1 when a claim could get a
// message: one is due, or one was never delivered (every delivered entry is
// pending until it is deleted, so the stream is longer than the pending list).
constexpr char kVisibleScript[] = R"lua(
if #redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[2], 'LIMIT', 0, 1) > 0 then return 1 end
local len = redis.call('XLEN', KEYS[1])
if len == 0 then return 0 end
local p = redis.pcall('XPENDING', KEYS[1], ARGV[1])
if type(p) ~= 'table' or p.err then return 1 end
if len > tonumber(p[1]) then return 1 end
return 0
)lua";

int64_t Micros(absl::Time t) { return absl::ToUnixMicros(t); }

// A stream entry id: "ms" or "ms-seq", both decimal.
bool ParseStreamId(const std::string& id, uint64_t* ms, uint64_t* seq) {
  std::vector<absl::string_view> parts = absl::StrSplit(id, absl::MaxSplits('-', 1));
  *seq = 0;
  for (absl::string_view p : parts) {
    if (p.empty() || p.find_first_not_of("0123456789") != absl::string_view::npos) return false;
  }
  if (!absl::SimpleAtoi(parts[0], ms)) return false;
  return parts.size() == 1 || absl::SimpleAtoi(parts[1], seq);
}

absl::Status CheckMessageId(const std::string& id) {
  uint64_t ms = 0;
  uint64_t seq = 0;
  if (ParseStreamId(id, &ms, &seq)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("queue message id '", id, "' is not a Redis stream entry id"));
}

bool StreamIdLess(const std::string& a, const std::string& b) {
  uint64_t ams = 0, aseq = 0, bms = 0, bseq = 0;
  ParseStreamId(a, &ams, &aseq);
  ParseStreamId(b, &bms, &bseq);
  return std::tie(ams, aseq) < std::tie(bms, bseq);
}

// The outbox, with every failed publish logged (the row keeps the reason).
class LoggingOutbox final : public Outbox {
 public:
  LoggingOutbox(Outbox* inner, std::string server) : inner_(inner), server_(std::move(server)) {}
  absl::StatusOr<std::vector<OutboxRow>> Pending(int max) override { return inner_->Pending(max); }
  absl::Status MarkPublished(const std::vector<std::string>& row_ids) override {
    return inner_->MarkPublished(row_ids);
  }
  absl::Status MarkFailed(const std::string& row_id, const std::string& reason) override {
    Log(DefaultLogger(), LogLevel::kWarning, "outbox relay to Redis ", server_, ": row ", row_id,
        " not published (retried after a backoff): ", reason);
    return inner_->MarkFailed(row_id, reason);
  }

 private:
  Outbox* const inner_;
  const std::string server_;
};

class RedisTransport final : public Transport {
 public:
  RedisTransport(const RedisUrl& url, RedisTransportOptions options,
                 std::shared_ptr<StreamDatabase> db)
      : options_(std::move(options)),
        db_(std::move(db)),
        stream_(options_.key_prefix + ":jobs"),
        claims_(options_.key_prefix + ":claims"),
        index_(options_.key_prefix + ":runs"),
        dead_(options_.key_prefix + ":dead"),
        address_(url.Address()),
        outbox_(db_.get(), url.Address()),
        client_(url, options_.client) {
    relay_ = NewOutboxRelay(&outbox_, this, options_.relay_batch);
  }

  ~RedisTransport() override {
    stop_ = true;
    db_->Interrupt();
    if (relay_thread_.joinable()) relay_thread_.join();
  }

  // Connects, creates the group, starts the relay thread.
  absl::Status Start() {
    {
      runloom::MutexLock l(&redis_mu_);
      RUNLOOM_RETURN_IF_ERROR(EnsureGroupLocked(l));
    }
    relay_thread_ = std::thread([this] { RelayLoop(); });
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<QueueMessage>> Claim(const std::string& consumer, int max,
                                                  absl::Duration visibility) override;
  absl::Status Ack(const QueueMessage& message) override {
    RUNLOOM_RETURN_IF_ERROR(CheckMessageId(message.id));
    return Finish(message.id, message.run_id, nullptr);
  }
  absl::Status Release(const QueueMessage& message) override {
    RUNLOOM_RETURN_IF_ERROR(CheckMessageId(message.id));
    return Eval(kReleaseScript, {stream_, claims_}, {kGroup, message.id}).status();
  }
  void WaitForMessages(absl::Time deadline) override;
  void Interrupt() override { db_->Interrupt(); }
  absl::Status Publish(const std::string& run_id) override {
    if (run_id.empty()) return absl::InvalidArgumentError("Publish: run id is empty");
    return Eval(kPublishScript, {stream_, claims_, index_}, {run_id}).status();
  }
  absl::StatusOr<MessagePresence> FindMessages(const std::vector<std::string>& run_ids) override;
  absl::StatusOr<std::vector<DeadLetter>> ListDeadLetters(int limit) override {
    return db_->ListDeadLetters(limit);
  }
  absl::StatusOr<int64_t> CountDeadLetters() override { return db_->CountDeadLetters(); }
  absl::Status Redrive(const std::string& dead_letter_id) override {
    return db_->Redrive(dead_letter_id);
  }
  absl::StatusOr<int> RedriveAll() override { return db_->RedriveAll(); }

 private:
  struct DeadMessage {
    int deliveries = 0;
    std::string reason;
  };

  // Runs `script` (EVAL; argv only). On NOGROUP (Redis restarted without
  // persistence, or the stream was deleted) creates the group and runs it
  // once more. A Redis error reply is kUnavailable when Redis says it is
  // busy or loading, kInternal otherwise.
  absl::StatusOr<RedisReply> Eval(const char* script, const std::vector<std::string>& keys,
                                  const std::vector<std::string>& args)
      ABSL_LOCKS_EXCLUDED(redis_mu_);
  absl::Status EnsureGroupLocked(const runloom::MutexLock& l)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(redis_mu_);
  // client_.Command, sent once more on a new connection when an open one
  // turns out broken (Redis restarted since the last command). At least
  // once: a script that ran before the break may run twice, which a claim
  // (reclaimed at its deadline) and a publish (deduplicated) tolerate.
  // Fails at once with the last error within kDownPause of a failed connect.
  absl::StatusOr<RedisReply> CommandLocked(const runloom::MutexLock& l,
                                           const std::vector<std::string>& argv)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(redis_mu_);
  // Removes a message for good; with `dead`, copies it to the dead stream.
  absl::Status Finish(const std::string& id, const std::string& run_id, const DeadMessage* dead);
  // Publishes what the outbox holds now: every batch, or only the first
  // (a claim's pass, so a burst of new runs does not hold up its claim; the
  // relay thread publishes the rest).
  absl::Status RelayPass(bool all) ABSL_LOCKS_EXCLUDED(relay_mu_);
  void RelayLoop();

  // Constant after construction.
  const RedisTransportOptions options_;
  const std::shared_ptr<StreamDatabase> db_;
  const std::string stream_;
  const std::string claims_;
  const std::string index_;
  const std::string dead_;
  const std::string address_;  // host:port, for logs
  LoggingOutbox outbox_;
  std::unique_ptr<OutboxRelay> relay_;

  runloom::Mutex redis_mu_;
  RedisClient client_ ABSL_GUARDED_BY(redis_mu_);
  absl::Time down_until_ ABSL_GUARDED_BY(redis_mu_) = absl::InfinitePast();
  absl::Status down_ ABSL_GUARDED_BY(redis_mu_);  // why the last connect failed

  // One relay pass at a time in this process, so rows are published in
  // their order (a Claim's pass waits for the thread's).
  runloom::Mutex relay_mu_;

  SignalWaiter waiter_;

  std::atomic<bool> stop_{false};
  std::thread relay_thread_;  // RelayLoop; joined by the destructor
};

absl::Status RedisTransport::EnsureGroupLocked(const runloom::MutexLock& l) {
  RUNLOOM_ASSIGN_OR_RETURN(
      RedisReply r, CommandLocked(l, {"XGROUP", "CREATE", stream_, kGroup, "0", "MKSTREAM"}));
  if (r.type == RedisReply::Type::kError && !absl::StartsWith(r.str, "BUSYGROUP")) {
    return absl::UnavailableError(
        absl::StrCat("Redis ", client_.url().Address(), ": creating the consumer group: ", r.str));
  }
  return absl::OkStatus();
}

absl::StatusOr<RedisReply> RedisTransport::CommandLocked(const runloom::MutexLock&,
                                                         const std::vector<std::string>& argv) {
  if (!client_.connected() && RealClock()->Now() < down_until_) return down_;
  const bool was_connected = client_.connected();
  absl::StatusOr<RedisReply> r = client_.Command(argv);
  if (!r.ok() && was_connected && r.status().code() == absl::StatusCode::kUnavailable) {
    r = client_.Command(argv);
  }
  if (!r.ok() && !client_.connected()) {
    down_until_ = RealClock()->Now() + kDownPause;
    down_ = r.status();
  }
  return r;
}

absl::StatusOr<RedisReply> RedisTransport::Eval(const char* script,
                                                const std::vector<std::string>& keys,
                                                const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"EVAL", script, absl::StrCat(keys.size())};
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  runloom::MutexLock l(&redis_mu_);
  for (int attempt = 0;; ++attempt) {
    RUNLOOM_ASSIGN_OR_RETURN(RedisReply r, CommandLocked(l, argv));
    if (r.type != RedisReply::Type::kError) return r;
    if (absl::StrContains(r.str, "NOGROUP") && attempt == 0) {
      Log(DefaultLogger(), LogLevel::kWarning, "Redis ", client_.url().Address(),
          ": the consumer group of ", stream_,
          " is gone (Redis restarted without persistence?); creating it again. Lost messages are "
          "re-enqueued by the reconciler");
      RUNLOOM_RETURN_IF_ERROR(EnsureGroupLocked(l));
      continue;
    }
    for (absl::string_view transient : {"LOADING", "BUSY", "OOM", "READONLY", "MASTERDOWN"}) {
      if (absl::StrContains(r.str, transient)) {
        return absl::UnavailableError(absl::StrCat("Redis ", client_.url().Address(), ": ", r.str));
      }
    }
    return absl::InternalError(absl::StrCat("Redis ", client_.url().Address(), ": ", r.str));
  }
}

absl::Status RedisTransport::Finish(const std::string& id, const std::string& run_id,
                                    const DeadMessage* dead) {
  return Eval(kFinishScript, {stream_, claims_, index_, dead_},
              {kGroup, id, run_id, dead != nullptr ? "1" : "0",
               absl::StrCat(dead != nullptr ? dead->deliveries : 0),
               dead != nullptr ? dead->reason : "", kDeadStreamMaxLen})
      .status();
}

absl::StatusOr<std::vector<QueueMessage>> RedisTransport::Claim(const std::string& consumer,
                                                                int max,
                                                                absl::Duration visibility) {
  RUNLOOM_RETURN_IF_ERROR(transport_internal::CheckClaimArgs(consumer, max, visibility));
  // Rows committed a moment ago are messages too: publish them first.
  RUNLOOM_RETURN_IF_ERROR(RelayPass(/*all=*/false));
  RUNLOOM_ASSIGN_OR_RETURN(absl::Time now, db_->Now());
  const int cap = options_.transport.max_deliveries;
  RUNLOOM_ASSIGN_OR_RETURN(RedisReply r,
                           Eval(kClaimScript, {stream_, claims_},
                                {kGroup, consumer, absl::StrCat(max), absl::StrCat(Micros(now)),
                                 absl::StrCat(Micros(now + visibility)), absl::StrCat(cap),
                                 absl::StrCat(Micros(now + kDeadLetterHold))}));
  if (r.type != RedisReply::Type::kArray || r.elements.size() != 2) {
    return absl::InternalError("Redis claim script: unexpected reply");
  }
  auto parse = [](const RedisReply& list) {
    std::vector<QueueMessage> out;
    for (const RedisReply& e : list.elements) {
      if (e.elements.size() != 3) continue;
      out.push_back(QueueMessage{e.elements[0].str, e.elements[1].str,
                                 static_cast<int>(e.elements[2].integer)});
    }
    return out;
  };
  std::vector<QueueMessage> claimed = parse(r.elements[0]);
  const std::vector<QueueMessage> dead = parse(r.elements[1]);
  std::vector<std::string> runs;
  for (const QueueMessage& m : claimed) runs.push_back(m.run_id);
  for (const QueueMessage& m : dead) runs.push_back(m.run_id);
  absl::flat_hash_set<std::string> queued;
  absl::flat_hash_set<std::string> expired;
  absl::flat_hash_set<std::string> missing;
  if (!runs.empty()) {
    RUNLOOM_ASSIGN_OR_RETURN(StreamDatabase::LeasableRuns l, db_->Leasable(runs));
    queued.insert(l.queued.begin(), l.queued.end());
    expired.insert(l.expired.begin(), l.expired.end());
    missing.insert(l.missing.begin(), l.missing.end());
  }
  auto leasable = [&](const QueueMessage& m) {
    return queued.contains(m.run_id) || (expired.contains(m.run_id) && m.deliveries == 1);
  };
  // Poison (reference 002: "acknowledged and captured rather than retried
  // forever"): an entry that names no run (written to the stream by
  // something else, or damaged), or a run the database does not have,
  // can never be carried out. It is dead-lettered with the reason, now.
  auto poison = [&](const QueueMessage& m) -> std::optional<std::string> {
    if (m.run_id.empty()) {
      return "poison: the stream entry has no 'run' field, so nothing can carry it out";
    }
    if (missing.contains(m.run_id)) {
      return absl::StrCat("poison: the stream entry names run '", m.run_id,
                          "', which the database does not have");
    }
    return std::nullopt;
  };
  auto capture = [&](const QueueMessage& m, std::string reason) -> absl::Status {
    DeadMessage d{m.deliveries, std::move(reason)};
    Log(DefaultLogger(), LogLevel::kError, {.run_id = m.run_id}, "Redis ", address_, ": message ",
        m.id, " dead-lettered: ", d.reason);
    RUNLOOM_RETURN_IF_ERROR(db_->RecordDeadLetter(m.id, m.run_id, d.deliveries, d.reason));
    return Finish(m.id, m.run_id, &d);
  };
  // Residue (see the header): acknowledge it, never return it.
  for (const QueueMessage& m : dead) {
    if (std::optional<std::string> why = poison(m)) {
      RUNLOOM_RETURN_IF_ERROR(capture(m, *std::move(why)));
      continue;
    }
    if (!queued.contains(m.run_id) && !expired.contains(m.run_id)) {
      RUNLOOM_RETURN_IF_ERROR(Finish(m.id, m.run_id, nullptr));
      continue;
    }
    DeadMessage d{m.deliveries, absl::StrCat("delivered ", m.deliveries,
                                             " times without an ack (the cap is ", cap, ")")};
    RUNLOOM_RETURN_IF_ERROR(db_->RecordDeadLetter(m.id, m.run_id, d.deliveries, d.reason));
    RUNLOOM_RETURN_IF_ERROR(Finish(m.id, m.run_id, &d));
  }
  std::vector<QueueMessage> out;
  for (QueueMessage& m : claimed) {
    if (std::optional<std::string> why = poison(m)) {
      RUNLOOM_RETURN_IF_ERROR(capture(m, *std::move(why)));
    } else if (leasable(m)) {
      out.push_back(std::move(m));
    } else {
      RUNLOOM_RETURN_IF_ERROR(Finish(m.id, m.run_id, nullptr));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const QueueMessage& a, const QueueMessage& b) { return StreamIdLess(a.id, b.id); });
  return out;
}

absl::StatusOr<MessagePresence> RedisTransport::FindMessages(
    const std::vector<std::string>& run_ids) {
  MessagePresence out;
  if (run_ids.empty()) return out;
  RUNLOOM_ASSIGN_OR_RETURN(MessagePresence db, db_->FindMessages(run_ids));
  RUNLOOM_ASSIGN_OR_RETURN(RedisReply r, Eval(kFindScript, {stream_, index_}, run_ids));
  if (r.type != RedisReply::Type::kArray || r.elements.size() != run_ids.size()) {
    return absl::InternalError(absl::StrCat("Redis find script on ", index_, ": unexpected reply"));
  }
  absl::flat_hash_set<std::string> pending(db.pending.begin(), db.pending.end());
  for (size_t i = 0; i < run_ids.size(); ++i) {
    if (r.elements[i].integer != 0) pending.insert(run_ids[i]);
  }
  absl::flat_hash_set<std::string> seen;
  for (const std::string& id : run_ids) {
    if (pending.contains(id) && seen.insert(id).second) out.pending.push_back(id);
  }
  out.dead_lettered = std::move(db.dead_lettered);
  return out;
}

// Polls Redis too: other processes' relays publish without telling this one.
void RedisTransport::WaitForMessages(absl::Time deadline) {
  waiter_.Wait(
      deadline, kPollInterval, [&] { return db_->signals(); },
      [&]() -> absl::StatusOr<SignalWaiter::Poll> {
        SignalWaiter::Poll p;
        RUNLOOM_ASSIGN_OR_RETURN(p.now, db_->Now());
        RUNLOOM_ASSIGN_OR_RETURN(RedisReply r, Eval(kVisibleScript, {stream_, claims_},
                                                    {kGroup, absl::StrCat(Micros(p.now))}));
        p.visible = r.integer != 0;
        return p;
      },
      [&](uint64_t seen, absl::Time local) { db_->AwaitSignal(seen, local); });
}

absl::Status RedisTransport::RelayPass(bool all) {
  while (true) {
    RelayResult r;
    {
      // Per batch, so a claim waits for one batch of the thread's at most.
      runloom::MutexLock l(&relay_mu_);
      RUNLOOM_ASSIGN_OR_RETURN(r, relay_->RelayOnce());
    }
    if (!all || r.published + r.failed < options_.relay_batch) return absl::OkStatus();
  }
}

void RedisTransport::RelayLoop() {
  while (!stop_) {
    const uint64_t seen = db_->signals();
    absl::Status s = RelayPass(/*all=*/true);
    if (!s.ok()) {
      Log(DefaultLogger(), LogLevel::kWarning,
          "outbox relay: reading the outbox failed (retrying): ", s.ToString());
    }
    if (stop_) break;
    db_->AwaitSignal(seen, RealClock()->Now() + options_.relay_interval);
  }
}

}  // namespace

absl::Status CheckRedisReachable(const RedisUrl& url, const redis::RedisClientOptions& options) {
  RedisClient client(url, options);
  absl::StatusOr<RedisReply> r = client.Command({"PING"});
  if (!r.ok()) {
    return absl::UnavailableError(absl::StrCat("the Redis queue at ", url.Address(),
                                               " cannot be reached (", r.status().message(),
                                               "); start Redis there, or fix the queue URL"));
  }
  if (r->type == RedisReply::Type::kError) {
    return absl::UnavailableError(
        absl::StrCat("the Redis queue at ", url.Address(), " refused PING: ", r->str));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Transport>> NewRedisTransport(const RedisUrl& url,
                                                             RedisTransportOptions options,
                                                             std::shared_ptr<StreamDatabase> db) {
  if (options.key_prefix.empty()) {
    return absl::InvalidArgumentError("RedisTransportOptions::key_prefix is empty");
  }
  if (options.transport.max_deliveries < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("TransportOptions::max_deliveries must be at least 1, got ",
                     options.transport.max_deliveries));
  }
  if (options.relay_batch < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RedisTransportOptions::relay_batch must be at least 1, got ", options.relay_batch));
  }
  auto t = std::make_unique<RedisTransport>(url, std::move(options), std::move(db));
  RUNLOOM_RETURN_IF_ERROR(t->Start());
  return t;
}

}  // namespace runloom::transport_internal
