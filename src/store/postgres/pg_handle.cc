#include "store/postgres/pg_handle.h"

#include "core/ids.h"
#include "core/log.h"
#include "core/status_macros.h"
#include "store/postgres/pg_migrations.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include <algorithm>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <utility>

namespace runloom::store_internal {
namespace {

constexpr int kTxnAttempts = 5;
constexpr absl::Duration kFirstBackoff = absl::Milliseconds(50);
constexpr absl::Duration kMaxBackoff = absl::Seconds(1);

constexpr char kNow[] = "SELECT runloom_now()";

int64_t Millis(absl::Duration d) { return std::max<int64_t>(1, absl::ToInt64Milliseconds(d)); }

// "id|status|last_event_seq" (the runs trigger's payload) as a RunChange.
std::optional<RunChange> ParseRunChange(absl::string_view payload) {
  std::vector<absl::string_view> parts = absl::StrSplit(payload, '|');
  if (parts.size() != 3) return std::nullopt;
  std::optional<RunStatus> status = ParseRunStatus(std::string(parts[1]));
  int64_t seq = 0;
  if (!status.has_value() || !absl::SimpleAtoi(parts[2], &seq)) return std::nullopt;
  return RunChange{std::string(parts[0]), *status, seq};
}

}  // namespace

PgHandle::PgHandle(std::string url, const PostgresOptions& options)
    : url_(std::move(url)), options_(options) {
  // application_name lets an operator (and the long-transaction sweep) tell
  // runloom's connections from others in pg_stat_activity. JIT off: every
  // statement here is short, and a planner's estimate over the JIT threshold
  // is an artifact that costs a compile of tens of milliseconds per run (the
  // fair selection's walks, whose LIMIT the planner cannot know, are
  // estimated at 10 % of a key's rows for each of 100 keys: 34 ms and more
  // instead of 2 to 4 ms with 10,000 queued; docs/performance.md).
  session_sql_ =
      absl::StrCat("SET search_path TO runloom; SET application_name TO 'runloom'; ",
                   "SET jit TO off; SET statement_timeout TO ", Millis(options.statement_timeout),
                   "; SET lock_timeout TO ", Millis(options.lock_timeout), ";");
  bus_ = options.event_bus != nullptr ? options.event_bus : NewInProcessEventBus();
  logger_ = options.logger != nullptr ? options.logger : DefaultLogger();
}

absl::StatusOr<std::shared_ptr<PgHandle>> PgHandle::Open(const std::string& url,
                                                         const PostgresOptions& options) {
  if (options.pool_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("PostgresOptions::pool_size must be at least 1, got ", options.pool_size));
  }
  if (options.transport.max_deliveries < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("PostgresOptions::transport.max_deliveries must be at least 1, got ",
                     options.transport.max_deliveries));
  }
  char* err = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(url.c_str(), &err);
  if (parsed == nullptr) {
    std::string why = err != nullptr ? err : "unparsable";
    PQfreemem(err);
    absl::StripTrailingAsciiWhitespace(&why);
    return absl::InvalidArgumentError(absl::StrCat("PostgreSQL URL: ", why));
  }
  PQconninfoFree(parsed);
  if (options.long_transaction_limit < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("PostgresOptions::long_transaction_limit is negative");
  }
  if (options.long_transaction_limit > absl::ZeroDuration() &&
      options.long_transaction_sweep_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "PostgresOptions::long_transaction_sweep_interval must be positive while the "
        "long-transaction sweep is on");
  }
  const int64_t connect_s = std::max<int64_t>(1, absl::ToInt64Seconds(options.connect_timeout));
  std::string conninfo = url;
  conninfo += url.find('?') == std::string::npos ? "?" : "&";
  absl::StrAppend(&conninfo, "connect_timeout=", connect_s);
  // libpq has no client-side query timeout: on a network that silently drops
  // packets a call (a lease renewal, say) would wait for the kernel's
  // retransmission limit, about 15 minutes. Unless the URL says otherwise,
  // unacknowledged data fails the connection after 10 s, and an idle one is
  // probed by keepalives, so the lease keeper learns in time that it cannot
  // renew.
  if (url.find("tcp_user_timeout") == std::string::npos) {
    absl::StrAppend(&conninfo, "&tcp_user_timeout=10000");
  }
  if (url.find("keepalives") == std::string::npos) {
    absl::StrAppend(&conninfo, "&keepalives=1&keepalives_idle=10&keepalives_interval=5",
                    "&keepalives_count=2");
  }
  std::shared_ptr<PgHandle> h(new PgHandle(conninfo, options));
  // The first connection is made without retries: a wrong address or a
  // server that is down is the caller's error to see now.
  RUNLOOM_ASSIGN_OR_RETURN(std::unique_ptr<PgConn> first,
                           PgConn::Connect(h->url_, h->session_sql_));
  RUNLOOM_RETURN_IF_ERROR(MigratePostgres(*first, DescribeConninfo(url)));
  {
    runloom::MutexLock l(&h->mu_);
    h->open_ = 1;
    h->idle_.push_back(std::move(first));
  }
  h->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (h->wake_fd_ < 0) return absl::InternalError("eventfd failed");
  h->listener_ = std::thread([raw = h.get()] { raw->ListenLoop(); });
  // A message produced after Open returns must wake this process's waiters:
  // wait (bounded) until the listener listens. If it cannot connect yet, it
  // keeps trying, and the waiters poll meanwhile.
  h->listening_.WaitForNotificationWithTimeout(options.connect_timeout);
  if (options.long_transaction_limit > absl::ZeroDuration()) {
    // Its own application_name, so an operator can tell the sweep's
    // connection from the pool's in pg_stat_activity.
    h->sweeper_ = std::make_unique<LongTransactionSweeper>(
        h->url_, absl::StrCat(h->session_sql_, " SET application_name TO 'runloom-sweep';"),
        options.long_transaction_limit, options.long_transaction_sweep_interval, h->logger_);
    h->sweeper_->Start();
  }
  return h;
}

