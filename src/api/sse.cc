#include "api/sse.h"

#include "runloom/events.h"
#include "runloom/store.h"

#include "absl/strings/str_cat.h"
#include "boost/asio/bind_executor.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/write.hpp"
#include "nlohmann/json.hpp"
#include "wire/wire.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace runloom::api {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;

constexpr char kHeaders[] =
    "HTTP/1.1 200 OK\r\n"
    "Content-Type: text/event-stream\r\n"
    "Cache-Control: no-cache\r\n"
    "X-Accel-Buffering: no\r\n"
    "Connection: close\r\n"
    "\r\n";
constexpr char kKeepAlive[] = ": keep-alive\n\n";
// Changes an all-runs stream holds for a slow client before it drops the
// oldest (a live list re-reads the runs it shows; a change is a hint).
constexpr size_t kMaxQueuedChanges = 10'000;
// The last bytes of a run's stream that ended because the run did.
constexpr char kEndOfRun[] = ": end\n\n";

// One all-runs event; `id` is "" when the store's time could not be read.
std::string ChangeBlock(const std::string& run_id, RunStatus status, int64_t last_event_seq,
                        const std::string& id) {
  nlohmann::json j = {{"run_id", run_id},
                      {"status", std::string(ToString(status))},
                      {"last_event_seq", last_event_seq}};
  std::string text = id.empty() ? "" : absl::StrCat("id: ", id, "\n");
  absl::StrAppend(&text, "event: run\ndata: ", j.dump(), "\n\n");
  return text;
}

std::string ResetBlock(const std::string& id, const std::string& reason) {
  std::string text = id.empty() ? "" : absl::StrCat("id: ", id, "\n");
  absl::StrAppend(&text, "event: reset\ndata: ", nlohmann::json{{"reason", reason}}.dump(),
                  "\n\n");
  return text;
}

// Frames a slow client may have queued before the oldest go (a client that
// falls this far behind sees the whole text in the step's record).
constexpr size_t kMaxQueuedFrames = 10'000;

std::string LiveKey(const std::string& path, int attempt) {
  return absl::StrCat(path, "#", attempt);
}

std::string LiveBlock(const char* event, const std::string& path, int attempt, int64_t offset,
                      const std::string& text) {
  return absl::StrCat("event: ", event, "\ndata: ",
                      wire::LiveFrameData(path, attempt, offset, text)
                          .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                      "\n\n");
}

}  // namespace

SseStream::SseStream(beast::tcp_stream stream, StreamHub* hub, StreamRequest request)
    : hub_(hub),
      request_(std::move(request)),
      stream_(std::move(stream)),
      keepalive_(stream_.get_executor()),
      grace_(stream_.get_executor()),
      last_seq_(request_.after_seq) {}

void SseStream::Start() {
  asio::post(stream_.get_executor(), [self = shared_from_this()] {
    self->started_ = true;
    self->WatchForHangUp();
    self->ArmKeepAlive();
    std::string text = kHeaders;
    if (self->request_.all_runs) {
      text += self->StartChanges();
    } else {
      text += self->TakeRunEvents();
      // Stored events first, then each streamed call's text so far, then
      // its pieces as they come (the frames queued meanwhile past it).
      // (Two statements: the snapshot sets what TakeLive skips.)
      if (!self->finishing_) {
        text += self->LiveSnapshot();
        text += self->TakeLive();
      }
    }
    self->Write(std::move(text));
  });
}

void SseStream::Notify(const RunChange& change) {
  asio::post(stream_.get_executor(), [self = shared_from_this(), change] {
    if (self->changes_.size() >= kMaxQueuedChanges) self->changes_.pop_front();
    self->changes_.push_back(change);
    self->Pump();
  });
}

void SseStream::Wake() {
  // Wake-ups coalesce: one posted Pump takes everything there is so far.
  if (pump_posted_.exchange(true)) return;
  asio::post(stream_.get_executor(), [self = shared_from_this()] { self->Pump(); });
}

void SseStream::Close() {
  asio::post(stream_.get_executor(), [self = shared_from_this()] { self->CloseNow(); });
}

