// OutboxRelay: moves outbox rows from a store to a transport.
//
// A store writes an outbox row in the same transaction as each state change
// that needs an executor (store.h, "The outbox"). When the transport lives
// apart from the store (PostgreSQL + Redis Streams), a relay publishes those
// rows to it: at least once (a crash between Publish and MarkPublished
// publishes the row again, which is harmless because taking the lease is a
// compare-and-set). A row that cannot be published is marked failed with the
// reason and the relay moves on to the next, so one bad row never blocks the
// rest; the store offers it again later.
//
// On SQLite the outbox *is* the transport's queue table: the SQLite
// transport claims the store's rows directly, so its relay (NewSameTableRelay)
// has nothing to move and says so.
//
// Thread-safety: RelayOnce may be called from one thread at a time per relay
// (the relay loop); the Outbox and Transport it uses are thread-safe.
#pragma once

#include "runloom/transport.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <memory>
#include <string>
#include <vector>

namespace runloom {

// One outbox row: "run `run_id` needs a message".
struct OutboxRow {
  std::string id;  // the store's id of the row
  std::string run_id;
};

// What a store whose outbox is apart from its transport offers a relay.
// Thread-safe.
class Outbox {
 public:
  Outbox() = default;
  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;
  virtual ~Outbox() = default;

  // Up to `max` rows not yet published, oldest first. A row marked failed
  // comes back after a backoff the store chooses.
  virtual absl::StatusOr<std::vector<OutboxRow>> Pending(int max) = 0;
  // The rows were published; the store deletes or marks them.
  virtual absl::Status MarkPublished(const std::vector<std::string>& row_ids) = 0;
  // Publishing the row failed: the store records `reason` on it.
  virtual absl::Status MarkFailed(const std::string& row_id, const std::string& reason) = 0;
};

// What one RelayOnce did.
struct RelayResult {
  int published = 0;
  int failed = 0;  // marked failed with their reason
};

class OutboxRelay {
 public:
  OutboxRelay() = default;
  OutboxRelay(const OutboxRelay&) = delete;
  OutboxRelay& operator=(const OutboxRelay&) = delete;
  virtual ~OutboxRelay() = default;

  // Publishes what the outbox holds now (one batch). Returns the counts; an
  // error only when the outbox itself cannot be read or updated
  // (kUnavailable: retry later), never for a row that failed to publish.
  virtual absl::StatusOr<RelayResult> RelayOnce() = 0;
};

// The relay of a backend whose outbox is its transport's queue (SQLite): the
// store's outbox rows are already the messages, so RelayOnce publishes
// nothing and returns {0, 0}.
std::unique_ptr<OutboxRelay> NewSameTableRelay();

// Publishes up to `batch` rows of `outbox` per RelayOnce to `transport`
// (Transport::Publish). Pointers are not owned and must outlive the relay.
// REQUIRES: batch >= 1.
std::unique_ptr<OutboxRelay> NewOutboxRelay(Outbox* outbox, Transport* transport, int batch);

}  // namespace runloom
