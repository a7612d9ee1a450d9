#include "transport/outbox_relay.h"

#include "core/check.h"
#include "core/status_macros.h"

#include "absl/strings/str_cat.h"

#include <utility>

namespace runloom {
namespace {

class SameTableRelay final : public OutboxRelay {
 public:
  absl::StatusOr<RelayResult> RelayOnce() override { return RelayResult{}; }
};

class TransportRelay final : public OutboxRelay {
 public:
  TransportRelay(Outbox* outbox, Transport* transport, int batch)
      : outbox_(outbox), transport_(transport), batch_(batch) {}

  absl::StatusOr<RelayResult> RelayOnce() override {
    RUNLOOM_ASSIGN_OR_RETURN(std::vector<OutboxRow> rows, outbox_->Pending(batch_));
    RelayResult result;
    std::vector<std::string> published;
    published.reserve(rows.size());
    for (const OutboxRow& row : rows) {
      absl::Status s = transport_->Publish(row.run_id);
      if (s.ok()) {
        published.push_back(row.id);
        continue;
      }
      // Record why and go on: one row must not hold up the others.
      RUNLOOM_RETURN_IF_ERROR(outbox_->MarkFailed(
          row.id, absl::StrCat("publishing run ", row.run_id, ": ", s.ToString())));
      ++result.failed;
    }
    if (!published.empty()) RUNLOOM_RETURN_IF_ERROR(outbox_->MarkPublished(published));
    result.published = static_cast<int>(published.size());
    return result;
  }

 private:
  // Constant after construction.
  Outbox* const outbox_;
  Transport* const transport_;
  const int batch_;
};

}  // namespace

std::unique_ptr<OutboxRelay> NewSameTableRelay() { return std::make_unique<SameTableRelay>(); }

std::unique_ptr<OutboxRelay> NewOutboxRelay(Outbox* outbox, Transport* transport, int batch) {
  RUNLOOM_CHECK(outbox != nullptr && transport != nullptr) << "NewOutboxRelay: null pointer";
  RUNLOOM_CHECK(batch >= 1) << "NewOutboxRelay: batch must be at least 1, got " << batch;
  return std::make_unique<TransportRelay>(outbox, transport, batch);
}

}  // namespace runloom