void SseStream::Live(const LiveFrame& frame) {
  asio::post(stream_.get_executor(), [self = shared_from_this(), frame] {
    if (self->live_.size() >= kMaxQueuedFrames) self->live_.pop_front();
    self->live_.push_back(frame);
    self->Pump();
  });
}

std::string SseStream::LiveSnapshot() {
  std::string text;
  for (const LiveCall& call : hub_->engine()->LiveCalls(request_.run_id)) {
    live_sent_[LiveKey(call.path, call.attempt)] = static_cast<int64_t>(call.text.size());
    if (!call.text.empty()) text += LiveBlock("llm.delta", call.path, call.attempt, 0, call.text);
  }
  return text;
}

// The queued frames as SSE, each piece once: a piece the snapshot held is
// dropped, one it held in part is cut.
std::string SseStream::TakeLive() {
  std::string text;
  for (const LiveFrame& f : live_) {
    const std::string key = LiveKey(f.path, f.attempt);
    switch (f.kind) {
      case LiveFrame::Kind::kDelta: {
        int64_t& sent = live_sent_[key];
        const int64_t end = f.offset + static_cast<int64_t>(f.text.size());
        if (end <= sent) break;
        const int64_t skip = std::max<int64_t>(0, sent - f.offset);
        text += LiveBlock("llm.delta", f.path, f.attempt, f.offset + skip,
                          f.text.substr(static_cast<size_t>(skip)));
        sent = end;
        break;
      }
      case LiveFrame::Kind::kReset:
        live_sent_[key] = 0;
        text += LiveBlock("llm.reset", f.path, f.attempt, 0, "");
        break;
      case LiveFrame::Kind::kEnd:
        live_sent_.erase(key);
        text += LiveBlock("llm.end", f.path, f.attempt, f.offset, "");
        break;
    }
  }
  live_.clear();
  return text;
}

void SseStream::Pump() {
  pump_posted_.store(false);
  // A wake-up before Start() ran: Start() sends the headers, then takes what
  // there is then.
  if (!started_) {
    dirty_ = true;  // OnWrite of the headers pumps
    return;
  }
  if (closed_ || end_sent_) return;
  if (writing_) {
    dirty_ = true;
    return;
  }
  // The live frames queued so far go before the run's events: a call ends
  // (llm.end) before its step's record commits, and the events that follow
  // may end the run (finishing_), after which only frames are sent (Finish).
  std::string text;
  if (request_.all_runs) {
    text = TakeChanges();  // an all-runs stream never finishes
  } else {
    text = TakeLive();
    if (!finishing_) text += TakeRunEvents();
  }
  if (!text.empty()) {
    Write(std::move(text));
  } else if (finishing_) {
    Finish();
  }
}

// The run ended and its events are sent: the end (`: end`), then the close.
// A call another process streamed ends before its step's record commits, but
// its last piece and its end reach this server a poll of the store later
// (LiveTextRelay): the end waits for them, up to kLiveGrace.
void SseStream::Finish() {
  if (end_sent_) {
    CloseNow();
    return;
  }
  if (live_sent_.empty() || grace_over_) {
    end_sent_ = true;
    Write(kEndOfRun);
    return;
  }
  if (grace_armed_) return;
  grace_armed_ = true;
  grace_.expires_after(absl::ToChronoMilliseconds(kLiveGrace));
  grace_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || self->closed_) return;
    self->grace_over_ = true;
    self->Pump();
  });
}

// Events after last_seq_, as SSE, from the run's feed; sets finishing_ when
// the run has ended and everything was sent.
std::string SseStream::TakeRunEvents() {
  RunFeed::Slice slice = feed_->After(last_seq_);
  if (slice.behind) return ReadRunEvents();
  last_seq_ = slice.last_seq;
  if (!slice.ended) return std::move(slice.text);
  finishing_ = true;  // Finish() sends the end
  return std::move(slice.text);
}

