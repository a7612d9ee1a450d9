// Group commit of the PostgreSQL store's admissions (Store::CreateRun), as
// PgCommitGroup does for fenced writes: concurrent admissions of one
// process share one transaction, and that transaction is ONE statement (a
// data-modifying CTE inserting every run row, every run.created event and
// every queue message from arrays) between BEGIN and COMMIT, in one round
// trip. Alone, an admission is the same statement with one run.
//
// Callers enqueue an admission and block. The caller at the front leads
// while fewer than a few groups run (pg_admit_group.cc): it takes every
// queued admission (up to kMaxGroup) and runs them. If the statement fails for a reason other than
// the connection (a run id that is taken, say), nothing of it committed: each admission is then run
// alone, so each gets its own outcome. A lost connection or an unknown commit outcome fails every
// admission of the group with that kUnavailable.
//
// Idempotency keys are not handled here: PgStore::CreateRun admits a run
// with a key on its own path (it must first look the key up).
//
// Thread-safety: Run() may be called from any thread.
#pragma once

#include "runloom/mutex.h"

#include "store/internal/group_leader.h"

#include "store/postgres/pg_handle.h"
#include "store/write_checks.h"

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace runloom::store_internal {

// One run to admit: its row's columns (JSON already serialized) and its
// events (sequence numbers from 1).
struct PgAdmission {
  std::string id;
  std::string workflow_name;
  std::string workflow_digest;
  std::string inputs;  // JSON text
  std::string inputs_digest;
  std::string phase;
  std::string context;  // JSON text
  int64_t workflow_version = 0;
  int max_attempts = 1;
  std::string concurrency_key;  // issue 23: "" = none
  int concurrency_limit = 0;
  int priority = 0;
  const std::vector<EncodedEvent>* events = nullptr;

  absl::Status status;    // the outcome
  absl::Time created_at;  // the server's time of the admission, when OK
};

class PgAdmitGroup {
 public:
  // Most admissions one transaction takes (bounds its statement's arrays).
  static constexpr size_t kMaxGroup = 128;

  // `h` must outlive this.
  explicit PgAdmitGroup(PgHandle* h) : h_(h) {}
  PgAdmitGroup(const PgAdmitGroup&) = delete;
  PgAdmitGroup& operator=(const PgAdmitGroup&) = delete;

  // Admits `a` in a group; its outcome is a->status (kAlreadyExists: the
  // run id is taken).
  void Run(PgAdmission* a) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Writer {
    explicit Writer(PgAdmission* a) : admission(a) {}
    PgAdmission* admission;
    bool done = false;  // guarded by PgAdmitGroup::mu_
    TurnSignal cv;
  };

  // Runs `group` in one transaction; on a failure that is not the
  // connection's, each admission alone.
  void RunGroup(const std::vector<Writer*>& group);
  // Admits `group` in one transaction (sets created_at on success).
  absl::Status Admit(const std::vector<PgAdmission*>& group);

  PgHandle* const h_;

  runloom::Mutex mu_;
  std::deque<Writer*> writers_ ABSL_GUARDED_BY(mu_);
  int leaders_ ABSL_GUARDED_BY(mu_) = 0;  // groups running
};

}  // namespace runloom::store_internal
