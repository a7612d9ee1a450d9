// The state shared by the SQLite Store and the SQLite Transport of one
// OpenSqlite() call: the connections, the group-commit writer, the clock and
// the in-process "a message was produced" signal.
//
// Thread-safety: every method is thread-safe. The writer connection is used
// only by the WriteQueue leader; the reader connection only under reader_mu_.
// For ":memory:" both are the same connection behind the same mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runloom/clock.h"
#include "runloom/store.h"
#include "store/sqlite/db.h"
#include "store/sqlite/write_queue.h"

namespace runloom::store_internal {

class SqliteHandle {
 public:
  // Opens the connections, sets the PRAGMAs and applies migrations.
  static absl::StatusOr<std::shared_ptr<SqliteHandle>> Open(const std::string& path,
                                                            const SqliteOptions& options);
  // Use Open().
  SqliteHandle(std::string path, Clock* clock) : path_(std::move(path)), clock_(clock) {}
  SqliteHandle(const SqliteHandle&) = delete;
  SqliteHandle& operator=(const SqliteHandle&) = delete;
  ~SqliteHandle();

  Clock* clock() const { return clock_; }
  // The clock's time, truncated to the stored precision (microseconds), so a
  // record returned by a write equals the same record read back.
  absl::Time Now() const;
  const std::string& path() const { return path_; }

  // Runs `op` in a group-committed write transaction (see WriteQueue).
  absl::Status Write(WriteOp op) { return writes_->Write(op); }

  // Runs `fn(Db&)` on the reader connection and returns its result.
  template <typename F>
  auto Read(F&& fn) {
    absl::MutexLock l(reader_mu_);
    return std::forward<F>(fn)(*reader_);
  }

  // A new random 128-bit lease token (hex).
  // REQUIRES: called from inside a write op (the writer serializes gen_).
  std::string NewLeaseToken();

  // ---- in-process message signal ----
  // Count of commits that produced queue messages in this process.
  uint64_t produced() ABSL_LOCKS_EXCLUDED(signal_mu_);
  // Waits until produced() != `seen`, Interrupt() was called, or the clock
  // reaches `deadline`. Returns the produced() count at return.
  uint64_t AwaitProduced(uint64_t seen, absl::Time deadline) ABSL_LOCKS_EXCLUDED(signal_mu_);
  // Makes every current and later AwaitProduced return at once.
  void Interrupt() ABSL_LOCKS_EXCLUDED(signal_mu_);
  bool interrupted() ABSL_LOCKS_EXCLUDED(signal_mu_);

  // For tests: the writer connection (use only when no write is running).
  Db* TEST_writer() { return writer_.get(); }

 private:
  void NotifyProduced() ABSL_LOCKS_EXCLUDED(signal_mu_);

  // Constant after Open().
  const std::string path_;
  Clock* const clock_;
  std::unique_ptr<Db> writer_;
  std::unique_ptr<Db> reader_owned_;  // null for ":memory:"
  Db* reader_ = nullptr;              // reader_owned_ or writer_
  absl::Mutex writer_mu_;             // taken by the WriteQueue leader
  absl::Mutex* reader_mu_ = nullptr;  // &own_reader_mu_, or &writer_mu_ for ":memory:"
  absl::Mutex own_reader_mu_;
  std::unique_ptr<WriteQueue> writes_;

  // Used only inside write ops, which the WriteQueue runs one at a time.
  absl::BitGen gen_;

  absl::Mutex signal_mu_;
  uint64_t produced_ ABSL_GUARDED_BY(signal_mu_) = 0;
  bool interrupted_ ABSL_GUARDED_BY(signal_mu_) = false;
};

// ---- helpers shared by the store and the transport ----

// Makes sure the run has a pending (never claimed) queue message: keeps one,
// or replaces an in-flight one by a fresh row, visible at `now`. Returns true
// when a row was inserted.
absl::StatusOr<bool> EnsureQueueMessage(Db& db, const std::string& run_id, absl::Time now);

std::unique_ptr<Store> NewSqliteStore(std::shared_ptr<SqliteHandle> handle);
std::unique_ptr<Transport> NewSqliteTransport(std::shared_ptr<SqliteHandle> handle);

}  // namespace runloom::store_internal
