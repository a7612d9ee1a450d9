#include "store/sqlite/change_watcher.h"

#include "core/status_macros.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

namespace runloom::store_internal {
namespace {

constexpr char kRunsTable[] = "runs";
constexpr char kMainDb[] = "main";
constexpr char kRunByRowid[] = "SELECT id, status, last_event_seq FROM runs WHERE rowid = ?1";
constexpr char kRunById[] = "SELECT status, last_event_seq FROM runs WHERE id = ?1";
// A full scan (no index on updated_at: one would cost every commit an index
// write); run only while someone watches every run and another connection
// committed.
constexpr char kRunsUpdatedSince[] =
    "SELECT id, status, last_event_seq, updated_at FROM runs WHERE updated_at >= ?1";
constexpr char kNewestUpdate[] = "SELECT coalesce(max(updated_at), 0) FROM runs";
constexpr size_t kInotifyBuffer = 4096;

int PollMillis(absl::Duration d) {
  return static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(d)));
}

}  // namespace

// ---- CommitPublisher ----

void CommitPublisher::Attach(Db& writer) {
  sqlite3_update_hook(writer.raw(), &CommitPublisher::OnUpdate, this);
  sqlite3_rollback_hook(writer.raw(), &CommitPublisher::OnRollback, this);
}

void CommitPublisher::Detach(Db& writer) {
  sqlite3_update_hook(writer.raw(), nullptr, nullptr);
  sqlite3_rollback_hook(writer.raw(), nullptr, nullptr);
}

void CommitPublisher::OnUpdate(void* self, int op, const char* db, const char* table,
                               sqlite3_int64 rowid) {
  if (op == SQLITE_DELETE || std::strcmp(table, kRunsTable) != 0 || std::strcmp(db, kMainDb) != 0) {
    return;
  }
  static_cast<CommitPublisher*>(self)->touched_.push_back(rowid);
}

void CommitPublisher::OnRollback(void* self) {
  static_cast<CommitPublisher*>(self)->touched_.clear();
}

absl::Status CommitPublisher::RunOp(WriteOp op, WriteTxn& txn) {
  const size_t mark = touched_.size();
  absl::Status s = op(txn);
  if (!s.ok()) touched_.resize(std::min(mark, touched_.size()));
  return s;
}

void CommitPublisher::AfterTransaction(bool committed, Db& writer, runloom::Mutex& writer_mu,
                                       ChangeWatcher* also) {
  std::vector<int64_t> touched;
  touched.swap(touched_);
  if (!committed || touched.empty() || !bus_->HasSubscribers()) return;
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  std::vector<RunChange> changes;
  changes.reserve(touched.size());
  {
    // Read after the commit (the values may already be a later commit's,
    // which a subscriber re-reading the store sees anyway).
    runloom::MutexLock l(&writer_mu);
    for (int64_t rowid : touched) {
      absl::StatusOr<Statement> st = writer.Prepare(kRunByRowid);
      if (!st.ok()) return;  // a wake-up lost; watchers fall back on their deadline
      st->BindInt(1, rowid);
      absl::StatusOr<bool> row = st->Step();
      if (!row.ok() || !*row) continue;
      std::optional<RunStatus> status = ParseRunStatus(st->ColumnText(1));
      if (!status.has_value()) continue;
      changes.push_back(RunChange{st->ColumnText(0), *status, st->ColumnInt(2)});
    }
  }
  if (also != nullptr) also->NoteLocal(changes);
  bus_->Publish(changes);
}

// ---- ChangeWatcher ----

absl::StatusOr<std::unique_ptr<ChangeWatcher>> ChangeWatcher::Start(const std::string& path,
                                                                    EventBus* bus,
                                                                    const Options& options) {
  RUNLOOM_ASSIGN_OR_RETURN(std::unique_ptr<Db> db, Db::Open(path, options.busy_timeout));
  RUNLOOM_RETURN_IF_ERROR(db->Exec("PRAGMA query_only = 1"));
  auto w = std::make_unique<ChangeWatcher>(std::move(db), bus);
  w->stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (w->stop_fd_ < 0) {
    return absl::UnavailableError(
        absl::StrCat("change watcher for ", path, ": eventfd: ", std::strerror(errno)));
  }
  // inotify is an optimisation: without it (no such files yet, or watches
  // exhausted) the fallback interval still finds every change.
  w->fallback_interval_ = options.fallback_interval;
  int fd = options.use_inotify ? inotify_init1(IN_NONBLOCK | IN_CLOEXEC) : -1;
  if (fd >= 0) {
    int watches = 0;
    for (const std::string& file : {path + "-wal", path}) {
      if (inotify_add_watch(fd, file.c_str(), IN_MODIFY) >= 0) ++watches;
    }
    if (watches == 0) {
      close(fd);
      fd = -1;
    }
  }
  w->inotify_fd_ = fd;
  RUNLOOM_ASSIGN_OR_RETURN(w->data_version_, w->db_->QueryInt("PRAGMA data_version"));
  ChangeWatcher* raw = w.get();
  w->thread_ = std::thread([raw] { raw->Loop(); });
  return w;
}

