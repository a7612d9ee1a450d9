// Transport: how "run R needs an executor" reaches an executor.
//
// Messages start as outbox rows that the store writes in the same
// transaction as the state change that needs them (CreateRun, a move to
// queued, Store::Enqueue), so a crash can never leave "the store says queued,
// the transport has nothing". On SQLite the outbox is the queue table this
// transport reads; a separate transport (Redis Streams) gets the rows from an
// outbox relay (Publish).
//
// Delivery is at least once: a claimed message that is not acked within its
// visibility timeout is delivered again (deliveries + 1). Consumers must
// tolerate duplicates; the lease on the run makes duplicates harmless. A
// message delivered TransportOptions::max_deliveries times without an ack is
// dead-lettered: kept (ListDeadLetters), never delivered again, and never
// re-enqueued by the sweeper, until Redrive.
//
// Time: visibility deadlines come from the backend's time authority (the
// store's Now() on SQLite; PostgreSQL's clock for its queue table and for
// the Redis Streams transport, whose deadlines are kept per message rather
// than read from Redis idle times).
//
// Thread-safety: every method may be called concurrently, from any thread
// and any process sharing the backend.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <cstdint>
#include <string>
#include <vector>

namespace runloom {

struct TransportOptions {
  // Deliveries of one message without an ack before it is dead-lettered
  // instead of delivered again. Must be at least 1.
  int max_deliveries = 10;
};

struct QueueMessage {
  std::string id;  // transport-specific message id
  std::string run_id;
  int deliveries = 1;  // 1 on first delivery
};

// A message that reached the delivery cap.
struct DeadLetter {
  std::string id;          // the dead letter's id (Redrive takes it)
  std::string message_id;  // the message it was
  std::string run_id;
  int deliveries = 0;
  std::string reason;  // why, in words
  absl::Time at;
};

// The reconciler's answer: which of the asked runs the transport accounts for.
struct MessagePresence {
  // A message is pending for these runs: visible, or claimed and not acked.
  std::vector<std::string> pending;
  // These runs' last message was dead-lettered and not redriven.
  std::vector<std::string> dead_lettered;
};

class Transport {
 public:
  Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;
  virtual ~Transport() = default;

  // Claims up to `max` visible messages for `consumer`, hiding them for
  // `visibility`. Returns an empty vector when none is visible. A message
  // past the delivery cap is dead-lettered here instead of returned.
  // kInvalidArgument: empty consumer, max < 1, visibility <= 0.
  virtual absl::StatusOr<std::vector<QueueMessage>> Claim(const std::string& consumer, int max,
                                                          absl::Duration visibility) = 0;
  // Removes a claimed message for good. Acking twice, or acking a message
  // that is already gone, is OK (and cheap). kInvalidArgument: an id this
  // transport never issues.
  virtual absl::Status Ack(const QueueMessage& message) = 0;
  // Gives a claimed, unprocessed message back: it becomes visible again soon
  // (at once on SQLite; after the visibility timeout at worst on a stream).
  // A message that is gone is OK. Used when a consumer stops with messages
  // it claimed but did not start.
  virtual absl::Status Release(const QueueMessage& message) = 0;
  // Blocks until a message may be available or `deadline` passes. Wakes at
  // once for messages produced in this process; polls for other processes.
  virtual void WaitForMessages(absl::Time deadline) = 0;
  // Wakes every WaitForMessages caller (used on shutdown).
  virtual void Interrupt() = 0;

  // ---- outbox relay ----
  // Makes sure a pending message exists for `run_id` (at least once; a
  // second message for a run is harmless). On SQLite the store's outbox row
  // already is the message, so the relay never calls it there.
  virtual absl::Status Publish(const std::string& run_id) = 0;

  // ---- reconciliation ----
  // Which of `run_ids` have a pending message (visible or claimed), and
  // which have a dead letter that was not redriven. Runs in neither list
  // have nothing in the transport: the reconciler may enqueue them again.
  virtual absl::StatusOr<MessagePresence> FindMessages(const std::vector<std::string>& run_ids) = 0;

  // ---- dead letters ----
  // Dead letters not yet redriven, oldest first; at most `limit` (<= 0: all).
  virtual absl::StatusOr<std::vector<DeadLetter>> ListDeadLetters(int limit) = 0;
  // How many dead letters are not yet redriven (a count in the backend, not
  // a read of them: the state gauges ask every few seconds).
  virtual absl::StatusOr<int64_t> CountDeadLetters() = 0;
  // Delivers a dead letter's run again: a fresh message (deliveries from 1)
  // and the dead letter marked redriven, atomically. kNotFound: no such dead
  // letter, or it was redriven already.
  virtual absl::Status Redrive(const std::string& dead_letter_id) = 0;
  // Redrive for every dead letter not yet redriven. Returns how many. The
  // default redrives them one by one (ListDeadLetters, then Redrive each).
  virtual absl::StatusOr<int> RedriveAll();
};

}  // namespace runloom