// A stream behind its feed's window reads the store itself (this stream
// only): events after last_seq_, as SSE; sets finishing_ at run.finished, or
// when the run is terminal and everything was sent. A failed read is
// retried at the next wake-up or keep-alive.
std::string SseStream::ReadRunEvents() {
  Engine* engine = hub_->engine();
  absl::StatusOr<std::vector<Event>> events =
      engine->ListEvents(request_.run_id, last_seq_, kMaxReadLimit);
  if (!events.ok()) {
    if (!absl::IsNotFound(events.status())) return "";
    finishing_ = true;
    return "";
  }
  std::string text;
  bool finished = false;
  for (const Event& e : *events) {
    text += RenderSseEvent(e);
    last_seq_ = e.seq;
    if (e.type == event_types::kRunFinished) {
      finished = true;  // the end, unless a rerun has begun since
      break;
    }
  }
  if (!finished && events->size() == static_cast<size_t>(kMaxReadLimit)) dirty_ = true;
  if (finished || events->empty()) {
    absl::StatusOr<RunRecord> run = engine->GetRun(request_.run_id);
    if (run.ok() && IsTerminal(run->status) && last_seq_ >= run->last_event_seq) {
      finishing_ = true;
    } else if (finished) {
      dirty_ = true;  // a later revision's events follow
    }
  }
  return text;
}

// The changes queued, each with the store's time taken after they were
// (a resume from it re-reads what committed since, less the overlap).
std::string SseStream::TakeChanges() {
  if (changes_.empty()) return "";
  absl::StatusOr<absl::Time> now = hub_->engine()->Now();
  const std::string id = now.ok() ? absl::StrCat(absl::ToUnixMicros(*now)) : "";
  std::string text;
  for (const RunChange& c : changes_) {
    text += ChangeBlock(c.run_id, c.status, c.last_event_seq, id);
  }
  changes_.clear();
  return text;
}

// The all-runs stream's first bytes: its position (an id with no data sets a
// client's last event id without an event) and, for a resume, the current
// state of each run changed since the client's id, or a reset. The store's
// time is read before the runs, so a commit the read misses has a later
// updated_at than the id sent. Changes notified meanwhile follow (Add() ran
// first), some twice: a change is a hint, compared with what was read.
std::string SseStream::StartChanges() {
  Engine* engine = hub_->engine();
  absl::StatusOr<absl::Time> now = engine->Now();
  if (!now.ok()) {
    return request_.changes_after ? ResetBlock("", "the store's time could not be read") : "";
  }
  const std::string id = absl::StrCat(absl::ToUnixMicros(*now));
  if (!request_.changes_after) return absl::StrCat("id: ", id, "\n\n");
  const absl::Time after = *request_.changes_after;
  if (after < *now - kChangesResumeWindow || after > *now + kChangesResumeOverlap) {
    return ResetBlock(id, "Last-Event-ID is outside the resume window");
  }
  absl::StatusOr<std::vector<RunRecord>> runs =
      engine->ListRunsChangedSince(after - kChangesResumeOverlap);
  if (absl::IsResourceExhausted(runs.status())) {
    return ResetBlock(id, "too many runs changed since Last-Event-ID");
  }
  if (!runs.ok()) return ResetBlock(id, "the runs could not be read");
  std::string text;
  for (const RunRecord& r : *runs) text += ChangeBlock(r.id, r.status, r.last_event_seq, id);
  return text.empty() ? absl::StrCat("id: ", id, "\n\n") : text;
}

void SseStream::Write(std::string text) {
  writing_ = true;
  out_ = std::move(text);
  stream_.expires_after(absl::ToChronoMilliseconds(hub_->options().write_timeout));
  asio::async_write(
      stream_, asio::buffer(out_),
      [self = shared_from_this()](beast::error_code ec, size_t) { self->OnWrite(ec); });
}

void SseStream::OnWrite(beast::error_code ec) {
  writing_ = false;
  if (ec || closed_) {
    CloseNow();
    return;
  }
  stream_.expires_never();
  if (end_sent_) {
    CloseNow();
    return;
  }
  if (finishing_ && !dirty_) {
    Finish();
    return;
  }
  if (dirty_) {
    dirty_ = false;
    Pump();
  }
}

