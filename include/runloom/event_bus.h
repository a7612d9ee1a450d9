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
// store: set a flag, signal a condition variable, return.
#pragma once

#include "runloom/status.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace runloom {

// What changed in one commit, for one run.
struct RunChange {
  std::string run_id;
  RunStatus status = RunStatus::kQueued;  // the run's status after the commit
  int64_t last_event_seq = 0;             // the run's last event after the commit
};

// A live subscription; destroying it unsubscribes (and waits for a callback
// that is running right now to return, so the callback's captures may be
// destroyed after the Subscription).
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

  // Calls `on_change` for every published change to `run_id`, or to any run
  // when `run_id` is empty. Events published before this call returns may or
  // may not be seen: subscribe first, then read the store, then wait.
  virtual std::unique_ptr<Subscription> Subscribe(
      const std::string& run_id, std::function<void(const RunChange&)> on_change) = 0;
};

// An EventBus that delivers within this process only.
std::unique_ptr<EventBus> NewInProcessEventBus();

}  // namespace runloom
