#include "api/run_feed.h"

#include "runloom/events.h"

#include "api/sse.h"

#include "absl/strings/str_cat.h"
#include "boost/asio/post.hpp"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

namespace runloom::api {
namespace {

// Pages one refresh reads before it yields its io thread (and posts itself
// again): a run that wrote many events at once does not hold a thread.
constexpr int kPagesPerRefresh = 4;

}  // namespace

std::string RenderSseEvent(const Event& e) {
  return absl::StrCat("id: ", e.seq, "\nevent: ", e.type, "\ndata: ", EventToJson(e).dump(),
                      "\n\n");
}

RunFeed::RunFeed(Engine* engine, std::string run_id, boost::asio::any_io_executor executor,
                 FeedLimits limits)
    : engine_(engine),
      run_id_(std::move(run_id)),
      limits_(limits),
      strand_(boost::asio::make_strand(std::move(executor))) {}

RunFeed::Slice RunFeed::After(int64_t after_seq) const {
  Slice out;
  out.last_seq = after_seq;
  runloom::MutexLock l(&mu_);
  if (!primed_ || after_seq < start_) {
    out.behind = true;
    return out;
  }
  auto first = std::upper_bound(frames_.begin(), frames_.end(), after_seq,
                                [](int64_t seq, const Frame& f) { return seq < f.seq; });
  for (auto it = first; it != frames_.end(); ++it) {
    out.text += it->text;
    out.last_seq = it->seq;
  }
  out.ended = ended_ && out.last_seq >= head_;
  return out;
}

void RunFeed::Changed() {
  if (refresh_posted_.exchange(true)) return;
  boost::asio::post(strand_, [self = shared_from_this()] { self->Refresh(); });
}

void RunFeed::RetryIfFailed() {
  {
    runloom::MutexLock l(&mu_);
    if (!failed_) return;
  }
  Changed();
}

void RunFeed::Attach(const std::shared_ptr<SseStream>& stream) {
  runloom::MutexLock l(&mu_);
  streams_[stream.get()] = stream;
}

size_t RunFeed::Detach(SseStream* stream) {
  runloom::MutexLock l(&mu_);
  streams_.erase(stream);
  return streams_.size();
}

// The window starts `initial_events` before the run's last event.
bool RunFeed::Prime() {
  absl::StatusOr<RunRecord> run = engine_->GetRun(run_id_);
  runloom::MutexLock l(&mu_);
  if (!run.ok()) {
    if (absl::IsNotFound(run.status())) {
      primed_ = true;
      ended_ = true;  // every stream of it ends
    } else {
      failed_ = true;
    }
    return false;
  }
  primed_ = true;
  start_ = head_ = std::max<int64_t>(0, run->last_event_seq - limits_.initial_events);
  return true;
}

// On the strand. One read of the events after the window's head per page,
// rendered once; then the streams are woken.
void RunFeed::Refresh() {
  // Reset before reading: a change committed from here on posts a new
  // refresh, which reads what this one may miss.
  refresh_posted_.store(false);
  bool primed;
  {
    runloom::MutexLock l(&mu_);
    primed = primed_;
  }
  if (!primed && !Prime()) return Wake();
  for (int page = 0; page < kPagesPerRefresh; ++page) {
    int64_t head;
    {
      runloom::MutexLock l(&mu_);
      head = head_;
    }
    absl::StatusOr<std::vector<Event>> events = engine_->ListEvents(run_id_, head, kMaxReadLimit);
    if (!events.ok()) {
      runloom::MutexLock l(&mu_);
      failed_ = true;
      if (absl::IsNotFound(events.status())) ended_ = true;
      break;
    }
    std::vector<Frame> rendered;
    rendered.reserve(events->size());
    bool finished = false;
    for (const Event& e : *events) {
      rendered.push_back({e.seq, RenderSseEvent(e)});
      finished = finished || e.type == event_types::kRunFinished;
    }
    // Whether the run has ended with these events: the same test as a
    // stream's own read (sse.cc), once for all of them.
    std::optional<bool> terminal;
    if (finished || events->empty()) {
      absl::StatusOr<RunRecord> run = engine_->GetRun(run_id_);
      const int64_t last = rendered.empty() ? head : rendered.back().seq;
      if (run.ok()) terminal = IsTerminal(run->status) && last >= run->last_event_seq;
    }
    const bool more = events->size() == static_cast<size_t>(kMaxReadLimit);
    {
      runloom::MutexLock l(&mu_);
      failed_ = false;
      for (Frame& f : rendered) {
        bytes_ += f.text.size();
        head_ = f.seq;
        frames_.push_back(std::move(f));
      }
      if (!rendered.empty()) ended_ = false;
      if (terminal) ended_ = *terminal;
      Trim();
    }
    if (!rendered.empty() || terminal.value_or(false)) Wake();
    if (!more) return;
  }
  Changed();  // more to read: go on after the other work queued on the io threads
}

void RunFeed::Trim() {
  while (!frames_.empty() && (frames_.size() > limits_.max_frames ||
                              (frames_.size() > 1 && bytes_ > limits_.max_bytes))) {
    start_ = frames_.front().seq;
    bytes_ -= frames_.front().text.size();
    frames_.pop_front();
  }
}

void RunFeed::Wake() {
  std::vector<std::shared_ptr<SseStream>> live;
  {
    runloom::MutexLock l(&mu_);
    live.reserve(streams_.size());
    for (auto& [p, w] : streams_) {
      if (auto s = w.lock()) live.push_back(std::move(s));
    }
  }
  for (auto& s : live) s->Wake();
}

}  // namespace runloom::api