void SseStream::ArmKeepAlive() {
  keepalive_.expires_after(absl::ToChronoMilliseconds(hub_->options().keepalive_interval));
  keepalive_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || self->closed_) return;
    if (!self->writing_ && !self->finishing_) {
      // A failed read (store briefly down) is retried here too.
      if (self->feed_) self->feed_->RetryIfFailed();
      std::string text = self->request_.all_runs ? "" : self->TakeRunEvents();
      self->Write(text.empty() ? std::string(kKeepAlive) : std::move(text));
    }
    self->ArmKeepAlive();
  });
}

// A client does not send after its request; a read that ends is a hang-up,
// noticed at once rather than at the next write.
void SseStream::WatchForHangUp() {
  stream_.async_read_some(asio::buffer(&hangup_byte_, 1),
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            if (ec) {
                              self->CloseNow();
                              return;
                            }
                            self->WatchForHangUp();
                          });
}

void SseStream::CloseNow() {
  if (closed_) return;
  closed_ = true;
  live_sub_.reset();  // no frame is posted to a closed stream
  keepalive_.cancel();
  grace_.cancel();
  beast::error_code ignored;
  stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  stream_.close();
  hub_->Remove(this);
}

StreamHub::StreamHub(Engine* engine, HttpMetrics* metrics, asio::any_io_executor executor,
                     StreamOptions options)
    : engine_(engine), metrics_(metrics), executor_(std::move(executor)), options_(options) {
  subscription_ = engine_->WatchRuns([this](const RunChange& c) { OnChange(c); });
}

StreamHub::~StreamHub() {
  subscription_.reset();
  CloseAll();
}

bool StreamHub::Add(const std::shared_ptr<SseStream>& stream) {
  std::shared_ptr<RunFeed> fresh;  // primed after the lock
  {
    runloom::MutexLock l(&mu_);
    if (closed_) return false;
    streams_[stream.get()] = stream;
    if (stream->request().all_runs) {
      all_runs_.insert(stream.get());
    } else {
      std::shared_ptr<RunFeed>& feed = feeds_[stream->request().run_id];
      if (!feed) {
        feed =
            std::make_shared<RunFeed>(engine_, stream->request().run_id, executor_, options_.feed);
        fresh = feed;
      }
      feed->Attach(stream);
      stream->feed_ = feed;
      std::weak_ptr<SseStream> weak = stream;
      stream->live_sub_ =
          engine_->WatchLive(stream->request().run_id, [weak](const LiveFrame& frame) {
            if (std::shared_ptr<SseStream> s = weak.lock()) s->Live(frame);
          });
    }
    metrics_->StreamOpened();
  }
  if (fresh) fresh->Changed();
  return true;
}

void StreamHub::Remove(SseStream* stream) {
  std::shared_ptr<SseStream> gone;  // released after the lock
  runloom::MutexLock l(&mu_);
  auto it = streams_.find(stream);
  if (it == streams_.end()) return;
  gone = std::move(it->second);
  streams_.erase(it);
  all_runs_.erase(stream);
  if (gone->feed_ && gone->feed_->Detach(stream) == 0) {
    auto f = feeds_.find(gone->feed_->run_id());
    if (f != feeds_.end() && f->second == gone->feed_) feeds_.erase(f);
  }
  metrics_->StreamClosed();
}

void StreamHub::CloseAll() {
  std::vector<std::shared_ptr<SseStream>> all;
  {
    runloom::MutexLock l(&mu_);
    closed_ = true;
    for (auto& [p, s] : streams_) all.push_back(s);
  }
  for (auto& s : all) s->Close();
}

int StreamHub::open() const {
  runloom::MutexLock l(&mu_);
  return static_cast<int>(streams_.size());
}

// On the publishing thread: only posts (SseStream::Notify and
// RunFeed::Changed never block).
void StreamHub::OnChange(const RunChange& change) {
  runloom::MutexLock l(&mu_);
  for (SseStream* s : all_runs_) s->Notify(change);
  auto f = feeds_.find(change.run_id);
  if (f != feeds_.end()) f->second->Changed();
}

}  // namespace runloom::api
