#include "steps/internal/spawn.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;  // NOLINT: POSIX declares it in no header.

namespace runloom::steps_internal {
namespace {

constexpr int kExecFailedCode = 127;  // the shell's "command not found"
constexpr int kErrorFd = 3;           // the command's end of the exec-error pipe
constexpr char kDefaultPath[] = "/usr/local/bin:/usr/bin:/bin";

// Signals a command starts with at their default action (an ignored one
// would survive execve).
constexpr int kDefaultSignals[] = {SIGPIPE, SIGINT,  SIGQUIT, SIGTERM, SIGHUP,  SIGUSR1,
                                   SIGUSR2, SIGCHLD, SIGALRM, SIGTSTP, SIGTTIN, SIGTTOU};

std::vector<std::string> BuildEnv(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    if (extra.count(entry.substr(0, entry.find('='))) == 0) env.push_back(entry);
  }
  for (const auto& [key, value] : extra) env.push_back(absl::StrCat(key, "=", value));
  return env;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// argv[0] as execve needs it: as given when it has a '/', else the first
// executable regular file of that name on the parent's PATH (what
// posix_spawnp and execvp do; done here because the child may not allocate).
// The errno on failure: ENOENT, or EACCES when a match was not executable.
int ResolveProgram(const std::string& name, std::string& path) {
  if (name.find('/') != std::string::npos) {
    path = name;
    return 0;
  }
  const char* env_path = std::getenv("PATH");
  int err = ENOENT;
  for (absl::string_view dir : absl::StrSplit(env_path != nullptr ? env_path : kDefaultPath, ':')) {
    std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", name);
    struct stat st {};
    if (stat(candidate.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (access(candidate.c_str(), X_OK) != 0) {
      err = EACCES;
      continue;
    }
    path = std::move(candidate);
    return 0;
  }
  return err;
}

// Everything the guard and the command need, allocated before fork().
struct Prepared {
  std::string program;
  std::vector<std::string> argv_strings;
  std::vector<std::string> env_strings;
  std::vector<char*> argv;
  std::vector<char*> envp;
  const char* cwd = nullptr;
};

void WriteErrno(int fd, int err) { [[maybe_unused]] ssize_t n = write(fd, &err, sizeof(err)); }

// In the command, after the second fork: async-signal-safe calls only.
[[noreturn]] void ExecCommand(const Prepared& p, const SpawnRequest& r, int error_fd) {
  // The pipe fds are above 2 (the caller makes sure), so these never
  // overlap, and dup2 clears O_CLOEXEC on the copies.
  if (dup2(r.stdin_fd, STDIN_FILENO) < 0 || dup2(r.stdout_fd, STDOUT_FILENO) < 0 ||
      dup2(r.stderr_fd, STDERR_FILENO) < 0) {
    WriteErrno(error_fd, errno);
    _exit(kExecFailedCode);
  }
  if (error_fd != kErrorFd) {
    if (dup3(error_fd, kErrorFd, O_CLOEXEC) < 0) _exit(kExecFailedCode);
  }
  close_range(kErrorFd + 1, ~0U, 0);
  if (p.cwd != nullptr && chdir(p.cwd) != 0) {
    WriteErrno(kErrorFd, errno);
    _exit(kExecFailedCode);
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig : kDefaultSignals) sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execve(p.program.c_str(), p.argv.data(), p.envp.data());
  WriteErrno(kErrorFd, errno);
  _exit(kExecFailedCode);
}

// The guard, after the first fork: async-signal-safe calls only. Never returns.
[[noreturn]] void RunGuard(const Prepared& p, const SpawnRequest& r, int error_fd, pid_t executor) {
  setpgid(0, 0);
  // Every signal waits for sigwaitinfo below; SIGCHLD at its default so the
  // command can be waited for even if the executor process ignores it.
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGCHLD, &dfl, nullptr);
  // The executor's death (or a SIGTERM/SIGINT/SIGHUP sent to the group)
  // takes the group down.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != executor) {  // it died before prctl
    kill(0, SIGKILL);
    _exit(kExecFailedCode);
  }
  // The command runs at the normal policy, whatever the executor thread
  // runs under (EngineOptions::batch_scheduling).
  sched_param normal{};
  sched_setscheduler(0, SCHED_OTHER, &normal);

  const pid_t command = fork();
  if (command == 0) ExecCommand(p, r, error_fd);
  if (command < 0) WriteErrno(error_fd, errno);
  // The guard keeps no fd: the caller sees EOF on the command's pipes when
  // the command (and whatever it started) closes them.
  close_range(0, ~0U, 0);
  if (command < 0) _exit(kExecFailedCode);

  sigset_t wake;
  sigemptyset(&wake);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&wake, sig);
  while (true) {
    siginfo_t info;
    const int sig = sigwaitinfo(&wake, &info);
    if (sig < 0) continue;  // EINTR
    if (sig != SIGCHLD) {
      kill(0, SIGKILL);  // the whole group, this guard included
      _exit(kExecFailedCode);
    }
    int status = 0;
    const pid_t done = waitpid(command, &status, WNOHANG);
    if (done != command) continue;
    if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
    // Die of the command's signal, so the caller reads the same status.
    const int term = WTERMSIG(status);
    sigaction(term, &dfl, nullptr);
    sigset_t just;
    sigemptyset(&just);
    sigaddset(&just, term);
    kill(getpid(), term);
    sigprocmask(SIG_UNBLOCK, &just, nullptr);
    _exit(128 + term);
  }
}

}  // namespace