PgHandle::~PgHandle() {
  if (sweeper_ != nullptr) sweeper_->Stop();
  stop_ = true;
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
  if (listener_.joinable()) listener_.join();
  if (wake_fd_ >= 0) close(wake_fd_);
}

absl::StatusOr<std::unique_ptr<PgConn>> PgHandle::ConnectWithBackoff(absl::Time give_up) {
  absl::Duration backoff = kFirstBackoff;
  while (true) {
    absl::StatusOr<std::unique_ptr<PgConn>> c = PgConn::Connect(url_, session_sql_);
    if (c.ok() || absl::Now() + backoff > give_up) return c;
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

absl::StatusOr<std::unique_ptr<PgConn>> PgHandle::Acquire() {
  const absl::Time give_up = absl::Now() + options_.acquire_timeout;
  {
    runloom::MutexLock l(&mu_);
    auto available = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !idle_.empty() || open_ < options_.pool_size;
    };
    const bool free_now = available();
    const absl::Time asked = absl::Now();
    const bool got = free_now || mu_.AwaitWithDeadline(absl::Condition(&available), give_up);
    if (!free_now) {
      use_.wait += absl::Now() - asked;
      ++(got ? use_.waited : use_.exhausted);
    }
    if (!got) {
      return absl::UnavailableError(absl::StrCat(
          "no free PostgreSQL connection within ", absl::FormatDuration(options_.acquire_timeout),
          " (pool size ", options_.pool_size, "); raise the pool size or lower the load"));
    }
    ++use_.acquires;
    if (!idle_.empty()) {
      std::unique_ptr<PgConn> c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
    ++open_;  // reserved: connect outside the lock
  }
  absl::StatusOr<std::unique_ptr<PgConn>> c = ConnectWithBackoff(give_up);
  if (!c.ok()) {
    runloom::MutexLock l(&mu_);
    --open_;
  }
  return c;
}

PoolUse PgHandle::Use() {
  runloom::MutexLock l(&mu_);
  PoolUse out = use_;
  out.size = options_.pool_size;
  return out;
}

void PgHandle::Return(std::unique_ptr<PgConn> conn) {
  if (conn != nullptr) conn->DropDeferred();  // a body that gave up left them
  runloom::MutexLock l(&mu_);
  if (conn != nullptr && conn->ok() && PQtransactionStatus(conn->raw()) == PQTRANS_IDLE) {
    idle_.push_back(std::move(conn));
  } else {
    --open_;  // lost, or left inside a transaction: drop it
  }
}

absl::Status PgHandle::Txn(absl::FunctionRef<absl::Status(PgConn&)> body) {
  static constexpr char kBegin[] = "BEGIN";
  static constexpr char kCommit[] = "COMMIT";
  static constexpr char kRollback[] = "ROLLBACK";
  static constexpr char kDeferNotify[] = "SELECT set_config('runloom.defer_notify', 'on', true)";
  static constexpr char kFlushNotify[] = "SELECT runloom.runloom_flush_notify()";
  absl::Status last;
  for (int attempt = 0; attempt < kTxnAttempts; ++attempt) {
    RUNLOOM_ASSIGN_OR_RETURN(std::unique_ptr<PgConn> c, Acquire());
    // BEGIN goes with the body's first statement, and the body's deferred
    // writes with COMMIT (PgConn::Defer): two round trips for most writes.
    c->Defer(kBegin, PgParams());
    c->Defer(kDeferNotify, PgParams());
    absl::Status s = body(*c);
    if (s.ok()) {
      // The wake-ups this transaction queued go out right after it commits,
      // in the same round trip (schema version 4).
      c->Defer(kCommit, PgParams());
      absl::Status commit = c->Exec(kFlushNotify).status();
      if (!commit.ok() && c->ok() && PQtransactionStatus(c->raw()) != PQTRANS_IDLE) {
        (void)c->Exec(kRollback);  // a deferred write failed: `commit` is its error
      }
      if (commit.ok() || IsRetryableTxnError(commit)) {
        Return(std::move(c));
        if (commit.ok()) return commit;
        last = commit;
        continue;
      }
      const bool lost = !c->ok();
      Return(std::move(c));
      if (lost) {
        return absl::UnavailableError(absl::StrCat(
            "the PostgreSQL connection was lost during COMMIT; the outcome is unknown (",
            commit.message(), ")"));
      }
      return commit;
    }
    c->DropDeferred();
    if (c->ok() && PQtransactionStatus(c->raw()) != PQTRANS_IDLE) {
      (void)c->Exec(kRollback);  // the error above is the one to report
    }
    const bool lost = !c->ok();
    Return(std::move(c));
    if (!IsRetryableTxnError(s) && !lost) return s;
    last = s;  // nothing committed: run it again
  }
  return last;
}

absl::Status PgHandle::Read(absl::FunctionRef<absl::Status(PgConn&)> body) {
  absl::Status s;
  for (int attempt = 0; attempt < 2; ++attempt) {
    RUNLOOM_ASSIGN_OR_RETURN(std::unique_ptr<PgConn> c, Acquire());
    s = body(*c);
    const bool lost = !c->ok();
    if (PQtransactionStatus(c->raw()) != PQTRANS_IDLE && c->ok()) (void)c->ExecScript("ROLLBACK");
    Return(std::move(c));
    if (!lost) return s;
  }
  return s;
}

absl::StatusOr<absl::Time> PgHandle::ServerNow() {
  absl::Time now;
  RUNLOOM_RETURN_IF_ERROR(Read([&](PgConn& c) -> absl::Status {
    RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kNow));
    now = r.row(0).ColumnTime(0);
    return absl::OkStatus();
  }));
  return now;
}

