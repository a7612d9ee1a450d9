// TransportWrapper: a Transport that forwards every call to another, so a
// fault test overrides only the calls it breaks (as StoreWrapper does for
// the Store, runloom/store.h).
//
// Thread-safety: as the wrapped transport's.
#pragma once

#include "runloom/transport.h"

#include <memory>
#include <string>
#include <vector>

namespace runloom::testing {

class TransportWrapper : public Transport {
 public:
  // Owns `target`.
  explicit TransportWrapper(std::unique_ptr<Transport> target)
      : owned_(std::move(target)), inner_(owned_.get()) {}
  // Borrows `target`, which must outlive the wrapper.
  explicit TransportWrapper(Transport* target) : inner_(target) {}

  absl::StatusOr<std::vector<QueueMessage>> Claim(const std::string& consumer, int max,
                                                  absl::Duration visibility) override {
    return inner_->Claim(consumer, max, visibility);
  }
  absl::Status Ack(const QueueMessage& m) override { return inner_->Ack(m); }
  absl::Status Release(const QueueMessage& m) override { return inner_->Release(m); }
  void WaitForMessages(absl::Time deadline) override { inner_->WaitForMessages(deadline); }
  void Interrupt() override { inner_->Interrupt(); }
  absl::Status Publish(const std::string& run_id) override { return inner_->Publish(run_id); }
  absl::StatusOr<MessagePresence> FindMessages(const std::vector<std::string>& ids) override {
    return inner_->FindMessages(ids);
  }
  absl::StatusOr<std::vector<DeadLetter>> ListDeadLetters(int limit) override {
    return inner_->ListDeadLetters(limit);
  }
  absl::StatusOr<int64_t> CountDeadLetters() override { return inner_->CountDeadLetters(); }
  absl::Status Redrive(const std::string& id) override { return inner_->Redrive(id); }
  absl::StatusOr<int> RedriveAll() override { return inner_->RedriveAll(); }

 private:
  const std::unique_ptr<Transport> owned_;  // null when borrowed
  Transport* const inner_;
};

}  // namespace runloom::testing
