// Runs one child process for the `exec` step kind, with a deadline and a stop
// signal, in its own process group.
//
// Written by hand: no Debian library combines process groups, timeouts and
// cancellation well. The child is started under a guard process that leads
// a new process group and takes the group down if this process dies
// (spawn.h), with only fds 0-2 open. The parent feeds stdin and drains stdout/stderr with poll() in
// short rounds, so a chatty child cannot deadlock on a full pipe, and checks
// the deadline and the stop flag between rounds. However the child ends,
// anything left in its process group is SIGKILLed and the child is reaped.
#pragma once

#include "runloom/step.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace runloom::steps_internal {

inline constexpr size_t kStderrTailBytes = 4096;
inline constexpr size_t kMaxStdoutBytes = size_t{64} << 20;  // 64 MiB

struct SubprocessSpec {
  // argv[0] is looked up in the parent's PATH unless it has a '/'.
  std::vector<std::string> argv;
  std::string cwd;                         // "" = the parent's cwd
  std::map<std::string, std::string> env;  // added to (or overriding) the parent's environment
  std::string stdin_data;                  // written to the child's stdin, which is then closed
  size_t max_stdout_bytes = kMaxStdoutBytes;
};

enum class SubprocessEnd {
  kExited,          // exit_code is set
  kSignaled,        // term_signal is set
  kTimedOut,        // ctx.deadline() passed; the group was killed
  kStopped,         // ctx.Stopping() turned true; the group was killed (or never started)
  kOutputTooLarge,  // stdout passed max_stdout_bytes; the group was killed
};

struct SubprocessResult {
  SubprocessEnd end = SubprocessEnd::kExited;
  int exit_code = 0;
  int term_signal = 0;
  std::string stdout_data;
  std::string stderr_tail;  // the last kStderrTailBytes bytes of stderr
  absl::Duration elapsed;   // on ctx.clock()
};

// Runs `spec` to completion. A non-OK status means the child could not be
// started: kInvalidArgument (no such program or cwd, permission denied),
// kUnavailable (out of processes or fds; may be retried) or kInternal.
absl::StatusOr<SubprocessResult> RunSubprocess(StepContext& ctx, const SubprocessSpec& spec);

// "SIGKILL" for 9, "signal 99" when unknown.
std::string SignalName(int sig);

}  // namespace runloom::steps_internal