absl::StatusOr<absl::Time> PgServerNow(PgConn& c) {
  RUNLOOM_ASSIGN_OR_RETURN(PgResult r, c.Exec(kNow));
  return r.row(0).ColumnTime(0);
}


std::string PgHandle::NewLeaseToken() {
  runloom::MutexLock l(&gen_mu_);
  return NewToken(gen_);
}

uint64_t PgHandle::queue_signals() {
  runloom::MutexLock l(&mu_);
  return signals_;
}

void PgHandle::AwaitQueueSignal(uint64_t seen, absl::Time local_deadline) {
  runloom::MutexLock l(&mu_);
  auto changed = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return signals_ != seen; };
  mu_.AwaitWithDeadline(absl::Condition(&changed), local_deadline);
}

void PgHandle::Signal() {
  runloom::MutexLock l(&mu_);
  ++signals_;
}

void PgHandle::Interrupt() { Signal(); }

void PgHandle::ListenLoop() {
  absl::Duration backoff = kFirstBackoff;
  bool first = true;
  while (!stop_) {
    absl::StatusOr<std::unique_ptr<PgConn>> c = PgConn::Connect(url_, "");
    absl::Status s = c.status();
    if (s.ok()) {
      s = (*c)->ExecScript(absl::StrCat("LISTEN ", kRunsChannel, "; LISTEN ", kQueueChannel));
    }
    if (first) {
      first = false;
      listening_.Notify();  // listening, or the first attempt failed (see Open)
    } else if (s.ok()) {
      Signal();  // notifications may have been missed while disconnected
    }
    if (!s.ok()) {
      pollfd p{wake_fd_, POLLIN, 0};
      poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(backoff)));
      backoff = std::min(backoff * 2, kMaxBackoff);
      continue;
    }
    backoff = kFirstBackoff;
    PGconn* conn = (*c)->raw();
    while (!stop_ && PQstatus(conn) == CONNECTION_OK) {
      pollfd fds[2] = {{PQsocket(conn), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      if (poll(fds, 2, -1) < 0) continue;
      if (stop_) break;
      if (PQconsumeInput(conn) == 0) break;  // lost: reconnect
      std::vector<RunChange> changes;
      bool queue = false;
      while (PGnotify* n = PQnotifies(conn)) {
        if (absl::string_view(n->relname) == kQueueChannel) {
          queue = true;
        } else {
          // One change per line (schema version 6 packs a transaction's).
          for (absl::string_view line : absl::StrSplit(n->extra, '\n', absl::SkipEmpty())) {
            if (std::optional<RunChange> ch = ParseRunChange(line); ch.has_value()) {
              changes.push_back(std::move(*ch));
            }
          }
        }
        PQfreemem(n);
      }
      if (queue) Signal();
      if (!changes.empty() && bus_->HasSubscribers()) bus_->Publish(changes);
    }
  }
}

}  // namespace runloom::store_internal
