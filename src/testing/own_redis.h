// OwnRedis: a redis-server of one test alone, without persistence, so the
// test may kill it and start it again empty (a Redis restart that loses
// everything) or leave it down (an outage). Uses `redis-server` from PATH,
// on 127.0.0.1 and a port that was free.
//
// Thread-safety: not thread-safe; one test thread owns it.
#pragma once

#include "runloom/clock.h"

#include "redis/redis_client.h"
#include "testing/tcp_probe.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include <csignal>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <vector>

extern char** environ;

namespace runloom::testing {

class OwnRedis {
 public:
  ~OwnRedis() { Kill(); }
  // Starts the server (again on the same port after Kill) and waits until
  // it answers PING; kUnavailable if it cannot.
  absl::Status Start() {
    if (port_ == 0) {
      absl::StatusOr<int> port = ClosedLoopbackPort();
      if (!port.ok()) return port.status();
      port_ = *port;
    }
    const std::string port = absl::StrCat(port_);
    std::vector<std::string> args = {"redis-server", "--port",     port,     "--bind",
                                     "127.0.0.1",    "--save",     "",       "--appendonly",
                                     "no",           "--loglevel", "warning"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawnp(&pid_, "redis-server", nullptr, nullptr, argv.data(), environ) != 0) {
      return absl::UnavailableError("cannot start redis-server");
    }
    for (int i = 0; i < 100; ++i) {
      redis::RedisClient c({.host = "127.0.0.1", .port = port_}, {});
      if (absl::StatusOr<redis::RedisReply> r = c.Command({"PING"}); r.ok())
        return absl::OkStatus();
      RealClock()->SleepFor(absl::Milliseconds(50));
    }
    return absl::UnavailableError("redis-server did not answer PING");
  }
  // SIGKILL: everything in it is lost. No-op when not running.
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }
  std::string url() const { return absl::StrCat("redis://127.0.0.1:", port_); }

 private:
  int port_ = 0;
  pid_t pid_ = 0;
};

}  // namespace runloom::testing
