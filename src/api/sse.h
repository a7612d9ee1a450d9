// Server-Sent Event streams and the hub that wakes them.
//
// A stream owns its connection once the response headers are sent. A run's
// stream sends each event as `id: <seq>`, `event: <type>`, `data: <the event
// envelope>`, in seq order after `after_seq`, so nothing is skipped or
// repeated; it ends after the run.finished event that leaves the run terminal
// (a rerun's events go on past an earlier one), or at once when the run is
// terminal and everything was sent. It takes the events from its run's
// RunFeed (run_feed.h: one store read and one rendering per change for all
// streams of the run); a stream behind the feed's window reads the store
// itself until it has caught up. When the run's stream ends because the run
// did (not at a shutdown), its last bytes are the comment `: end`, so a
// client tells the end from a cut and reconnects only after a cut.
//
// The all-runs stream sends `event: run` with {run_id, status,
// last_event_seq} for every committed change. Its ids are times of the store
// (Store::Now(), unix microseconds: the database server's clock on
// PostgreSQL), so they mean the same to every server on the store: it opens
// with an id alone (the client's position, no event), and each batch of
// changes carries the time it was taken. A resume from id T sends the
// current state of every run whose updated_at is at or after T minus
// kChangesResumeOverlap (a commit lands after the time it wrote); an id older
// than kChangesResumeWindow, later than the store's time, or with more than
// kMaxReadLimit runs changed since gets `event: reset` instead (re-read the
// runs), then the live changes.
//
// A run's stream also carries its streamed model calls (issue 24): on
// connecting, after the stored events, each call's text so far as one
// `event: llm.delta` (no id: deltas are not stored, so a resume does not
// count them), then each piece as it arrives; `event: llm.reset` voids a
// call's text (its provider sends the request again), `event: llm.end`
// ends it (its step's record follows in the events). Data:
// {path, attempt, offset, text}: `offset` is where `text` goes in the call's
// text, so a client places each piece once.
//
// Both send a `: keep-alive` comment when idle for keepalive_interval.
//
// The hub holds one engine subscription (Engine::WatchRuns) for all streams:
// a change refreshes its run's feed (which then wakes that run's streams) and
// is posted to every all-runs stream; no thread waits per stream.
//
// Thread-safety: StreamHub's methods may be called from any thread. A
// stream's state is owned by its connection's strand.
#pragma once

#include "runloom/engine.h"
#include "runloom/mutex.h"

#include "api/http_metrics.h"
#include "api/http_types.h"
#include "api/run_feed.h"

#include "absl/time/time.h"
#include "boost/asio/any_io_executor.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/beast/core/tcp_stream.hpp"

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>

namespace runloom::api {

// How far back an all-runs stream resumes, and the margin it reads before
// the client's id (docs/openapi.yaml, /api/v1/events).
inline constexpr absl::Duration kChangesResumeWindow = absl::Minutes(10);
inline constexpr absl::Duration kChangesResumeOverlap = absl::Seconds(5);

struct StreamOptions {
  absl::Duration keepalive_interval = absl::Seconds(15);
  absl::Duration write_timeout = absl::Seconds(30);
  FeedLimits feed;
};

class StreamHub;

class SseStream : public std::enable_shared_from_this<SseStream> {
 public:
  SseStream(boost::beast::tcp_stream stream, StreamHub* hub, StreamRequest request);
  SseStream(const SseStream&) = delete;
  SseStream& operator=(const SseStream&) = delete;

  // Sends the headers and what is there already. Call once, after Add().
  void Start();
  const StreamRequest& request() const { return request_; }
  // An all-runs stream: a committed change (any thread; never blocks).
  void Notify(const RunChange& change);
  // A run's stream: its feed has more, or the run ended (any thread; never
  // blocks). Wake-ups coalesce.
  void Wake();
  // Ends the stream and closes the connection (any thread).
  void Close();
  // A run's stream: a frame of one of its streamed calls (any thread;
  // never blocks).
  void Live(const LiveFrame& frame);

 private:
  friend class StreamHub;  // sets feed_ in Add(), before Start()

  void Pump();
  std::string TakeRunEvents();
  std::string ReadRunEvents();
  std::string TakeChanges();
  std::string LiveSnapshot();
  std::string TakeLive();
  std::string StartChanges();
  void Write(std::string text);
  void OnWrite(boost::beast::error_code ec);
  void ArmKeepAlive();
  void WatchForHangUp();
  void CloseNow();
  void Finish();

  // Constant after construction.
  StreamHub* const hub_;
  const StreamRequest request_;
  // A run's stream: its run's feed; set by StreamHub::Add(), constant after.
  std::shared_ptr<RunFeed> feed_;
  // Owned by the strand of stream_.
  boost::beast::tcp_stream stream_;
  boost::asio::steady_timer keepalive_;
  // After the run's end, the wait for the end of a call streamed elsewhere.
  static constexpr absl::Duration kLiveGrace = absl::Seconds(1);
  boost::asio::steady_timer grace_;
  bool grace_armed_ = false;
  bool grace_over_ = false;
  bool end_sent_ = false;  // `: end` is written or being written: the close follows
  std::string out_;
  std::deque<RunChange> changes_;
  // Streamed calls' frames not sent yet, and how far each call's text was
  // sent ("path#attempt" -> bytes).
  std::deque<LiveFrame> live_;
  std::map<std::string, int64_t> live_sent_;
  // The run's live frames (Engine::WatchLive); reset when the stream closes.
  std::unique_ptr<Subscription> live_sub_;
  int64_t last_seq_ = 0;
  bool started_ = false;  // the headers are sent or being sent
  bool writing_ = false;
  bool dirty_ = false;
  bool finishing_ = false;
  bool closed_ = false;
  char hangup_byte_ = 0;
  // Any thread: a Pump is posted and has not started yet.
  std::atomic<bool> pump_posted_{false};
};

class StreamHub {
 public:
  // `engine` and `metrics` must outlive the hub; the feeds' refreshes run on
  // `executor` (the io threads).
  StreamHub(Engine* engine, HttpMetrics* metrics, boost::asio::any_io_executor executor,
            StreamOptions options);
  // Unsubscribes (waiting for a running callback), then closes every stream.
  ~StreamHub();
  StreamHub(const StreamHub&) = delete;
  StreamHub& operator=(const StreamHub&) = delete;

  // Keeps `stream` until Remove(); false (not added) once CloseAll() ran.
  bool Add(const std::shared_ptr<SseStream>& stream) ABSL_LOCKS_EXCLUDED(mu_);
  void Remove(SseStream* stream) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends every stream and refuses new ones (graceful shutdown).
  void CloseAll() ABSL_LOCKS_EXCLUDED(mu_);
  int open() const ABSL_LOCKS_EXCLUDED(mu_);

  Engine* engine() const { return engine_; }
  const StreamOptions& options() const { return options_; }

 private:
  void OnChange(const RunChange& change) ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  Engine* const engine_;
  HttpMetrics* const metrics_;
  const boost::asio::any_io_executor executor_;
  const StreamOptions options_;

  mutable runloom::Mutex mu_;
  std::map<SseStream*, std::shared_ptr<SseStream>> streams_ ABSL_GUARDED_BY(mu_);
  // The all-runs streams (owned through streams_).
  std::set<SseStream*> all_runs_ ABSL_GUARDED_BY(mu_);
  // One feed per run that has streams; dropped with its last stream.
  std::map<std::string, std::shared_ptr<RunFeed>> feeds_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;

  // Last: destroyed first, so no callback runs into a half-destroyed hub.
  std::unique_ptr<Subscription> subscription_;
};

}  // namespace runloom::api
