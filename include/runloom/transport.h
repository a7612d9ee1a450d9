// Transport: how "run R needs an executor" reaches an executor.
//
// Messages are produced by the store in the same transaction as the state
// change that needs them (CreateRun, a move to queued, Store::Enqueue), so a
// crash can never leave "the DB says queued, the queue has nothing". In
// embedded mode the transport reads the queue table of the SQLite file; in
// distributed mode a relay moves outbox rows to Redis Streams.
//
// Delivery is at least once: a claimed message that is not acked within its
// visibility timeout is delivered again (deliveries + 1). Consumers must
// tolerate duplicates; the lease on the run makes duplicates harmless.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <cstdint>
#include <string>
#include <vector>

namespace runloom {

struct QueueMessage {
  std::string id;  // transport-specific message id
  std::string run_id;
  int deliveries = 1;  // 1 on first delivery
};

class Transport {
 public:
  Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;
  virtual ~Transport() = default;

  // Claims up to `max` visible messages for `consumer`, hiding them for
  // `visibility`. Returns an empty vector when none is visible.
  virtual absl::StatusOr<std::vector<QueueMessage>> Claim(const std::string& consumer, int max,
                                                          absl::Duration visibility) = 0;
  // Removes a claimed message for good. Acking twice is OK.
  virtual absl::Status Ack(const QueueMessage& message) = 0;
  // Gives a claimed, unprocessed message back: visible again at once, as if
  // never claimed (deliveries unchanged). A message that is gone is OK.
  // Used when a consumer stops with messages it claimed but did not start.
  virtual absl::Status Release(const QueueMessage& message) = 0;
  // Blocks until a message may be available or `deadline` passes. Wakes at
  // once for messages produced in this process; polls for other processes.
  virtual void WaitForMessages(absl::Time deadline) = 0;
  // Wakes every WaitForMessages caller (used on shutdown).
  virtual void Interrupt() = 0;
};

}  // namespace runloom
