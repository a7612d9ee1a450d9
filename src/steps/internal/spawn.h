// SpawnGuarded: starts an exec step's command so that its whole process tree
// dies with the process that started it, however that process dies.
//
// A plain child outlives a SIGKILLed parent (it is re-parented to PID 1), and
// so do its own children; a worker resuming the run would then start the
// step a second time beside the first. Here the command runs under a small
// guard process:
//
//   executor thread --fork--> guard (leader of a new process group; its
//                             parent-death signal is SIGTERM)
//                               --fork+execve--> the command (same group)
//
// The guard waits for the command and exits with its status (or dies of its
// signal), so the caller sees the command's end as before. When the executor
// thread's process dies first, the kernel sends the guard SIGTERM, and the
// guard SIGKILLs the whole group: the command and everything it started.
// Step timeouts, cancel and output limits still kill the group from the
// caller (kill(-pid, SIGKILL)).
//
// Written by hand: posix_spawn cannot set a parent-death signal, and no
// Debian library offers this. Between fork and execve the guard and the
// command call only async-signal-safe functions (the parent is
// multi-threaded); everything that allocates is prepared before the fork.
//
// Caveat (documented in operations.md): a guard that is itself SIGKILLed on
// its own (the OOM killer, `kill -9 <guard>`) leaves the command running.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <map>
#include <string>
#include <sys/types.h>
#include <vector>

namespace runloom::steps_internal {

struct SpawnRequest {
  // argv[0] without a '/' is looked up in the parent's PATH.
  std::vector<std::string> argv;
  std::string cwd;                         // "" = the parent's cwd
  std::map<std::string, std::string> env;  // added to (or overriding) the parent's environment
  // Become the command's fds 0, 1 and 2; every other fd is closed in it.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
};

// Returns the guard's pid, which is also the process group id. Errors:
// kInvalidArgument (no such program or cwd, not executable), kUnavailable
// (out of processes or memory), kInternal.
absl::StatusOr<pid_t> SpawnGuarded(const SpawnRequest& request);

// errno as text ("No such file or directory"), and as a status whose code
// says whether the caller's input is at fault (kInvalidArgument), the
// machine is short of something (kUnavailable), or neither (kInternal).
std::string ErrnoText(int err);
absl::Status ErrnoStatus(int err, const std::string& what);

}  // namespace runloom::steps_internal
