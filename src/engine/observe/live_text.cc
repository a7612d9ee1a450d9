#include "engine/observe/live_text.h"

namespace runloom::engine_internal {

class LiveText::Sub final : public Subscription {
 public:
  Sub(LiveText* hub, int64_t id) : hub_(hub), id_(id) {}
  // The hub's lock is held while callbacks run, so once Unwatch returns no
  // callback of this subscription is running or will run.
  ~Sub() override { hub_->Unwatch(id_); }

 private:
  LiveText* const hub_;
  const int64_t id_;
};

void LiveText::Send(const LiveFrame& frame) {
  auto w = watchers_.find(frame.run_id);
  if (w == watchers_.end()) return;
  for (const auto& [id, fn] : w->second) fn(frame);
}

void LiveText::Append(const std::string& run_id, const std::string& path, int attempt,
                      std::string_view text) {
  if (text.empty()) return;
  runloom::MutexLock l(&mu_);
  Call& call = calls_[run_id][path];
  if (call.attempt != attempt) call = Call{.attempt = attempt};
  LiveFrame frame{.kind = LiveFrame::Kind::kDelta,
                  .run_id = run_id,
                  .path = path,
                  .attempt = attempt,
                  .offset = call.length,
                  .text = std::string(text)};
  call.length += static_cast<int64_t>(text.size());
  if (call.text.size() + text.size() <= kMaxLiveTextBytes) call.text.append(text);
  changed_[{run_id, path}] = {attempt, false};
  Send(frame);
}

void LiveText::Reset(const std::string& run_id, const std::string& path, int attempt) {
  runloom::MutexLock l(&mu_);
  auto run = calls_.find(run_id);
  if (run == calls_.end() || run->second.count(path) == 0) return;
  run->second[path] = Call{.attempt = attempt};
  changed_[{run_id, path}] = {attempt, false};
  Send(LiveFrame{.kind = LiveFrame::Kind::kReset,
                 .run_id = run_id,
                 .path = path,
                 .attempt = attempt});
}

void LiveText::End(const std::string& run_id, const std::string& path, int attempt) {
  Change ended{.run_id = run_id, .path = path, .attempt = attempt, .ended = true};
  std::function<void(const Change&)> hook;
  {
    runloom::MutexLock l(&mu_);
    auto run = calls_.find(run_id);
    if (run == calls_.end()) return;
    auto call = run->second.find(path);
    if (call == run->second.end() || call->second.attempt != attempt) return;
    const int64_t length = call->second.length;
    ended.text = std::move(call->second.text);
    run->second.erase(call);
    if (run->second.empty()) calls_.erase(run);
    changed_[{run_id, path}] = {attempt, true};
    Send(LiveFrame{.kind = LiveFrame::Kind::kEnd,
                   .run_id = run_id,
                   .path = path,
                   .attempt = attempt,
                   .offset = length});
    hook = end_hook_;
  }
  if (hook) hook(ended);
}

void LiveText::SetEndHook(std::function<void(const Change&)> hook) {
  runloom::MutexLock l(&mu_);
  end_hook_ = std::move(hook);
}

std::vector<LiveCall> LiveText::Calls(const std::string& run_id) const {
  std::vector<LiveCall> out;
  runloom::MutexLock l(&mu_);
  auto run = calls_.find(run_id);
  if (run == calls_.end()) return out;
  for (const auto& [path, call] : run->second) {
    out.push_back({.path = path, .attempt = call.attempt, .text = call.text});
  }
  return out;
}

std::unique_ptr<Subscription> LiveText::Watch(const std::string& run_id,
                                               std::function<void(const LiveFrame&)> on_frame) {
  runloom::MutexLock l(&mu_);
  const int64_t id = next_id_++;
  watchers_[run_id][id] = std::move(on_frame);
  watcher_runs_[id] = run_id;
  return std::make_unique<Sub>(this, id);
}

std::vector<LiveText::Change> LiveText::TakeChanges() {
  std::vector<Change> out;
  runloom::MutexLock l(&mu_);
  for (const auto& [key, state] : changed_) {
    Change c{.run_id = key.first, .path = key.second, .attempt = state.first, .ended = state.second};
    if (!c.ended) {
      auto run = calls_.find(key.first);
      if (run != calls_.end()) {
        auto call = run->second.find(key.second);
        if (call != run->second.end()) c.text = call->second.text;
      }
    }
    out.push_back(std::move(c));
  }
  changed_.clear();
  return out;
}

std::vector<std::string> LiveText::WatchedRuns() const {
  std::vector<std::string> out;
  runloom::MutexLock l(&mu_);
  for (const auto& [run_id, subs] : watchers_) out.push_back(run_id);
  return out;
}

void LiveText::Relay(const LiveFrame& frame) {
  runloom::MutexLock l(&mu_);
  Send(frame);
}

void LiveText::Unwatch(int64_t id) {
  runloom::MutexLock l(&mu_);
  auto run = watcher_runs_.find(id);
  if (run == watcher_runs_.end()) return;
  auto w = watchers_.find(run->second);
  if (w != watchers_.end()) {
    w->second.erase(id);
    if (w->second.empty()) watchers_.erase(w);
  }
  watcher_runs_.erase(run);
}

}  // namespace runloom::engine_internal
