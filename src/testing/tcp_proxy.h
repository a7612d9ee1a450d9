// TcpProxy: a TCP forwarder on loopback that a test can cut and heal, to
// put a network partition between one client (a worker) and a server
// (PostgreSQL) while everything else still reaches the server directly.
//
// It listens on 127.0.0.1 on a free port and forwards every connection to
// the target, one thread per connection. Two kinds of partition:
//   Cut()    closes every live connection (both sides see the stream end, a
//            FIN, not a reset) and, until Heal(), accepts new connections only
//            to close them at once, so the client fails fast. Bytes in flight
//            are lost.
//   Stall()  stops moving bytes, both ways, and stops accepting, until
//            Heal(); nothing is closed, so a client waits as it would behind
//            a network that drops packets, and whatever it sent meanwhile
//            arrives after the heal (late).
//
// Thread-safety: every method may be called from any thread. The destructor
// closes everything and joins its threads.
//
// Example:
//   absl::StatusOr<std::unique_ptr<TcpProxy>> proxy = TcpProxy::Start("127.0.0.1", pg_port);
//   ... connect a client to 127.0.0.1:(*proxy)->port() ...
//   (*proxy)->Cut();   // the client's connections drop; new ones are refused
//   (*proxy)->Heal();  // new connections go through again
#pragma once

#include "runloom/mutex.h"

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace runloom::testing {

class TcpProxy {
 public:
  // Listens on 127.0.0.1:0 and forwards to `target_host`:`target_port` (an
  // IPv4 address). kUnavailable when the socket cannot be set up.
  static absl::StatusOr<std::unique_ptr<TcpProxy>> Start(const std::string& target_host,
                                                         int target_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  // The port it listens on (127.0.0.1).
  int port() const { return port_; }
  // Drops every live connection and refuses new ones until Heal().
  void Cut() ABSL_LOCKS_EXCLUDED(mu_);
  // Holds every byte and every new connection until Heal().
  void Stall() { stalled_ = true; }
  // Lets connections through again (cut ones stay closed; stalled ones and
  // the connections that waited go on).
  void Heal() ABSL_LOCKS_EXCLUDED(mu_);
  // Connections forwarded so far, and refused while cut.
  int forwarded() const { return forwarded_.load(); }
  int refused() const { return refused_.load(); }

 private:
  // One forwarded connection: the client's socket and the target's. The
  // sockets are closed only by Reap (never by the pump thread), so Cut may
  // shut them down at any time without racing a reuse of the descriptor.
  struct Link {
    int client = -1;
    int server = -1;
    std::atomic<bool> closing{false};  // set by Reap before it shuts them down
    std::atomic<bool> done{false};
    std::thread pump;
  };

  TcpProxy(int listen_fd, int wake_fd, int port, std::string target_host, int target_port);
  void AcceptLoop() ABSL_LOCKS_EXCLUDED(mu_);
  static void Pump(Link* link, const std::atomic<bool>* stalled);
  // Joins and closes the links whose pump has ended (all of them with
  // `all`, after shutting them down).
  void Reap(bool all) ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  const int listen_fd_;
  const int wake_fd_;  // eventfd: wakes the accept loop on destruction
  const int port_;
  const std::string target_host_;
  const int target_port_;

  std::atomic<bool> stop_{false};
  std::atomic<bool> stalled_{false};
  std::atomic<int> forwarded_{0};
  std::atomic<int> refused_{0};

  runloom::Mutex mu_;
  bool cut_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::unique_ptr<Link>> links_ ABSL_GUARDED_BY(mu_);

  std::thread acceptor_;  // last: it uses the members above
};

}  // namespace runloom::testing
