#include "llm/cap_board.h"

#include "runloom/mutex.h"

#include "core/injected_bug.h"

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include <atomic>
#include <deque>
#include <limits.h>
#include <unistd.h>
#include <utility>

namespace runloom {

absl::StatusOr<std::optional<std::string>> CapBoard::TakeSlot(const std::string& provider, int) {
  return absl::UnimplementedError(absl::StrCat("the cap board ", Describe(), " does not count ",
                                               provider, "'s calls in flight"));
}

absl::Status CapBoard::ReturnSlot(const std::string& provider, const std::string&) {
  return absl::UnimplementedError(absl::StrCat("the cap board ", Describe(), " does not count ",
                                               provider, "'s calls in flight"));
}

std::string NewControllerId() {
  static std::atomic<int64_t> made{0};
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return absl::StrCat(host, ":", getpid(), ":", made.fetch_add(1));
}

namespace {

// Reports kept per provider: a few minutes of a large deployment's ticks.
constexpr size_t kReportsKept = 4096;
constexpr size_t kReportsRead = 1000;

class InProcessCapBoard final : public CapBoard {
 public:
  explicit InProcessCapBoard(Clock* clock) : clock_(clock) {}

  absl::StatusOr<std::string> Lead(const std::string& provider, const std::string& candidate,
                                   absl::Duration lease) override {
    const absl::Time now = clock_->Now();
    runloom::MutexLock l(&mu_);
    Lease& held = leases_[provider];
    if (held.holder.empty() || held.expires <= now || held.holder == candidate) {
      held = Lease{candidate, now + lease};
    }
    return held.holder;
  }

  absl::StatusOr<bool> Publish(const std::string& provider, const std::string& leader, int cap,
                               absl::Duration ttl) override {
    const absl::Time now = clock_->Now();
    runloom::MutexLock l(&mu_);
    auto it = leases_.find(provider);
    if ((it == leases_.end() || it->second.holder != leader || it->second.expires <= now) &&
        !RUNLOOM_INJECTED_BUG(InjectedBug::kCapPublishIgnoresLease)) {
      return false;
    }
    caps_[provider] = Entry{cap, now + ttl};
    return true;
  }

  absl::Status Cut(const std::string& provider, int cap, absl::Duration ttl) override {
    const absl::Time now = clock_->Now();
    runloom::MutexLock l(&mu_);
    Entry& e = caps_[provider];
    if (e.expires > now && e.cap <= cap) return absl::OkStatus();
    e = Entry{cap, now + ttl};
    return absl::OkStatus();
  }

  absl::StatusOr<std::optional<int>> Read(const std::string& provider) override {
    const absl::Time now = clock_->Now();
    runloom::MutexLock l(&mu_);
    auto it = caps_.find(provider);
    if (it == caps_.end() || it->second.expires <= now) return std::optional<int>();
    return std::optional<int>(it->second.cap);
  }

  absl::StatusOr<std::string> Report(const std::string& provider,
                                     const SenseReport& report) override {
    runloom::MutexLock l(&mu_);
    std::deque<std::pair<int64_t, SenseReport>>& kept = reports_[provider];
    const int64_t id = ++last_report_;
    kept.emplace_back(id, report);
    while (kept.size() > kReportsKept) kept.pop_front();
    return absl::StrCat(id);
  }

  absl::StatusOr<std::vector<SenseReport>> ReadReports(const std::string& provider,
                                                       std::string* after,
                                                       int* malformed) override {
    if (malformed != nullptr) *malformed = 0;
    int64_t from = 0;
    if (!after->empty() && !absl::SimpleAtoi(*after, &from)) {
      return absl::InvalidArgumentError(
          absl::StrCat("not a report position of the in-process cap board: '", *after, "'"));
    }
    runloom::MutexLock l(&mu_);
    std::vector<SenseReport> out;
    auto it = reports_.find(provider);
    if (it == reports_.end()) return out;
    for (const auto& [id, report] : it->second) {
      if (id <= from) continue;
      if (out.size() == kReportsRead) break;
      out.push_back(report);
      *after = absl::StrCat(id);
    }
    return out;
  }

  std::string Describe() const override { return "in-process"; }

 private:
  struct Entry {
    int cap = 0;
    absl::Time expires;
  };
  struct Lease {
    std::string holder;
    absl::Time expires;
  };
  Clock* const clock_;
  runloom::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> caps_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Lease> leases_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::deque<std::pair<int64_t, SenseReport>>> reports_
      ABSL_GUARDED_BY(mu_);
  int64_t last_report_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

std::unique_ptr<CapBoard> NewInProcessCapBoard(Clock* clock) {
  return std::make_unique<InProcessCapBoard>(clock);
}

}  // namespace runloom
