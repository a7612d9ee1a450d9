// The queue messages a store's lease deleted, so the consumer's Ack that
// follows the lease needs no database access (SQLite's SqliteHandle and
// PostgreSQL's PgHandle). The lease's commit notes the message id; the Ack
// takes it. Message ids are never reused, so an id noted here is gone for
// good. Bounded: the oldest ids are forgotten (their Ack then asks the
// database, which is correct, only slower).
//
// Thread-safety: every method is thread-safe.
#pragma once

#include "runloom/mutex.h"

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"

#include <cstddef>
#include <cstdint>
#include <deque>

namespace runloom::store_internal {

class RemovedMessages {
 public:
  explicit RemovedMessages(size_t capacity) : capacity_(capacity) {}

  void Note(int64_t message_id) ABSL_LOCKS_EXCLUDED(mu_) {
    runloom::MutexLock l(&mu_);
    if (!ids_.insert(message_id).second) return;
    order_.push_back(message_id);
    while (order_.size() > capacity_) {
      ids_.erase(order_.front());
      order_.pop_front();
    }
  }

  // True (once) when `message_id` was noted and not forgotten.
  bool Take(int64_t message_id) ABSL_LOCKS_EXCLUDED(mu_) {
    runloom::MutexLock l(&mu_);
    // A taken id stays in order_ until it ages out; erasing it from the
    // set is enough (a stale entry in the deque erases nothing).
    return ids_.erase(message_id) > 0;
  }

 private:
  const size_t capacity_;
  runloom::Mutex mu_;
  absl::flat_hash_set<int64_t> ids_ ABSL_GUARDED_BY(mu_);
  std::deque<int64_t> order_ ABSL_GUARDED_BY(mu_);  // oldest first
};

}  // namespace runloom::store_internal
