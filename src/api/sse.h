// Server-Sent Event streams and the hub that wakes them.
//
// A stream owns its connection once the response headers are sent. A run's
// stream sends each event as `id: <seq>`, `event: <type>`, `data: <the event
// envelope>`, reading the store after `after_seq` whenever the engine says
// the run changed, so nothing is skipped or repeated; it ends after the
// run.finished event that leaves the run terminal (a rerun's events go on
// past an earlier one), or at once when the run is terminal and everything was
// sent). The all-runs stream sends `event: run` with {run_id, status,
// last_event_seq} for every committed change. Both send a `: keep-alive`
// comment when idle for keepalive_interval.
//
// The hub holds one engine subscription (Engine::WatchRuns) for all streams:
// a change posts a wake-up to the streams it concerns; no thread waits per
// stream.
//
// Thread-safety: StreamHub's methods may be called from any thread. A
// stream's state is owned by its connection's strand.
#pragma once

#include "runloom/engine.h"
#include "runloom/mutex.h"

#include "api/http_metrics.h"
#include "api/http_types.h"

#include "absl/time/time.h"
#include "boost/asio/steady_timer.hpp"
#include "boost/beast/core/tcp_stream.hpp"

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <string>

namespace runloom::api {

struct StreamOptions {
  absl::Duration keepalive_interval = absl::Seconds(15);
  absl::Duration write_timeout = absl::Seconds(30);
};

class StreamHub;

class SseStream : public std::enable_shared_from_this<SseStream> {
 public:
  SseStream(boost::beast::tcp_stream stream, StreamHub* hub, StreamRequest request);
  SseStream(const SseStream&) = delete;
  SseStream& operator=(const SseStream&) = delete;

  // Sends the headers and what is there already. Call once, after Add().
  void Start();
  // True when `change` concerns this stream (any thread).
  bool Wants(const RunChange& change) const;
  // A committed change (any thread; never blocks).
  void Notify(const RunChange& change);
  // Ends the stream and closes the connection (any thread).
  void Close();

 private:
  void Pump();
  std::string ReadRunEvents();
  std::string TakeChanges();
  void Write(std::string text);
  void OnWrite(boost::beast::error_code ec);
  void ArmKeepAlive();
  void WatchForHangUp();
  void CloseNow();

  // Constant after construction.
  StreamHub* const hub_;
  const StreamRequest request_;
  // Owned by the strand of stream_.
  boost::beast::tcp_stream stream_;
  boost::asio::steady_timer keepalive_;
  std::string out_;
  std::deque<RunChange> changes_;
  int64_t last_seq_ = 0;
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
  // `engine` and `metrics` must outlive the hub.
  StreamHub(Engine* engine, HttpMetrics* metrics, StreamOptions options);
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
  const StreamOptions options_;

  mutable runloom::Mutex mu_;
  std::map<SseStream*, std::shared_ptr<SseStream>> streams_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;

  // Last: destroyed first, so no callback runs into a half-destroyed hub.
  std::unique_ptr<Subscription> subscription_;
};

}  // namespace runloom::api
