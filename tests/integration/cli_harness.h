// Runs the real `runloom` binary (RUNLOOM_BINARY, set by ctest) in temp dirs.
#pragma once

#include "nlohmann/json.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <signal.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

namespace runloom::testing {

inline std::string SourceDir() {
  const char* s = std::getenv("RUNLOOM_SOURCE_DIR");
  return s ? s : RUNLOOM_SOURCE_DIR_DEFAULT;
}

inline std::string Binary() {
  const char* s = std::getenv("RUNLOOM_BINARY");
  return s ? s : RUNLOOM_BINARY_DEFAULT;
}

inline std::string MakeTempDir(const std::string& tag) {
  static std::atomic<int> n{0};
  auto dir = std::filesystem::temp_directory_path() /
             ("runloom-" + tag + "-" + std::to_string(getpid()) + "-" + std::to_string(n++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// How a child starts: in `cwd` ("" = the test's), with `env` set (an empty
// value unsets the variable).
struct ChildSetup {
  std::string cwd;
  std::vector<std::pair<std::string, std::string>> env;
  std::string program;  // "" = the runloom binary; else this executable's path
};

// A child process running `runloom args...` (or setup.program's), stdout+stderr to `log`.
class Child {
 public:
  Child(const std::vector<std::string>& args, const std::string& log,
        const ChildSetup& setup = {}) {
    pid_ = fork();
    if (pid_ == 0) {
      if (!setup.cwd.empty() && chdir(setup.cwd.c_str()) != 0) _exit(126);
      for (const auto& [name, value] : setup.env) {
        if (value.empty()) {
          unsetenv(name.c_str());
        } else {
          setenv(name.c_str(), value.c_str(), 1);
        }
      }
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      int null = open("/dev/null", O_RDONLY);
      dup2(null, 0);
      std::vector<char*> argv;
      std::string bin = setup.program.empty() ? Binary() : setup.program;
      argv.push_back(bin.data());
      std::vector<std::string> copy = args;
      for (std::string& a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(bin.c_str(), argv.data());
      _exit(127);
    }
  }
  // Waits; returns the exit code, or 128+signal.
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
  }
  void Kill(int sig) { kill(pid_, sig); }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

struct Result {
  int code = -1;
  std::string out;
};

// Runs to completion and captures the combined output.
inline Result RunCli(const std::vector<std::string>& args, const ChildSetup& setup = {}) {
  std::string log = MakeTempDir("log") + "/out.txt";
  Child c(args, log, setup);
  Result r;
  r.code = c.Wait();
  r.out = ReadFile(log);
  return r;
}

// Runs and returns stdout only (stderr discarded), for --json output.
inline Result RunStdout(const std::vector<std::string>& args) {
  std::string dir = MakeTempDir("log");
  std::string cmd = Binary();
  for (const std::string& a : args) cmd += " '" + a + "'";
  cmd += " 2>" + dir + "/err.txt >" + dir + "/out.txt";
  Result r;
  int st = std::system(cmd.c_str());
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = ReadFile(dir + "/out.txt");
  return r;
}

// What every command that reads a run prints about it: status and events,
// as text and as JSON, one Result each.
inline std::vector<Result> ReadRunOutputs(const std::string& db, const std::string& run_id) {
  std::vector<Result> out;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"status", run_id, "--db", db},
        std::vector<std::string>{"status", run_id, "--db", db, "--json"},
        std::vector<std::string>{"events", run_id, "--db", db},
        std::vector<std::string>{"events", run_id, "--db", db, "--json"}}) {
    out.push_back(RunCli(args));
  }
  return out;
}

// `runloom status RUN --json`, parsed.
inline nlohmann::json StatusJson(const std::string& db, const std::string& run_id) {
  Result r = RunStdout({"status", run_id, "--db", db, "--json"});
  return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json{{"status", "unknown"}};
}

// `runloom events RUN --json`, one parsed event per line.
inline std::vector<nlohmann::json> EventsJson(const std::string& db, const std::string& run_id) {
  Result r = RunStdout({"events", run_id, "--db", db, "--json"});
  std::vector<nlohmann::json> out;
  std::stringstream ss(r.out);
  std::string line;
  while (std::getline(ss, line)) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

// Every command that opens a backend (but bench, which reads no environment
// variable), with arguments that would otherwise get as far as opening it.
inline std::vector<std::vector<std::string>> BackendCommands(const std::string& wf) {
  return {
      {"run", wf},
      {"run", wf, "--detach"},
      {"worker", "--until-idle"},
      {"status", "r_x"},
      {"events", "r_x"},
      {"workflows"},
      {"runs"},
      {"decide", "r_x", "--approve", "--digest", "sha256:x"},
      {"cancel", "r_x"},
      {"rerun", "r_x", "--from", "a"},
      {"reset", "--yes"},
      {"dead-letters"},
      {"dead-letters", "--redrive-all"},
      {"prune", "--older-than", "30d"},
  };
}

// The run id from `runloom run` output ("run r_...: ...").
inline std::string RunIdFrom(const std::string& out) {
  size_t p = out.find("run r_");
  if (p == std::string::npos) return "";
  size_t end = out.find_first_of(": \n", p + 4);
  return out.substr(p + 4, end - p - 4);
}

// The run id a child process (`runloom run`) logs to `log`, once it has
// (within 5 s); "" if it never does.
inline std::string AwaitRunIdIn(const std::string& log) {
  std::string run_id;
  for (int i = 0; i < 1000 && run_id.empty(); ++i) {
    run_id = RunIdFrom(ReadFile(log));
    if (run_id.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return run_id;
}

// The port a process printed after `marker` in its log file `log`, or 0
// when it has not after ~20 s.
inline uint16_t WaitForPortIn(const std::string& log, const std::string& marker) {
  for (int i = 0; i < 400; ++i) {
    const std::string text = ReadFile(log);
    const size_t at = text.find(marker);
    if (at != std::string::npos) {
      const size_t begin = at + marker.size();
      const size_t end = text.find_first_not_of("0123456789", begin);
      if (end != std::string::npos && end > begin && end - begin <= 5) {
        const unsigned long port = std::stoul(text.substr(begin, end - begin));
        if (port <= 65535) return static_cast<uint16_t>(port);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return 0;
}

// The port `runloom serve` printed in its log file `log` ("listening on
// http://127.0.0.1:PORT"), or 0 when it has not after ~20 s.
inline uint16_t WaitForServePort(const std::string& log) {
  return WaitForPortIn(log, "listening on http://127.0.0.1:");
}

}  // namespace runloom::testing