ChangeWatcher::~ChangeWatcher() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    // A failed write leaves the thread waiting; it can only fail if the
    // counter overflows, which one write per watcher cannot do.
    [[maybe_unused]] ssize_t n = write(stop_fd_, &one, sizeof(one));
    thread_.join();
  }
  if (inotify_fd_ >= 0) close(inotify_fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
}

ChangeWatcher::Woken ChangeWatcher::Wait(absl::Duration timeout) {
  pollfd fds[2] = {{stop_fd_, POLLIN, 0}, {inotify_fd_, POLLIN, 0}};
  const nfds_t n = inotify_fd_ >= 0 ? 2 : 1;
  const int rc = poll(fds, n, PollMillis(timeout));
  if (rc <= 0) return Woken::kTimeout;  // or EINTR: check and wait again
  if ((fds[0].revents & POLLIN) != 0) return Woken::kStop;
  alignas(inotify_event) char buf[kInotifyBuffer];
  while (read(inotify_fd_, buf, sizeof(buf)) > 0) {
  }
  return Woken::kNotified;
}

void ChangeWatcher::Loop() {
  int follow_up = kFollowUps;  // follow-ups done since the last inotify wake-up
  while (true) {
    // Without subscribers only the stop signal is waited for: pending
    // inotify events stay queued (coalesced by the kernel) until someone
    // subscribes, so an idle watcher costs nothing per commit.
    if (!bus_->HasSubscribers()) {
      pollfd stop = {stop_fd_, POLLIN, 0};
      if (poll(&stop, 1, PollMillis(kIdleInterval)) > 0) return;
      continue;
    }
    absl::Status s = Check();
    if (!s.ok()) {
      runloom::MutexLock l(&known_mu_);
      last_error_ = std::move(s);
    }
    absl::Duration timeout = fallback_interval_;
    if (follow_up < kFollowUps) timeout = kFirstFollowUp * (1 << follow_up++);
    switch (Wait(timeout)) {
      case Woken::kStop:
        return;
      case Woken::kNotified:
        follow_up = 0;
        break;
      case Woken::kTimeout:
        break;
    }
  }
}

absl::Status ChangeWatcher::Check() {
  checks_.fetch_add(1);
  RUNLOOM_ASSIGN_OR_RETURN(int64_t version, db_->QueryInt("PRAGMA data_version"));
  if (version == data_version_) return absl::OkStatus();
  data_version_ = version;
  RUNLOOM_ASSIGN_OR_RETURN(std::vector<RunChange> changes, ReadChanges(bus_->CurrentInterest()));
  bus_->Publish(changes);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RunChange>> ChangeWatcher::ReadChanges(
    const EventBus::Interest& interest) {
  // Read first, compare under the lock: the reads need no lock.
  std::vector<std::pair<std::string, Known>> read;
  for (const std::string& id : interest.run_ids) {
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db_->Prepare(kRunById));
    st.BindText(1, id);
    RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) continue;
    std::optional<RunStatus> status = ParseRunStatus(st.ColumnText(0));
    if (!status.has_value()) continue;
    read.emplace_back(id, Known{*status, st.ColumnInt(1), 0});
  }
  int64_t since = 0;
  if (interest.all_runs && all_runs_watermark_ == 0) {
    // The first all-runs read starts near the newest run, not with every
    // run the file ever had.
    RUNLOOM_ASSIGN_OR_RETURN(all_runs_watermark_, db_->QueryInt(kNewestUpdate));
  }
  if (interest.all_runs) {
    since = all_runs_watermark_ - absl::ToInt64Microseconds(kAllRunsSlack);
    RUNLOOM_ASSIGN_OR_RETURN(Statement st, db_->Prepare(kRunsUpdatedSince));
    st.BindInt(1, since);
    while (true) {
      RUNLOOM_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      std::optional<RunStatus> status = ParseRunStatus(st.ColumnText(1));
      if (!status.has_value()) continue;
      const int64_t updated_at = st.ColumnInt(3);
      all_runs_watermark_ = std::max(all_runs_watermark_, updated_at);
      read.emplace_back(st.ColumnText(0), Known{*status, st.ColumnInt(2), updated_at});
    }
  }
  std::vector<RunChange> changes;
  runloom::MutexLock l(&known_mu_);
  // Keep only what is still of interest: the subscribed runs and the
  // all-runs window; the rest is read afresh if it becomes of interest.
  absl::flat_hash_map<std::string, Known> next;
  next.reserve(read.size());
  for (auto& [id, k] : read) {
    auto it = known_.find(id);
    const bool same = it != known_.end() && it->second.status == k.status &&
                      it->second.last_event_seq == k.last_event_seq;
    if (!same) changes.push_back(RunChange{id, k.status, k.last_event_seq});
    next[id] = k;
  }
  known_ = std::move(next);
  return changes;
}

void ChangeWatcher::NoteLocal(const std::vector<RunChange>& changes) {
  runloom::MutexLock l(&known_mu_);
  for (const RunChange& c : changes) {
    auto it = known_.find(c.run_id);
    if (it == known_.end()) continue;  // not of interest to the watcher
    it->second.status = c.status;
    it->second.last_event_seq = c.last_event_seq;
  }
}

absl::Status ChangeWatcher::TEST_last_error() {
  runloom::MutexLock l(&known_mu_);
  return last_error_;
}

}  // namespace runloom::store_internal
