// The in-process EventBus (include/runloom/event_bus.h).
//
// Subscriptions live in two registries under mu_: by run id, and "all runs".
// Publish copies the matching subscriptions out under a reader lock and calls
// them after releasing it, so publishers (a store's write leader, the change
// watcher) never wait on each other, and a callback never runs under mu_.
// Each subscription has its own call_mu, held while its callback runs:
// unsubscribing takes it after leaving the registry, so it waits for a
// running call and no call starts afterwards.
#include "runloom/event_bus.h"

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "runloom/mutex.h"

#include <algorithm>
#include <atomic>
#include <utility>

namespace runloom {
namespace {

struct Subscriber {
  Subscriber(std::string id, std::function<void(const RunChange&)> fn)
      : run_id(std::move(id)), on_change(std::move(fn)) {}
  const std::string run_id;  // "" = all runs
  const std::function<void(const RunChange&)> on_change;
  runloom::Mutex call_mu;
  bool active ABSL_GUARDED_BY(call_mu) = true;
};

class InProcessEventBus;

class InProcessSubscription final : public Subscription {
 public:
  InProcessSubscription(InProcessEventBus* bus, std::shared_ptr<Subscriber> sub)
      : bus_(bus), sub_(std::move(sub)) {}
  ~InProcessSubscription() override;

 private:
  InProcessEventBus* const bus_;
  const std::shared_ptr<Subscriber> sub_;
};

class InProcessEventBus final : public EventBus {
 public:
  InProcessEventBus() = default;

  void Publish(const std::vector<RunChange>& changes) override ABSL_LOCKS_EXCLUDED(mu_) {
    if (changes.empty() || !HasSubscribers()) return;
    std::vector<std::pair<std::shared_ptr<Subscriber>, const RunChange*>> calls;
    {
      runloom::ReaderMutexLock l(&mu_);
      for (const RunChange& c : changes) {
        for (const std::shared_ptr<Subscriber>& s : all_) calls.emplace_back(s, &c);
        auto it = by_run_.find(c.run_id);
        if (it == by_run_.end()) continue;
        for (const std::shared_ptr<Subscriber>& s : it->second) calls.emplace_back(s, &c);
      }
    }
    for (auto& [sub, change] : calls) {
      runloom::MutexLock l(&sub->call_mu);
      if (sub->active) sub->on_change(*change);
    }
  }

  bool HasSubscribers() const override {
    // A seq_cst read-modify-write (a full barrier) orders the caller's commit
    // before the read: a subscriber increments the count the same way before
    // reading the store, so either this sees it or its read sees the commit
    // (Dekker). An RMW, not a fence, because ThreadSanitizer does not model
    // fences. It costs a few nanoseconds beside a commit's tens of microseconds.
    return subscribers_.fetch_add(0, std::memory_order_seq_cst) > 0;
  }

  Interest CurrentInterest() const override ABSL_LOCKS_EXCLUDED(mu_) {
    Interest out;
    runloom::ReaderMutexLock l(&mu_);
    out.all_runs = !all_.empty();
    out.run_ids.reserve(by_run_.size());
    for (const auto& [id, subs] : by_run_) out.run_ids.push_back(id);
    std::sort(out.run_ids.begin(), out.run_ids.end());
    return out;
  }

  std::unique_ptr<Subscription> Subscribe(const std::string& run_id,
                                          std::function<void(const RunChange&)> on_change) override
      ABSL_LOCKS_EXCLUDED(mu_) {
    auto sub = std::make_shared<Subscriber>(run_id, std::move(on_change));
    {
      runloom::MutexLock l(&mu_);
      if (run_id.empty()) {
        all_.push_back(sub);
      } else {
        by_run_[run_id].push_back(sub);
      }
    }
    subscribers_.fetch_add(1, std::memory_order_seq_cst);  // see HasSubscribers
    return std::make_unique<InProcessSubscription>(this, std::move(sub));
  }

  void Unsubscribe(const std::shared_ptr<Subscriber>& sub) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      runloom::MutexLock l(&mu_);
      if (sub->run_id.empty()) {
        Erase(all_, sub);
      } else {
        auto it = by_run_.find(sub->run_id);
        if (it != by_run_.end()) {
          Erase(it->second, sub);
          if (it->second.empty()) by_run_.erase(it);
        }
      }
    }
    subscribers_.fetch_sub(1, std::memory_order_relaxed);
    // A publisher may still hold `sub` from before the erase: it checks
    // `active` under call_mu, so taking call_mu here waits for a running
    // callback and stops later ones.
    runloom::MutexLock l(&sub->call_mu);
    sub->active = false;
  }

 private:
  static void Erase(std::vector<std::shared_ptr<Subscriber>>& v,
                    const std::shared_ptr<Subscriber>& sub) {
    v.erase(std::remove(v.begin(), v.end(), sub), v.end());
  }

  // Subscriptions alive now (their count is read without mu_ by Publish).
  mutable std::atomic<int64_t> subscribers_{0};  // mutable: HasSubscribers() is a barrier RMW
  mutable runloom::Mutex mu_;
  absl::flat_hash_map<std::string, std::vector<std::shared_ptr<Subscriber>>> by_run_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Subscriber>> all_ ABSL_GUARDED_BY(mu_);
};

InProcessSubscription::~InProcessSubscription() { bus_->Unsubscribe(sub_); }

}  // namespace

std::unique_ptr<EventBus> NewInProcessEventBus() { return std::make_unique<InProcessEventBus>(); }

}  // namespace runloom
