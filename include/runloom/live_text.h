// Streamed model replies as values (issue 24): what Engine::LiveCalls and
// Engine::WatchLive give.
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>

namespace runloom {

// Streaming (issue 24): a model call of a step with `stream: true` sends its
// reply's text to the run's live subscribers as it arrives. Not stored one by
// one: the step record keeps the final text. A subscriber sees the calls its
// engine executes at once, and those of other processes through the store
// (Store::ListLiveText), a tick or two behind.
struct LiveCall {
  std::string path;  // the step's path, e.g. "write" or "triage/turn[2]"
  int attempt = 1;
  std::string text;  // the text so far
};
struct LiveFrame {
  enum class Kind {
    kDelta,  // `text` was appended at `offset` (bytes into the call's text)
    kReset,  // the call's text so far is void (its provider sends it again)
    kEnd,    // the call ended (its step's record follows in the events)
  };
  Kind kind = Kind::kDelta;
  std::string run_id;
  std::string path;
  int attempt = 1;
  int64_t offset = 0;
  std::string text;
};

}  // namespace runloom
