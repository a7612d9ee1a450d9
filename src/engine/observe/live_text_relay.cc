#include "engine/observe/live_text_relay.h"

#include "runloom/clock.h"

#include "core/log.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include <algorithm>
#include <set>
#include <utility>

namespace runloom::engine_internal {

LiveTextRelay::LiveTextRelay(LiveText* hub, LiveTextStore* store, Logger* logger,
                             std::string writer)
    : hub_(hub),
      store_(store),
      logger_(logger),
      writer_(std::move(writer)),
      task_(RealClock(), kTick, [this] { TickOnce(); }) {
  hub_->SetEndHook([this](const LiveText::Change& call) { PutEnded(call); });
}

LiveTextRelay::~LiveTextRelay() {
  Stop();
  hub_->SetEndHook(nullptr);
}

void LiveTextRelay::Start() { task_.Start(); }

void LiveTextRelay::Stop() {
  task_.Stop();
  runloom::MutexLock l(&tick_mu_);
  // A call that ended just now keeps its row for a few of the pollers' ticks
  // (a `runloom run` exits at once after its run's last step), so that their
  // watchers get its last piece and its end; then every row goes.
  absl::Time last_end = absl::InfinitePast();
  for (const auto& [key, ended] : ended_) {
    last_end = std::max(last_end, ended.delete_at - kKeepEnded);
  }
  const absl::Duration wait = last_end + kSeenByPollers - RealClock()->Now();
  if (wait > absl::ZeroDuration()) RealClock()->SleepFor(wait);
  Mirror(/*all=*/true);
}

void LiveTextRelay::TickOnce() {
  runloom::MutexLock l(&tick_mu_);
  Mirror(/*all=*/false);
  Poll();
}

void LiveTextRelay::PutEnded(const LiveText::Change& call) {
  runloom::MutexLock l(&tick_mu_);
  const std::pair<std::string, std::string> key{call.run_id, call.path};
  put_at_.erase(key);
  const absl::Status put = store_->PutLiveText(LiveTextRow{.run_id = call.run_id,
                                                           .path = call.path,
                                                           .attempt = call.attempt,
                                                           .writer = writer_,
                                                           .text = call.text,
                                                           .ended = true});
  Warn(put, "not stored");
  // Deleted kKeepEnded later; at once if the put failed (a row of the call's
  // earlier text may be there).
  ended_[key] = Ended{.attempt = call.attempt,
                      .delete_at = put.ok() ? RealClock()->Now() + kKeepEnded : absl::InfinitePast()};
}

void LiveTextRelay::Warn(const absl::Status& s, const char* what) {
  if (s.ok()) return;
  {
    runloom::MutexLock l(&mu_);
    const std::string message(s.message());
    if (message == last_error_) return;
    last_error_ = message;
  }
  Log(logger_, LogLevel::kWarning, "streamed text ", what,
      " (other processes' subscribers miss it for now): ", s.ToString());
}

void LiveTextRelay::Mirror(bool all) {
  const absl::Time now = RealClock()->Now();
  for (LiveText::Change& c : hub_->TakeChanges()) {
    if (c.ended) continue;  // PutEnded wrote it
    const std::pair<std::string, std::string> key{c.run_id, c.path};
    ended_.erase(key);  // a new attempt's row replaces the ended one's
    const absl::Status put = store_->PutLiveText(LiveTextRow{
        .run_id = c.run_id, .path = c.path, .attempt = c.attempt, .writer = writer_,
        .text = std::move(c.text)});
    Warn(put, "not stored");
    put_at_[key] = put.ok() ? now : absl::InfinitePast();  // a failed put is tried again
  }
  for (auto it = ended_.begin(); it != ended_.end();) {
    if (!all && it->second.delete_at > now) {
      ++it;
      continue;
    }
    const absl::Status gone =
        store_->DeleteLiveText(it->first.first, it->first.second, it->second.attempt);
    Warn(gone, "not deleted");
    it = gone.ok() ? ended_.erase(it) : std::next(it);  // tried again next tick
  }
  // A call that sent nothing for a while is put again, so its row does not
  // look left behind.
  for (auto& [key, at] : put_at_) {
    if (now - at < kRefreshEvery) continue;
    for (LiveCall& call : hub_->Calls(key.first)) {
      if (call.path != key.second) continue;
      const absl::Status put = store_->PutLiveText(
          LiveTextRow{.run_id = key.first, .path = call.path, .attempt = call.attempt,
                      .writer = writer_, .text = std::move(call.text)});
      Warn(put, "not stored");
      if (put.ok()) at = now;
    }
  }
}

void LiveTextRelay::Poll() {
  const std::vector<std::string> watched = hub_->WatchedRuns();
  const std::set<std::string> runs(watched.begin(), watched.end());
  for (auto it = seen_.begin(); it != seen_.end();) {
    it = runs.count(it->first) ? std::next(it) : seen_.erase(it);
  }
  for (const std::string& run_id : runs) {
    absl::StatusOr<std::vector<LiveTextRow>> rows = store_->ListLiveText(run_id, kStaleAfter);
    if (!rows.ok()) {
      Warn(rows.status(), "not read");
      continue;
    }
    std::map<std::string, const LiveTextRow*> now;
    for (const LiveTextRow& row : *rows) {
      if (row.writer != writer_) now[row.path] = &row;  // this engine's own go out in-process
    }
    std::map<std::string, Seen>& seen = seen_[run_id];
    for (auto it = seen.begin(); it != seen.end();) {
      auto row = now.find(it->first);
      if (row != now.end() && row->second->attempt == it->second.attempt) {
        ++it;
        continue;
      }
      if (!it->second.ended) {  // gone without its end seen (or a new attempt)
        hub_->Relay(LiveFrame{.kind = LiveFrame::Kind::kEnd,
                              .run_id = run_id,
                              .path = it->first,
                              .attempt = it->second.attempt,
                              .offset = static_cast<int64_t>(it->second.text.size())});
      }
      it = seen.erase(it);
    }
    for (const auto& [path, row] : now) {
      auto [it, fresh] = seen.try_emplace(path, Seen{.attempt = row->attempt});
      Seen& s = it->second;
      if (s.ended) continue;
      if (fresh && row->ended) {  // ended before this engine saw it: nothing to follow
        s.ended = true;
        continue;
      }
      if (!absl::StartsWith(row->text, s.text)) {
        hub_->Relay(LiveFrame{.kind = LiveFrame::Kind::kReset,
                              .run_id = run_id,
                              .path = path,
                              .attempt = s.attempt});
        s.text.clear();
      }
      if (row->text.size() > s.text.size()) {
        hub_->Relay(LiveFrame{.kind = LiveFrame::Kind::kDelta,
                              .run_id = run_id,
                              .path = path,
                              .attempt = s.attempt,
                              .offset = static_cast<int64_t>(s.text.size()),
                              .text = row->text.substr(s.text.size())});
      }
      s.text = row->text;
      if (row->ended) {
        hub_->Relay(LiveFrame{.kind = LiveFrame::Kind::kEnd,
                              .run_id = run_id,
                              .path = path,
                              .attempt = s.attempt,
                              .offset = static_cast<int64_t>(s.text.size())});
        s.ended = true;
        s.text.clear();  // kept only to tell the end was sent
      }
    }
    if (seen.empty()) seen_.erase(run_id);
  }
}

std::vector<LiveCall> LiveTextRelay::RemoteCalls(const std::string& run_id) {
  std::vector<LiveCall> out;
  absl::StatusOr<std::vector<LiveTextRow>> rows = store_->ListLiveText(run_id, kStaleAfter);
  if (!rows.ok()) {
    Warn(rows.status(), "not read");
    return out;
  }
  for (LiveTextRow& row : *rows) {
    if (row.writer == writer_ || row.ended) continue;
    out.push_back({.path = row.path, .attempt = row.attempt, .text = std::move(row.text)});
  }
  return out;
}

}  // namespace runloom::engine_internal
