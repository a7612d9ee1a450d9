// Server: the HTTP/1.1 front of the API (api.h) on Boost.Beast, asynchronous:
// a few threads run one io_context; each connection is a strand, so a slow
// client or a thousand open event streams hold no thread (docs/architecture.md).
//
// Limits: request body and header sizes (413 and 431), the time to receive a
// request's headers (idle_timeout, also the keep-alive idle limit) and its
// body (request_timeout), and the time to write a response (write_timeout).
// A request that breaks one is answered (when it still can be) and its
// connection closed; nothing is written to the store.
//
// Shutdown() is graceful: stop accepting, let in-flight requests finish,
// end event streams, close idle connections, then join the threads. The
// engine is the caller's: stop it after the server.
//
// Thread-safety: port() and Shutdown() may be called from any thread.
//
// Example:
//   RUNLOOM_ASSIGN_OR_RETURN(auto server,
//                            Server::Start({.port = 0}, engine.get(), &auth, registry.get()));
//   std::cout << "listening on " << server->port() << "\n";
//   ...
//   server->Shutdown();
#pragma once

#include "runloom/auth.h"
#include "runloom/engine.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace runloom::api {

class Api;

struct ServerOptions {
  // Address to bind; loopback by default (say 0.0.0.0 to serve others).
  std::string address = "127.0.0.1";
  // 0 = an ephemeral port (see Server::port()).
  uint16_t port = 8080;
  // Threads running the io_context. Handlers call the engine on them (reads
  // are short; writes wait for the store's group commit), so a few more
  // than cores keeps one slow write from holding every request.
  int threads = 4;
  // Larger bodies are refused with 413 before they are read.
  uint64_t max_body_bytes = uint64_t{1} << 20;
  // Larger request headers are refused with 431.
  uint32_t max_header_bytes = 16 * 1024;
  // To receive a request's headers, and how long a keep-alive connection may
  // sit idle between requests.
  absl::Duration idle_timeout = absl::Seconds(60);
  // To receive a request's body once its headers arrived.
  absl::Duration request_timeout = absl::Seconds(30);
  // To write one response or one burst of events; a client that reads no
  // more than that is dropped.
  absl::Duration write_timeout = absl::Seconds(30);
  // An event stream sends a comment when idle this long (proxies keep it open).
  absl::Duration keepalive_interval = absl::Seconds(15);
  // Each run with open event streams keeps its latest events rendered for
  // them (run_feed.h): at most this many; a stream further behind reads the
  // store itself until it has caught up.
  size_t stream_window_events = 1024;
  // How long Shutdown() waits for in-flight requests before it stops anyway.
  absl::Duration drain_timeout = absl::Seconds(10);
  // The step kinds a workflow registered through POST /api/v1/workflows may
  // use (`runloom serve --allow-kinds`); nullopt = every kind. `loop` and
  // `parallel` only group steps and are always allowed; an agent's tools
  // are steps like any other.
  std::optional<std::set<std::string>> allow_kinds;
};

class Server {
 public:
  // Binds, listens and starts the threads. `engine` (and `auth`, `metrics`)
  // must outlive the server; `auth` nullptr = no authentication (every
  // caller is admin "local"); `metrics` gets the HTTP metrics and is what
  // /metrics serializes (nullptr = none). kUnavailable when the address
  // cannot be bound; kInvalidArgument for a bad address or option.
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options, Engine* engine,
                                                       Authenticator* auth,
                                                       prometheus::Registry* metrics);
  // Shutdown(), if not done.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The bound port (the ephemeral one when options.port was 0).
  uint16_t port() const;
  // The route table, for tests and docs checks.
  const Api& api() const;
  // Graceful stop (see above). Idempotent.
  void Shutdown();

  class Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace runloom::api
