// LiveTextRelay (observe/): streamed model text between processes (issue 24,
// streaming). LiveText reaches the subscribers of the engine that executes a
// call; this relay reaches the others (`serve --no-executors`, `runloom
// events --follow`, an engine on another machine) through the store's
// live_text rows (store.h, LiveTextStore):
//   - mirror: the calls this engine streams are put in the store at most
//     every tick (100 ms) while text arrives and at least every
//     kRefreshEvery while the call lasts; when a call ends its whole text is
//     put, marked ended, on the ending thread (before the step's record
//     commits), and the row is deleted kKeepEnded later;
//   - poll: for each run watched in this engine, the rows other engines put
//     are read every tick and turned into the frames LiveText's watchers get
//     (a delta for new text, a reset, an end).
// A polled delta is a tick or two behind the writer: cross-process
// streaming is for people watching; the step's record keeps the final text.
//
// Thread-safety: thread-safe. The ticks run on the relay's own thread (a
// PeriodicTask on the real clock: a simulated clock nobody advances must not
// stop the text).
#pragma once

#include "runloom/env.h"
#include "runloom/live_text.h"
#include "runloom/mutex.h"
#include "runloom/store.h"

#include "core/periodic_task.h"
#include "engine/observe/live_text.h"

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

#include <map>
#include <string>
#include <vector>

namespace runloom::engine_internal {

class LiveTextRelay {
 public:
  static constexpr absl::Duration kTick = absl::Milliseconds(100);
  // A streaming call's row is put again at least this often while it lasts
  // (a model may think for a while between pieces)...
  static constexpr absl::Duration kRefreshEvery = absl::Seconds(5);
  // ...so a row not put for this long was left by a writer that stopped.
  static constexpr absl::Duration kStaleAfter = absl::Seconds(15);
  // An ended call's row stays this long, for the pollers to see its end.
  static constexpr absl::Duration kKeepEnded = absl::Seconds(2);
  // Stop keeps the rows of calls that just ended this long at least: three
  // of the pollers' ticks.
  static constexpr absl::Duration kSeenByPollers = absl::Milliseconds(300);

  // `writer` names this engine instance in the rows it puts (unique among
  // the engines sharing the store). Every pointer must outlive the relay.
  LiveTextRelay(LiveText* hub, LiveTextStore* store, Logger* logger, std::string writer);
  ~LiveTextRelay();
  LiveTextRelay(const LiveTextRelay&) = delete;
  LiveTextRelay& operator=(const LiveTextRelay&) = delete;

  // Starts the ticks; idempotent.
  void Start();
  // Stops them, then deletes the rows it put that remain (waiting up to
  // kSeenByPollers for those of calls that ended just now).
  void Stop() ABSL_LOCKS_EXCLUDED(tick_mu_);

  // The calls of `run_id` that other engines stream now (from the store),
  // with their text so far.
  std::vector<LiveCall> RemoteCalls(const std::string& run_id);

  // One tick: the mirror, then the poll. Public for tests.
  void TickOnce() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Seen {  // a call of a watched run, as its frames went out
    int attempt = 1;
    std::string text;
    bool ended = false;
  };
  struct Ended {  // a row of an ended call, until it is deleted
    int attempt = 1;
    absl::Time delete_at;
  };
  // LiveText's end hook: the call's whole text, marked ended.
  void PutEnded(const LiveText::Change& call) ABSL_LOCKS_EXCLUDED(tick_mu_);
  // `all`: every ended row, due or not (Stop).
  void Mirror(bool all) ABSL_EXCLUSIVE_LOCKS_REQUIRED(tick_mu_);
  void Poll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(tick_mu_);
  void Warn(const absl::Status& s, const char* what) ABSL_LOCKS_EXCLUDED(mu_);

  LiveText* const hub_;
  LiveTextStore* const store_;
  Logger* const logger_;
  const std::string writer_;

  // Held by a tick (one at a time: the task's, a test's, Stop's) and by an
  // end's put, so that a tick's put of a call's earlier text never lands
  // after the put of its end.
  runloom::Mutex tick_mu_;
  // (run id, path) -> when this engine last put its row (a call streaming).
  std::map<std::pair<std::string, std::string>, absl::Time> put_at_ ABSL_GUARDED_BY(tick_mu_);
  // (run id, path) -> the row of an ended call, to delete.
  std::map<std::pair<std::string, std::string>, Ended> ended_ ABSL_GUARDED_BY(tick_mu_);
  // run id -> path -> what its watchers were sent.
  std::map<std::string, std::map<std::string, Seen>> seen_ ABSL_GUARDED_BY(tick_mu_);

  runloom::Mutex mu_;
  std::string last_error_ ABSL_GUARDED_BY(mu_);  // a store that stays down is one line

  PeriodicTask task_;  // last: its thread uses the members above
};

}  // namespace runloom::engine_internal
