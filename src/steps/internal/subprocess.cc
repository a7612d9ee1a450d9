#include "steps/internal/subprocess.h"

#include "runloom/mutex.h"

#include "core/status_macros.h"
#include "steps/internal/spawn.h"

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <fcntl.h>
#include <memory>
#include <optional>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>

namespace runloom::steps_internal {
namespace {

constexpr int kPollIntervalMs = 15;    // how often deadline/stop are checked
constexpr int kDrainIdleMs = 200;      // after the kill: stop draining pipes idle this long
constexpr int kMaxDrainRounds = 1000;  // ...or after this many rounds (an escaped writer)
constexpr size_t kIoChunk = size_t{64} << 10;
constexpr int kMaxReadsPerRound = 16;  // bounds one round so deadlines stay prompt

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    Reset(std::exchange(other.fd_, -1));
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Reset(int fd = -1) {
    if (fd_ >= 0) {
      close(fd_);
    }
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

struct Pipe {
  Fd read;
  Fd write;
};

absl::StatusOr<Pipe> MakePipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return ErrnoStatus(errno, "exec: cannot create a pipe");
  }
  Pipe p{Fd(fds[0]), Fd(fds[1])};
  return p;
}

// Gives `fd` a number above 2, so that the child's dup2 onto 0-2 never has
// source == target (which would leave O_CLOEXEC set) or clobbers another pipe.
absl::Status KeepAboveStdio(Fd& fd) {
  if (fd.get() > 2) {
    return absl::OkStatus();
  }
  const int moved = fcntl(fd.get(), F_DUPFD_CLOEXEC, 3);
  if (moved < 0) {
    return ErrnoStatus(errno, "exec: cannot move a pipe fd");
  }
  fd.Reset(moved);
  return absl::OkStatus();
}

absl::Status SetNonBlocking(const Fd& fd) {
  const int flags = fcntl(fd.get(), F_GETFL);
  if (flags < 0 || fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK) < 0) {
    return ErrnoStatus(errno, "exec: cannot make a pipe non-blocking");
  }
  return absl::OkStatus();
}

// Signals the child's process group until the child is reaped. Shared with
// the OnStop callback, which runs on another thread and may outlive the
// RunSubprocess frame. Reaping happens under mu_, so a kill never reaches a
// process group id that was freed and reused.
class GroupKiller {
 public:
  explicit GroupKiller(pid_t pid) : pid_(pid) {}
  GroupKiller(const GroupKiller&) = delete;
  GroupKiller& operator=(const GroupKiller&) = delete;

  void Kill() ABSL_LOCKS_EXCLUDED(mu_) {
    runloom::MutexLock l(&mu_);
    if (!reaped_) {
      kill(-pid_, SIGKILL);
    }
  }

  // The OnStop path: kills and remembers why, so a child that died of this
  // SIGKILL is reported as stopped, not as killed by a signal.
  void KillForStop() ABSL_LOCKS_EXCLUDED(mu_) {
    runloom::MutexLock l(&mu_);
    if (!reaped_) {
      stopped_ = true;
      kill(-pid_, SIGKILL);
    }
  }

  bool stopped() ABSL_LOCKS_EXCLUDED(mu_) {
    runloom::MutexLock l(&mu_);
    return stopped_;
  }

