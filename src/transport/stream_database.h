// StreamDatabase: what a transport apart from the database (the Redis
// Streams one, transport/redis/redis_transport.h) needs from the store's
// database. Here, beside the outbox relay, so a store implements it without
// linking the transport it serves (src/store/postgres/pg_stream_db.cc).
#pragma once

#include "runloom/transport.h"

#include "transport/outbox_relay.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <cstdint>
#include <string>
#include <vector>

namespace runloom::transport_internal {

// What a stream transport needs from the store's database (PostgreSQL
// implements it in src/store/postgres/pg_stream_db.cc): the outbox it
// relays, the time authority, run states, the dead-letter table, and
// wake-ups. Thread-safe.
class StreamDatabase : public Outbox {
 public:
  // The time authority (the database server's clock).
  virtual absl::StatusOr<absl::Time> Now() = 0;
  // Of `run_ids`, those an executor could lease now: queued, or running
  // with an expired lease. Messages of the others are residue.
  struct LeasableRuns {
    std::vector<std::string> queued;
    std::vector<std::string> expired;  // running, lease expired
    // Not in the store at all: a message naming one is poison.
    std::vector<std::string> missing;
  };
  virtual absl::StatusOr<LeasableRuns> Leasable(const std::vector<std::string>& run_ids) = 0;
  // Records a dead letter (table row and run event), once per message id.
  virtual absl::Status RecordDeadLetter(const std::string& message_id, const std::string& run_id,
                                        int deliveries, const std::string& reason) = 0;
  // The database's side of Transport::FindMessages: runs with an outbox row
  // not yet published (pending), and runs with a live dead letter.
  virtual absl::StatusOr<MessagePresence> FindMessages(const std::vector<std::string>& run_ids) = 0;
  // Transport's dead-letter calls on the table. Redrive marks the dead
  // letter redriven and writes an outbox row in one transaction (the relay
  // publishes it), so a redrive is never half done.
  virtual absl::StatusOr<std::vector<DeadLetter>> ListDeadLetters(int limit) = 0;
  virtual absl::StatusOr<int64_t> CountDeadLetters() = 0;
  virtual absl::Status Redrive(const std::string& dead_letter_id) = 0;
  virtual absl::StatusOr<int> RedriveAll() = 0;

  // Wake-ups: a counter bumped by every new outbox row (any process), and
  // by Interrupt. AwaitSignal waits until signals() != seen or until
  // `local_deadline` (RealClock time).
  virtual uint64_t signals() = 0;
  virtual void AwaitSignal(uint64_t seen, absl::Time local_deadline) = 0;
  virtual void Interrupt() = 0;
};

}  // namespace runloom::transport_internal
