#include <atomic>
#include <cstdio>
#include "store/sqlite/write_queue.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace runloom::store_internal {
namespace {
constexpr char kBegin[] = "BEGIN IMMEDIATE";
constexpr char kCommit[] = "COMMIT";
constexpr char kRollback[] = "ROLLBACK";
constexpr char kSavepoint[] = "SAVEPOINT runloom_write";
constexpr char kRelease[] = "RELEASE runloom_write";
constexpr char kRollbackTo[] = "ROLLBACK TO runloom_write";
}  // namespace

WriteQueue::WriteQueue(Db* db, absl::Mutex* db_mu, std::function<void()> on_produced)
    : db_(db), db_mu_(db_mu), on_produced_(std::move(on_produced)) {}

absl::Status WriteQueue::poisoned() {
  absl::MutexLock l(&mu_);
  return poisoned_;
}

size_t WriteQueue::TEST_QueueLength() {
  absl::MutexLock l(&mu_);
  return writers_.size();
}

absl::Status WriteQueue::Write(WriteOp op) {
  Writer w(op);
  mu_.Lock();
  writers_.push_back(&w);
  while (!w.done && &w != writers_.front()) w.cv.Wait(&mu_);
  if (w.done) {
    mu_.Unlock();
    return w.status;
  }
  // This thread leads: take the group, run it without holding mu_ so that
  // more writers can queue up for the next group meanwhile.
  size_t n = std::min(writers_.size(), kMaxGroup);
  std::vector<Writer*> group(writers_.begin(), writers_.begin() + static_cast<ptrdiff_t>(n));
  absl::Status poison = poisoned_;
  mu_.Unlock();

  bool produced = false;
  if (!poison.ok()) {
    FailGroup(group, poison);
  } else {
    poison = RunGroup(group);
    for (Writer* g : group) produced = produced || (g->produced && g->status.ok());
  }
  if (produced && on_produced_) on_produced_();

  mu_.Lock();
  if (!poison.ok() && poisoned_.ok()) poisoned_ = poison;
  for (size_t i = 0; i < n; ++i) {
    Writer* g = writers_.front();
    writers_.pop_front();
    if (g != &w) {
      g->done = true;
      g->cv.Signal();
    }
  }
  if (!writers_.empty()) writers_.front()->cv.Signal();
  mu_.Unlock();
  return w.status;
}

void WriteQueue::FailGroup(const std::vector<Writer*>& group, const absl::Status& s) {
  for (Writer* g : group) {
    if (!g->ran || g->status.ok()) g->status = s;
  }
}

absl::Status WriteQueue::Step(const char* sql) {
  absl::StatusOr<Statement> st = db_->Prepare(sql);
  if (!st.ok()) return st.status();
  return st->Run();
}

static std::atomic<long> g_groups{0}, g_ops{0};
struct Dump { ~Dump() { fprintf(stderr, "groups=%ld ops=%ld avg=%.2f\n", g_groups.load(), g_ops.load(), double(g_ops)/double(g_groups?g_groups.load():1)); } } g_dump;
absl::Status WriteQueue::RunGroup(const std::vector<Writer*>& group) {
  ++g_groups; g_ops += group.size();
  absl::MutexLock db_lock(db_mu_);
  absl::Status begin = Step(kBegin);
  if (!begin.ok()) {
    FailGroup(group, Annotate(begin, absl::StrCat("database ", db_->path(),
                                                  ": starting a write transaction")));
    return absl::OkStatus();
  }
  // Rolls the whole transaction back (nothing of it is committed, so the
  // outcome is known) and fails the group.
  auto abort_all = [&](const absl::Status& why) {
    if (!db_->autocommit()) Step(kRollback).IgnoreError();  // best effort; `why` is reported
    FailGroup(group, absl::UnavailableError(absl::StrCat(
                         "database ", db_->path(), ": write transaction rolled back: ",
                         why.ToString(), "; retry")));
    return absl::OkStatus();
  };
  for (Writer* g : group) {
    absl::Status sp = Step(kSavepoint);
    if (!sp.ok()) return abort_all(sp);
    WriteTxn txn{*db_};
    g->status = g->op(txn);
    g->ran = true;
    if (db_->autocommit()) {
      // SQLite rolled the transaction back by itself (I/O error, disk full).
      absl::Status why = g->status.ok() ? absl::InternalError("op left no transaction open")
                                        : g->status;
      g->status = absl::OkStatus();  // so FailGroup replaces it too
      return abort_all(why);
    }
    if (g->status.ok()) {
      g->produced = txn.produced_message;
      absl::Status rel = Step(kRelease);
      if (!rel.ok()) return abort_all(rel);
    } else {
      absl::Status rb = Step(kRollbackTo);
      if (rb.ok()) rb = Step(kRelease);
      if (!rb.ok()) return abort_all(rb);
    }
  }
  absl::Status commit = Step(kCommit);
  if (commit.ok()) return absl::OkStatus();
  const int rc = sqlite3_extended_errcode(db_->raw());
  if ((rc & 0xff) == SQLITE_BUSY && !db_->autocommit()) {
    // SQLITE_BUSY on COMMIT leaves the transaction open: nothing was written.
    return abort_all(commit);
  }
  if (!db_->autocommit()) Step(kRollback).IgnoreError();
  absl::Status poison = absl::DataLossError(absl::StrCat(
      "database ", db_->path(), ": commit failed and its outcome is unknown (",
      commit.ToString(), "); this store handle refuses further writes; reopen the database"));
  FailGroup(group, poison);
  return poison;
}

}  // namespace runloom::store_internal
