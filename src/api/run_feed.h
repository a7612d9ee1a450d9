// One run's events as Server-Sent Event text, shared by every stream of that
// run: each committed change costs one store read and one rendering per run,
// not one per subscriber.
//
// A RunFeed keeps a window of the run's most recent events, rendered once as
// SSE frames (`id: <seq>`, `event: <type>`, `data: <the envelope>`), in seq
// order with no gap. A stream copies the frames after its own last seq; a
// stream older than the window (a reconnect far behind, a replay of a long
// run) is told it is behind and reads the store itself, then joins the feed
// once it has caught up. So a stream never skips nor repeats an event: it
// takes from the feed only seqs right after the ones it has sent.
//
// Refreshes run on the feed's own strand (an io thread), one at a time;
// changes that arrive while one is posted coalesce into it. After each
// refresh that appended frames or learnt the run ended, the feed wakes its
// streams (SseStream::Notify, which only posts).
//
// Thread-safety: every public method may be called from any thread.
#pragma once

#include "runloom/engine.h"
#include "runloom/mutex.h"

#include "boost/asio/any_io_executor.hpp"
#include "boost/asio/strand.hpp"

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>

namespace runloom::api {

class SseStream;

// `e` as one SSE frame: id, event and data lines, then a blank line.
std::string RenderSseEvent(const Event& e);

struct FeedLimits {
  // The window: at most this many frames and (past the newest frame) bytes.
  size_t max_frames = 1024;
  size_t max_bytes = size_t{4} << 20;
  // A new feed starts with (up to) this many of the run's latest events, so
  // subscribers that replay a short run from the start need no read of
  // their own.
  int64_t initial_events = 512;
};

class RunFeed : public std::enable_shared_from_this<RunFeed> {
 public:
  // `engine` must outlive the feed; refreshes run on a strand of `executor`.
  RunFeed(Engine* engine, std::string run_id, boost::asio::any_io_executor executor,
          FeedLimits limits = {});
  RunFeed(const RunFeed&) = delete;
  RunFeed& operator=(const RunFeed&) = delete;

  // What a stream takes after `after_seq`.
  struct Slice {
    std::string text;      // the frames after after_seq, oldest first
    int64_t last_seq = 0;  // the seq of the last frame in `text` (after_seq if none)
    bool behind = false;   // after_seq is older than the window: read the store
    bool ended = false;    // nothing more will come: the run is terminal (or gone)
                           // and last_seq reaches its last event
  };
  Slice After(int64_t after_seq) const ABSL_LOCKS_EXCLUDED(mu_);

  // A committed change of this run (any thread; never blocks): posts one
  // refresh unless one is posted already.
  void Changed() ABSL_LOCKS_EXCLUDED(mu_);
  // Posts a refresh if the last one failed (the store was unreachable);
  // streams call it on their keep-alive.
  void RetryIfFailed() ABSL_LOCKS_EXCLUDED(mu_);

  // The streams woken after a refresh. Attach before the stream's first
  // After(), so no refresh finishes unseen between the two.
  void Attach(const std::shared_ptr<SseStream>& stream) ABSL_LOCKS_EXCLUDED(mu_);
  // Returns how many streams remain.
  size_t Detach(SseStream* stream) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& run_id() const { return run_id_; }

 private:
  struct Frame {
    int64_t seq;
    std::string text;
  };

  void Refresh() ABSL_LOCKS_EXCLUDED(mu_);
  // The first refresh: where the window starts.
  bool Prime() ABSL_LOCKS_EXCLUDED(mu_);
  void Wake() ABSL_LOCKS_EXCLUDED(mu_);
  void Trim() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  Engine* const engine_;
  const std::string run_id_;
  const FeedLimits limits_;
  boost::asio::strand<boost::asio::any_io_executor> strand_;

  std::atomic<bool> refresh_posted_{false};

  mutable runloom::Mutex mu_;
  // The window holds every event in (start_, head_]: frames_ in seq order.
  bool primed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t start_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t head_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<Frame> frames_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // The run is terminal with head_ its last event (or the run is gone).
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  std::map<SseStream*, std::weak_ptr<SseStream>> streams_ ABSL_GUARDED_BY(mu_);
};

}  // namespace runloom::api