  // REQUIRES: the child has exited or was sent SIGKILL, so this returns soon.
  // nullopt when someone else reaped it (SIGCHLD ignored, or waitpid(-1)).
  std::optional<int> Reap() ABSL_LOCKS_EXCLUDED(mu_) {
    runloom::MutexLock l(&mu_);
    int status = 0;
    pid_t r = 0;
    while ((r = waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    if (r != pid_) {
      return std::nullopt;
    }
    return status;
  }

 private:
  const pid_t pid_;  // also the process group id
  runloom::Mutex mu_;
  bool reaped_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

// True once the child has exited; leaves it a zombie (WNOWAIT), so its pid
// and process group id stay reserved until Reap().
bool ChildExited(pid_t pid) {
  siginfo_t info;
  memset(&info, 0, sizeof(info));
  while (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) < 0) {
    if (errno != EINTR) {
      return true;  // ECHILD: someone else reaped it; Reap() reports that
    }
  }
  return info.si_pid == pid;
}

// write() that returns EPIPE instead of raising SIGPIPE, without touching the
// process-wide disposition: SIGPIPE is blocked in this thread for the call
// and a SIGPIPE this write raised is consumed before unblocking.
ssize_t WriteNoSigpipe(int fd, const char* data, size_t n) {
  sigset_t pipe_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigset_t pending;
  sigemptyset(&pending);
  sigpending(&pending);
  const bool already_pending = sigismember(&pending, SIGPIPE) == 1;
  sigset_t old_mask;
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
  const ssize_t written = write(fd, data, n);
  const int err = errno;
  if (written < 0 && err == EPIPE && !already_pending) {
    const timespec zero = {0, 0};
    while (sigtimedwait(&pipe_set, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  errno = err;
  return written;
}

// The parent's ends of the three pipes and what is left to write.
struct ChildIo {
  Fd in;
  Fd out;
  Fd err;
  const std::string* stdin_data = nullptr;
  size_t stdin_offset = 0;
};

void WriteStdin(ChildIo& io) {
  const std::string& data = *io.stdin_data;
  while (io.stdin_offset < data.size()) {
    const size_t n = std::min(kIoChunk, data.size() - io.stdin_offset);
    const ssize_t w = WriteNoSigpipe(io.in.get(), data.data() + io.stdin_offset, n);
    if (w > 0) {
      io.stdin_offset += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) {
      continue;
    }
    if (w < 0 && errno == EAGAIN) {
      return;
    }
    break;  // EPIPE: the child closed stdin without reading it all; that is its choice
  }
  io.in.Reset();  // all written (or unwanted): EOF for the child
}

void AppendTail(std::string& tail, const char* data, size_t n) {
  tail.append(data, n);
  if (tail.size() > 2 * kStderrTailBytes) {
    tail.erase(0, tail.size() - kStderrTailBytes);
  }
}

// Reads what `fd` has now into `sink`; closes it at EOF or on an error.
template <typename Sink>
void ReadAvailable(Fd& fd, Sink sink) {
  std::array<char, kIoChunk> buf;
  for (int i = 0; i < kMaxReadsPerRound; ++i) {
    const ssize_t r = read(fd.get(), buf.data(), buf.size());
    if (r > 0) {
      sink(buf.data(), static_cast<size_t>(r));
      continue;
    }
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r < 0 && errno == EAGAIN) {
      return;
    }
    fd.Reset();
    return;
  }
}

// One poll() round over the open pipes. Returns the number of ready fds (0
// when poll timed out), or an error.
absl::StatusOr<int> PollRound(ChildIo& io, int timeout_ms, SubprocessResult& result) {
  std::array<pollfd, 3> pfds{};
  std::array<Fd*, 3> owners{};
  nfds_t n = 0;
  for (Fd* fd : {&io.in, &io.out, &io.err}) {
    if (fd->valid()) {
      pfds[n] = pollfd{fd->get(), static_cast<short>(fd == &io.in ? POLLOUT : POLLIN), 0};
      owners[n++] = fd;
    }
  }
  const int ready = poll(n == 0 ? nullptr : pfds.data(), n, timeout_ms);
  if (ready < 0) {
    if (errno == EINTR) {
      return 0;
    }
    return ErrnoStatus(errno, "exec: poll on the child's pipes failed");
  }
  for (nfds_t i = 0; i < n; ++i) {
    if (pfds[i].revents == 0) {
      continue;
    }
    if (owners[i] == &io.in) {
      WriteStdin(io);
    } else if (owners[i] == &io.out) {
      ReadAvailable(io.out, [&](const char* d, size_t len) { result.stdout_data.append(d, len); });
    } else {
      ReadAvailable(io.err,
                    [&](const char* d, size_t len) { AppendTail(result.stderr_tail, d, len); });
    }
  }
  return ready;
}

int PollTimeoutMs(absl::Duration remaining) {
  const int64_t ms = absl::ToInt64Milliseconds(absl::Ceil(remaining, absl::Milliseconds(1)));
  return static_cast<int>(std::clamp<int64_t>(ms, 1, kPollIntervalMs));
}

// Feeds and drains the child until it exits, the deadline passes, the step
// is stopped or stdout grows too large. Returns how the wait ended.
absl::StatusOr<SubprocessEnd> Supervise(StepContext& ctx, pid_t pid, const SubprocessSpec& spec,
                                        ChildIo& io, SubprocessResult& result) {
  const absl::Time deadline = ctx.deadline();
  while (!ChildExited(pid)) {
    if (ctx.Stopping()) {
      return SubprocessEnd::kStopped;
    }
    const absl::Time now = ctx.clock()->Now();
    if (now >= deadline) {
      return SubprocessEnd::kTimedOut;
    }
    if (result.stdout_data.size() > spec.max_stdout_bytes) {
      return SubprocessEnd::kOutputTooLarge;
    }
    RUNLOOM_RETURN_IF_ERROR(PollRound(io, PollTimeoutMs(deadline - now), result).status());
  }
  return SubprocessEnd::kExited;
}

// After the group is killed: reads what the pipes still hold, until EOF, or
// until they stay idle (a process that left the group may hold them open).
void Drain(ChildIo& io, SubprocessResult& result) {
  io.in.Reset();
  for (int round = 0; round < kMaxDrainRounds && (io.out.valid() || io.err.valid()); ++round) {
    absl::StatusOr<int> ready = PollRound(io, kDrainIdleMs, result);
    if (!ready.ok() || *ready == 0) {
      break;
    }
  }
}

void TrimTail(std::string& tail) {
  if (tail.size() <= kStderrTailBytes) {
    return;
  }
  tail.erase(0, tail.size() - kStderrTailBytes);
  // Do not start in the middle of a UTF-8 sequence.
  size_t skip = 0;
  while (skip < tail.size() && skip < 3 &&
         (static_cast<unsigned char>(tail[skip]) & 0xC0) == 0x80) {
    ++skip;
  }
  tail.erase(0, skip);
}

}  // namespace

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? absl::StrCat("SIG", abbrev) : absl::StrCat("signal ", sig);
}

absl::StatusOr<SubprocessResult> RunSubprocess(StepContext& ctx, const SubprocessSpec& spec) {
  SubprocessResult result;
  const absl::Time start = ctx.clock()->Now();
  if (spec.argv.empty()) {
    return absl::InvalidArgumentError("exec: empty command");
  }
  if (ctx.Stopping()) {
    result.end = SubprocessEnd::kStopped;
    return result;
  }
  if (!spec.cwd.empty()) {
    struct stat st;
    if (stat(spec.cwd.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat("exec: cwd '", spec.cwd, "' is not a directory; fix the step's cwd"));
    }
  }
  RUNLOOM_ASSIGN_OR_RETURN(Pipe in, MakePipe());
  RUNLOOM_ASSIGN_OR_RETURN(Pipe out, MakePipe());
  RUNLOOM_ASSIGN_OR_RETURN(Pipe err, MakePipe());
  for (Fd* fd : {&in.read, &out.write, &err.write}) {
    RUNLOOM_RETURN_IF_ERROR(KeepAboveStdio(*fd));
  }
  for (Fd* fd : {&in.write, &out.read, &err.read}) {
    RUNLOOM_RETURN_IF_ERROR(SetNonBlocking(*fd));
  }
  RUNLOOM_ASSIGN_OR_RETURN(
      const pid_t pid,
      SpawnGuarded(SpawnRequest{spec.argv, spec.cwd, spec.env, in.read.get(), out.write.get(),
                                err.write.get()}));
  in.read.Reset();
  out.write.Reset();
  err.write.Reset();

  auto killer = std::make_shared<GroupKiller>(pid);
  ctx.OnStop([killer] { killer->KillForStop(); });
  ChildIo io{std::move(in.write), std::move(out.read), std::move(err.read), &spec.stdin_data, 0};
  if (spec.stdin_data.empty()) {
    io.in.Reset();
  }
  absl::StatusOr<SubprocessEnd> end = Supervise(ctx, pid, spec, io, result);
  // The step owns its process group: whatever is still running in it dies
  // with the step, however the step ended.
  killer->Kill();
  const std::optional<int> wait_status = killer->Reap();
  ctx.OnStop(nullptr);
  Drain(io, result);
  TrimTail(result.stderr_tail);
  result.elapsed = ctx.clock()->Now() - start;
  RUNLOOM_RETURN_IF_ERROR(end.status());
  if (!wait_status.has_value()) {
    return absl::InternalError(
        "exec: the child's exit status was lost (another part of the process reaped it: is "
        "SIGCHLD ignored, or does something call waitpid(-1)?)");
  }
  result.end = *end;
  if (result.end == SubprocessEnd::kExited && killer->stopped()) {
    result.end = SubprocessEnd::kStopped;  // the OnStop callback killed it
  }
  if (result.end != SubprocessEnd::kExited) {
    return result;
  }
  if (result.stdout_data.size() > spec.max_stdout_bytes) {
    result.end = SubprocessEnd::kOutputTooLarge;
  } else if (WIFEXITED(*wait_status)) {
    result.exit_code = WEXITSTATUS(*wait_status);
  } else if (WIFSIGNALED(*wait_status)) {
    result.end = SubprocessEnd::kSignaled;
    result.term_signal = WTERMSIG(*wait_status);
  }
  return result;
}

}  // namespace runloom::steps_internal
