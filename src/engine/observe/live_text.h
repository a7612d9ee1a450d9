// LiveText (observe/: what the engine reports): the streamed model calls of the runs this engine executes now
// (issue 24, streaming): each call's text so far, and the frames sent to
// whoever watches a run (Engine::LiveCalls, Engine::WatchLive). Nothing here
// is stored: a call's record keeps its final text; LiveTextRelay mirrors the
// text so far for other processes (live_text_relay.h).
//
// Bounds: a call keeps at most kMaxLiveTextBytes of text for late joiners
// (the frames go on past it); a run's calls are dropped as each ends.
//
// Thread-safety: every method may be called from any thread. Callbacks run
// on the thread that appended (a step's) under the hub's lock, so they must
// not block or call back into the hub: post and return.
#pragma once

#include "runloom/live_text.h"
#include "runloom/event_bus.h"
#include "runloom/mutex.h"

#include "absl/base/thread_annotations.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace runloom::engine_internal {

inline constexpr size_t kMaxLiveTextBytes = size_t{1} << 20;

class LiveText {
 public:
  LiveText() = default;
  LiveText(const LiveText&) = delete;
  LiveText& operator=(const LiveText&) = delete;

  void Append(const std::string& run_id, const std::string& path, int attempt,
              std::string_view text) ABSL_LOCKS_EXCLUDED(mu_);
  void Reset(const std::string& run_id, const std::string& path, int attempt)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The call ended; a no-op for a call that streamed nothing.
  void End(const std::string& run_id, const std::string& path, int attempt)
      ABSL_LOCKS_EXCLUDED(mu_);

  std::vector<LiveCall> Calls(const std::string& run_id) const ABSL_LOCKS_EXCLUDED(mu_);
  std::unique_ptr<Subscription> Watch(const std::string& run_id,
                                      std::function<void(const LiveFrame&)> on_frame)
      ABSL_LOCKS_EXCLUDED(mu_);

  // For the relay to other processes (live_text_relay.h).
  struct Change {
    std::string run_id;
    std::string path;
    int attempt = 1;
    std::string text;    // the text so far (empty once ended)
    bool ended = false;  // the call ended since the last take
  };
  // The calls that streamed, were reset or ended since the last take.
  std::vector<Change> TakeChanges() ABSL_LOCKS_EXCLUDED(mu_);
  // The runs someone watches here.
  std::vector<std::string> WatchedRuns() const ABSL_LOCKS_EXCLUDED(mu_);
  // Sends `frame` (of a call another process streams) to its run's watchers.
  void Relay(const LiveFrame& frame) ABSL_LOCKS_EXCLUDED(mu_);
  // `hook` is called by End, on its thread and outside the lock, with the
  // call's whole text (ended), before End returns: before the step's record
  // commits. Set once, before any call streams.
  void SetEndHook(std::function<void(const Change&)> hook) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  class Sub;
  struct Call {
    int attempt = 1;
    int64_t length = 0;  // bytes streamed in all (text may stop at the bound)
    std::string text;
  };
  void Send(const LiveFrame& frame) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unwatch(int64_t id) ABSL_LOCKS_EXCLUDED(mu_);

  mutable runloom::Mutex mu_;
  // run id -> path -> its call now.
  std::map<std::string, std::map<std::string, Call>> calls_ ABSL_GUARDED_BY(mu_);
  // run id -> subscription id -> callback.
  std::map<std::string, std::map<int64_t, std::function<void(const LiveFrame&)>>> watchers_
      ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::string> watcher_runs_ ABSL_GUARDED_BY(mu_);
  // (run id, path) -> the attempt of a call changed since TakeChanges, and
  // whether it ended.
  std::map<std::pair<std::string, std::string>, std::pair<int, bool>> changed_
      ABSL_GUARDED_BY(mu_);
  std::function<void(const Change&)> end_hook_ ABSL_GUARDED_BY(mu_);
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace runloom::engine_internal
