#include "store/sqlite/handle.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/ids.h"
#include "core/status_macros.h"
#include "store/sqlite/migrations.h"

namespace runloom::store_internal {
namespace {
constexpr char kMemoryPath[] = ":memory:";

absl::StatusOr<std::string> SynchronousPragma(const std::string& value) {
  std::string v = absl::AsciiStrToLower(value);
  if (v == "normal") return std::string("PRAGMA synchronous = NORMAL");
  if (v == "full") return std::string("PRAGMA synchronous = FULL");
  return absl::InvalidArgumentError(absl::StrCat(
      "SqliteOptions::synchronous is '", value, "'; use \"normal\" or \"full\""));
}
}  // namespace

absl::StatusOr<std::shared_ptr<SqliteHandle>> SqliteHandle::Open(const std::string& path,
                                                                 const SqliteOptions& options) {
  if (path.empty()) {
    return absl::InvalidArgumentError(
        "SQLite database path is empty; pass a file path or \":memory:\"");
  }
  if (options.busy_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("SqliteOptions::busy_timeout is negative (",
                                                   absl::FormatDuration(options.busy_timeout),
                                                   ")"));
  }
  RUNLOOM_ASSIGN_OR_RETURN(std::string sync_pragma, SynchronousPragma(options.synchronous));
  Clock* clock = options.clock != nullptr ? options.clock : RealClock();
  auto h = std::make_shared<SqliteHandle>(path, clock);
  const bool memory = path == kMemoryPath;

  RUNLOOM_ASSIGN_OR_RETURN(h->writer_, Db::Open(path, options.busy_timeout));
  if (!memory) {
    RUNLOOM_ASSIGN_OR_RETURN(std::string mode, h->writer_->QueryText("PRAGMA journal_mode = WAL"));
    if (absl::AsciiStrToLower(mode) != "wal") {
      return absl::FailedPreconditionError(absl::StrCat(
          "database ", path, " could not be switched to WAL mode (journal_mode is '", mode,
          "'); put it on a local file system"));
    }
  }
  RUNLOOM_RETURN_IF_ERROR(h->writer_->Exec(sync_pragma));
  RUNLOOM_RETURN_IF_ERROR(h->writer_->Exec("PRAGMA foreign_keys = ON"));
  RUNLOOM_RETURN_IF_ERROR(ApplyMigrations(*h->writer_));

  if (memory) {
    h->reader_ = h->writer_.get();
    h->reader_mu_ = &h->writer_mu_;
  } else {
    RUNLOOM_ASSIGN_OR_RETURN(h->reader_owned_, Db::Open(path, options.busy_timeout));
    RUNLOOM_RETURN_IF_ERROR(h->reader_owned_->Exec("PRAGMA foreign_keys = ON"));
    RUNLOOM_RETURN_IF_ERROR(h->reader_owned_->Exec("PRAGMA query_only = 1"));
    h->reader_ = h->reader_owned_.get();
    h->reader_mu_ = &h->own_reader_mu_;
  }
  SqliteHandle* raw = h.get();
  h->writes_ = std::make_unique<WriteQueue>(h->writer_.get(), &h->writer_mu_,
                                            [raw] { raw->NotifyProduced(); });
  return h;
}

SqliteHandle::~SqliteHandle() = default;

absl::Time SqliteHandle::Now() const { return FromMicros(ToMicros(clock_->Now())); }

std::string SqliteHandle::NewLeaseToken() { return NewToken(gen_); }

uint64_t SqliteHandle::produced() {
  absl::MutexLock l(&signal_mu_);
  return produced_;
}

void SqliteHandle::NotifyProduced() {
  absl::MutexLock l(&signal_mu_);
  ++produced_;
}

uint64_t SqliteHandle::AwaitProduced(uint64_t seen, absl::Time deadline) {
  absl::MutexLock l(&signal_mu_);
  auto ready = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(signal_mu_) {
    return produced_ != seen || interrupted_;
  };
  clock_->AwaitWithDeadline(&signal_mu_, absl::Condition(&ready), deadline);
  return produced_;
}

void SqliteHandle::Interrupt() {
  absl::MutexLock l(&signal_mu_);
  interrupted_ = true;
}

bool SqliteHandle::interrupted() {
  absl::MutexLock l(&signal_mu_);
  return interrupted_;
}

}  // namespace runloom::store_internal
