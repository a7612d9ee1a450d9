#include "testing/tcp_proxy.h"

#include "testing/tcp_probe.h"

#include "absl/strings/str_cat.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <utility>

namespace runloom::testing {
namespace {

constexpr int kBacklog = 64;
constexpr size_t kChunk = 64 * 1024;
// While stalled, how often a thread looks whether the stall is over.
constexpr int kStallPollMs = 5;

// Writes all of `data` to `fd`; false when the socket is gone.
bool SendAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

int ConnectTo(const std::string& host, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1 ||
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpProxy>> TcpProxy::Start(const std::string& target_host,
                                                          int target_port) {
  absl::StatusOr<std::pair<int, int>> bound = tcp_probe_internal::BindLoopback();
  if (!bound.ok()) return absl::UnavailableError(bound.status().message());
  const auto [fd, port] = *bound;
  if (listen(fd, kBacklog) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("listen: ", std::strerror(errno)));
  }
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("eventfd: ", std::strerror(errno)));
  }
  return std::unique_ptr<TcpProxy>(new TcpProxy(fd, wake, port, target_host, target_port));
}

TcpProxy::TcpProxy(int listen_fd, int wake_fd, int port, std::string target_host, int target_port)
    : listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      port_(port),
      target_host_(std::move(target_host)),
      target_port_(target_port),
      acceptor_([this] { AcceptLoop(); }) {}

TcpProxy::~TcpProxy() {
  stop_ = true;
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  acceptor_.join();
  Reap(/*all=*/true);
  close(listen_fd_);
  close(wake_fd_);
}

void TcpProxy::Cut() {
  {
    runloom::MutexLock l(&mu_);
    cut_ = true;
  }
  Reap(/*all=*/true);
}

void TcpProxy::Heal() {
  runloom::MutexLock l(&mu_);
  cut_ = false;
  stalled_ = false;
}

void TcpProxy::AcceptLoop() {
  while (!stop_) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 || stop_) continue;
    if ((fds[0].revents & POLLIN) == 0) continue;
    if (stalled_) {  // leave it in the backlog until the heal
      poll(nullptr, 0, kStallPollMs);
      continue;
    }
    const int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    Reap(/*all=*/false);
    bool cut;
    {
      runloom::MutexLock l(&mu_);
      cut = cut_;
    }
    const int server = cut ? -1 : ConnectTo(target_host_, target_port_);
    if (server < 0) {
      ++refused_;
      close(client);  // the client sees the connection closed at once
      continue;
    }
    ++forwarded_;
    auto link = std::make_unique<Link>();
    link->client = client;
    link->server = server;
    Link* raw = link.get();
    runloom::MutexLock l(&mu_);
    if (cut_) {  // cut while connecting: drop it like the others
      shutdown(client, SHUT_RDWR);
      shutdown(server, SHUT_RDWR);
    }
    link->pump = std::thread([raw, stalled = &stalled_] { Pump(raw, stalled); });
    links_.push_back(std::move(link));
  }
}

void TcpProxy::Pump(Link* link, const std::atomic<bool>* stalled) {
  char buf[kChunk];
  while (!link->closing) {
    pollfd fds[2] = {{link->client, POLLIN, 0}, {link->server, POLLIN, 0}};
    if (poll(fds, 2, stalled->load() ? kStallPollMs : -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (stalled->load()) {  // leave the bytes where they are until the heal
      poll(nullptr, 0, kStallPollMs);
      continue;
    }
    bool open = true;
    for (int i = 0; i < 2 && open; ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = recv(fds[i].fd, buf, sizeof(buf), 0);
      open = n > 0 && SendAll(fds[1 - i].fd, buf, static_cast<size_t>(n));
    }
    if (!open) break;
  }
  // Either side ended (or Cut shut both down): end the other side too.
  shutdown(link->client, SHUT_RDWR);
  shutdown(link->server, SHUT_RDWR);
  link->done = true;
}

void TcpProxy::Reap(bool all) {
  std::vector<std::unique_ptr<Link>> ended;
  {
    runloom::MutexLock l(&mu_);
    std::vector<std::unique_ptr<Link>> live;
    for (std::unique_ptr<Link>& link : links_) {
      if (all) {
        link->closing = true;
        shutdown(link->client, SHUT_RDWR);
        shutdown(link->server, SHUT_RDWR);
      }
      (all || link->done ? ended : live).push_back(std::move(link));
    }
    links_ = std::move(live);
  }
  for (std::unique_ptr<Link>& link : ended) {
    link->pump.join();
    close(link->client);
    close(link->server);
  }
}

}  // namespace runloom::testing
