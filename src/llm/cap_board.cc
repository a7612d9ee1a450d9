#include "llm/cap_board.h"

#include "runloom/mutex.h"

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace runloom {

absl::StatusOr<std::optional<std::string>> CapBoard::TakeSlot(const std::string& provider, int) {
  return absl::UnimplementedError(absl::StrCat("the cap board ", Describe(), " does not count ",
                                               provider, "'s calls in flight"));
}

absl::Status CapBoard::ReturnSlot(const std::string& provider, const std::string&) {
  return absl::UnimplementedError(absl::StrCat("the cap board ", Describe(), " does not count ",
                                               provider, "'s calls in flight"));
}

namespace {

class InProcessCapBoard final : public CapBoard {
 public:
  explicit InProcessCapBoard(Clock* clock) : clock_(clock) {}

  absl::Status Publish(const std::string& provider, int cap, absl::Duration ttl) override {
    const absl::Time expires = clock_->Now() + ttl;
    runloom::MutexLock l(&mu_);
    caps_[provider] = Entry{cap, expires};
    return absl::OkStatus();
  }

  absl::StatusOr<std::optional<int>> Read(const std::string& provider) override {
    const absl::Time now = clock_->Now();
    runloom::MutexLock l(&mu_);
    auto it = caps_.find(provider);
    if (it == caps_.end() || it->second.expires <= now) return std::optional<int>();
    return std::optional<int>(it->second.cap);
  }

  std::string Describe() const override { return "in-process"; }

 private:
  struct Entry {
    int cap = 0;
    absl::Time expires;
  };
  Clock* const clock_;
  runloom::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> caps_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<CapBoard> NewInProcessCapBoard(Clock* clock) {
  return std::make_unique<InProcessCapBoard>(clock);
}

}  // namespace runloom
