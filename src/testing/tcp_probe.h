// Loopback TCP helpers for tests that must prove a client did (or did not)
// try to connect: a listener that counts the connections it was offered, and
// a port on which nothing listens.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <utility>

namespace runloom::testing {

namespace tcp_probe_internal {

// A socket bound to 127.0.0.1 on a free port, and that port.
inline absl::StatusOr<std::pair<int, int>> BindLoopback() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return absl::InternalError(absl::StrCat("bind: ", std::strerror(errno)));
  }
  return std::make_pair(fd, static_cast<int>(ntohs(addr.sin_port)));
}

}  // namespace tcp_probe_internal

// Listens on 127.0.0.1 and never answers: Accepted() counts the
// connections clients opened to it (each is accepted and closed).
class TcpListener {
 public:
  static absl::StatusOr<std::unique_ptr<TcpListener>> Open() {
    auto bound = tcp_probe_internal::BindLoopback();
    if (!bound.ok()) return bound.status();
    constexpr int kBacklog = 16;
    if (listen(bound->first, kBacklog) != 0 || fcntl(bound->first, F_SETFL, O_NONBLOCK) != 0) {
      close(bound->first);
      return absl::InternalError(absl::StrCat("listen: ", std::strerror(errno)));
    }
    return std::unique_ptr<TcpListener>(new TcpListener(bound->first, bound->second));
  }
  ~TcpListener() { close(fd_); }
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  int port() const { return port_; }
  // Accepts (and closes) every connection waiting now; returns the total so far.
  int Accepted() {
    for (int c; (c = accept(fd_, nullptr, nullptr)) >= 0;) {
      close(c);
      ++accepted_;
    }
    return accepted_;
  }

 private:
  TcpListener(int fd, int port) : fd_(fd), port_(port) {}
  const int fd_;
  const int port_;
  int accepted_ = 0;
};

// A loopback port that was free a moment ago and has no listener: a connect
// to it is refused at once.
inline absl::StatusOr<int> ClosedLoopbackPort() {
  auto bound = tcp_probe_internal::BindLoopback();
  if (!bound.ok()) return bound.status();
  close(bound->first);
  return bound->second;
}

}  // namespace runloom::testing
