// EventBus: wakes whoever waits on a run when a change to it commits.
//
// The store is the source of truth; the bus only says "look again". After a
// transaction that appended events to a run or changed its status commits,
// the backend publishes one RunChange per run it touched. A subscriber
// re-reads the store after a wake-up, so a missed or coalesced notification
// delays a watcher but never loses anything it would have read.
//
// Backends: in-process for SQLite (plus a cheap change check on the database
// file, so a watcher in one process wakes when another process commits);
// PostgreSQL LISTEN/NOTIFY or Redis pub/sub in distributed mode.
//
// Thread-safety: every method may be called from any thread concurrently.
// Callbacks run on the publishing thread (a store's writer, or the backend's
// change-check thread) and must not block or call back into the bus or the
// store: set a flag, signal a condition variable, return. The callbacks of
// one subscription never run concurrently with each other.
//
// Example (wait until run `id` leaves `running`):
//   runloom::Mutex mu;
//   bool changed = false;
//   std::unique_ptr<Subscription> sub = bus->Subscribe(id, [&](const RunChange&) {
//     runloom::MutexLock l(&mu);
//     changed = true;
//   });
//   while (store->GetRun(id)->status == RunStatus::kRunning) {  // read after subscribing
//     runloom::MutexLock l(&mu);
//     clock->AwaitWithDeadline(&mu, absl::Condition(&changed), clock->Now() + absl::Seconds(1));
//     changed = false;  // a missed wake-up costs at most the deadline
//   }
#pragma once

#include "runloom/status.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace runloom {

// What changed in one commit, for one run. A change may be published more
// than once, or with values newer than its commit's; compare with what you
// have read rather than counting notifications.
struct RunChange {
  std::string run_id;
  RunStatus status = RunStatus::kQueued;  // the run's status after the commit
  int64_t last_event_seq = 0;             // the run's last event after the commit
};

// A live subscription; destroying it unsubscribes (and waits for a callback
// that is running right now to return, so the callback's captures may be
// destroyed after the Subscription).
// REQUIRES: destroyed before its bus, and never from inside its own callback.
class Subscription {
 public:
  Subscription() = default;
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;
  virtual ~Subscription() = default;
};

class EventBus {
 public:
  EventBus() = default;
  EventBus(const EventBus&) = delete;
  EventBus& operator=(const EventBus&) = delete;
  virtual ~EventBus() = default;

  // Called by the backend after a commit (never before: a subscriber woken
  // by it must find the change in the store). Cheap when nobody subscribes.
  virtual void Publish(const std::vector<RunChange>& changes) = 0;

  // False when nobody subscribes, so a backend can skip gathering the
  // changes of a commit. A hint taken after the commit: a subscriber that
  // this misses subscribed after the commit, and its own read of the store
  // (which it makes after subscribing) sees the change.
  virtual bool HasSubscribers() const = 0;

  // What subscribers wait on now, so a backend that has to look for changes
  // itself (SQLite's check for other processes' commits) reads only those.
  struct Interest {
    bool all_runs = false;             // someone subscribed to every run
    std::vector<std::string> run_ids;  // runs with a subscription of their own, sorted
  };
  virtual Interest CurrentInterest() const = 0;

  // Calls `on_change` for every published change to `run_id`, or to any run
  // when `run_id` is empty. Events published before this call returns may or
  // may not be seen: subscribe first, then read the store, then wait.
  virtual std::unique_ptr<Subscription> Subscribe(
      const std::string& run_id, std::function<void(const RunChange&)> on_change) = 0;
};

// An EventBus that delivers within this process only.
std::unique_ptr<EventBus> NewInProcessEventBus();

}  // namespace runloom