std::string ErrnoText(int err) {
  const char* desc = strerrordesc_np(err);
  return desc != nullptr ? std::string(desc) : absl::StrCat("errno ", err);
}

absl::Status ErrnoStatus(int err, const std::string& what) {
  std::string msg = absl::StrCat(what, ": ", ErrnoText(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
    case EACCES:
    case ENOEXEC:
    case ELOOP:
    case ENAMETOOLONG:
    case E2BIG:
      return absl::InvalidArgumentError(msg);
    case EAGAIN:
    case EMFILE:
    case ENFILE:
    case ENOMEM:
      return absl::UnavailableError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::StatusOr<pid_t> SpawnGuarded(const SpawnRequest& r) {
  const std::string cannot_run =
      absl::StrCat("exec: cannot run '", r.argv.empty() ? "" : r.argv[0], "'",
                   r.cwd.empty() ? "" : " in " + r.cwd, "; check the command and PATH");
  if (r.argv.empty()) return absl::InvalidArgumentError("exec: empty command");
  Prepared p;
  if (int err = ResolveProgram(r.argv[0], p.program); err != 0) {
    return ErrnoStatus(err, cannot_run);
  }
  p.argv_strings = r.argv;
  p.argv = CStrings(p.argv_strings);
  p.env_strings = BuildEnv(r.env);
  p.envp = CStrings(p.env_strings);
  if (!r.cwd.empty()) p.cwd = r.cwd.c_str();

  // The command reports a failed chdir or execve here; a successful execve
  // closes its end (O_CLOEXEC), so EOF means it started.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus(errno, "exec: cannot create a pipe");
  // Above the command's fds 0-3, so the dup2s in ExecCommand never hit it.
  const int error_w = fcntl(fds[1], F_DUPFD_CLOEXEC, kErrorFd + 1);
  close(fds[1]);
  if (error_w < 0) {
    close(fds[0]);
    return ErrnoStatus(errno, "exec: cannot move a pipe fd");
  }
  const pid_t executor = getpid();
  const pid_t guard = fork();
  if (guard == 0) RunGuard(p, r, error_w, executor);
  const int fork_errno = errno;
  close(error_w);
  if (guard < 0) {
    close(fds[0]);
    return ErrnoStatus(fork_errno, "exec: cannot start a process");
  }
  // Also here, so a kill(-guard) from the caller can never miss the group.
  setpgid(guard, guard);
  int child_errno = 0;
  ssize_t n = 0;
  while ((n = read(fds[0], &child_errno, sizeof(child_errno))) < 0 && errno == EINTR) {
  }
  close(fds[0]);
  if (n == static_cast<ssize_t>(sizeof(child_errno))) {
    kill(-guard, SIGKILL);
    int status = 0;
    while (waitpid(guard, &status, 0) < 0 && errno == EINTR) {
    }
    return ErrnoStatus(child_errno, cannot_run);
  }
  return guard;
}

}  // namespace runloom::steps_internal
