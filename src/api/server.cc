// The Beast server: an acceptor, one HttpSession per connection (a strand),
// and the hand-off of a connection to an SseStream when a handler asks for
// a stream. Handlers run on the io threads (see ServerOptions::threads).
#include "runloom/http_server.h"
#include "runloom/mutex.h"

#include "api/api.h"
#include "api/errors.h"
#include "api/http_metrics.h"
#include "api/query.h"
#include "api/sse.h"
#include "core/log.h"

#include "absl/strings/str_cat.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/strand.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <exception>
#include <map>
#include <optional>
#include <thread>
#include <vector>

namespace runloom::api {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

class HttpSession;

namespace {
constexpr std::chrono::seconds kLingerTime{2};
constexpr uint64_t kMaxLingerBytes = uint64_t{16} << 20;
constexpr std::chrono::milliseconds kAcceptRetry{50};
}  // namespace

class Server::Impl {
 public:
  Impl(const ServerOptions& options, Engine* engine, Authenticator* auth,
       prometheus::Registry* registry, std::unique_ptr<HttpMetrics> metrics)
      : options_(options),
        engine_(engine),
        api_(engine, auth, registry, options.allow_kinds),
        metrics_(std::move(metrics)),
        ioc_(options.threads),
        acceptor_(asio::make_strand(ioc_)),
        hub_(engine, metrics_.get(), ioc_.get_executor(),
             {.keepalive_interval = options.keepalive_interval,
              .write_timeout = options.write_timeout,
              .feed = {.max_frames = options.stream_window_events,
                       .initial_events = std::min<int64_t>(
                           512, static_cast<int64_t>(options.stream_window_events))}}) {}

  absl::Status Listen();
  void RunThreads();
  void Shutdown();

  void Track(HttpSession* s, std::weak_ptr<HttpSession> w) ABSL_LOCKS_EXCLUDED(mu_) {
    runloom::MutexLock l(&mu_);
    sessions_[s] = std::move(w);
  }
  void Forget(HttpSession* s) ABSL_LOCKS_EXCLUDED(mu_) {
    runloom::MutexLock l(&mu_);
    sessions_.erase(s);
    if (sessions_.empty()) session_gone_.SignalAll();
  }
  uint16_t port() const { return port_; }
  bool stopping() const { return stopping_.load(); }

  const ServerOptions options_;
  Engine* const engine_;
  const Api api_;
  const std::unique_ptr<HttpMetrics> metrics_;

 private:
  void Accept();

  runloom::Mutex mu_;
  std::map<HttpSession*, std::weak_ptr<HttpSession>> sessions_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  runloom::CondVar session_gone_;  // signalled when the last session ends
  uint16_t port_ = 0;              // set by Listen()
  std::atomic<bool> stopping_{false};

  // Declared after the session table (destroyed before it: a session the
  // io_context still holds removes itself as it goes) and before the hub
  // (destroyed after it: the hub's callback posts to stream strands).
  asio::io_context ioc_;
  tcp::acceptor acceptor_;
  asio::steady_timer accept_retry_{acceptor_.get_executor()};  // on the acceptor's strand
  // Keeps run() going while there is momentarily nothing to do; reset by
  // Shutdown() once the connections are drained.
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_{
      ioc_.get_executor()};
  std::vector<std::thread> threads_;

 public:
  StreamHub hub_;
};

// One connection: read a request, answer it, repeat while keep-alive; or
// hand the socket to an SseStream. State owned by the connection's strand.
class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket socket, Server::Impl* server)
      : stream_(std::move(socket)), server_(server) {}
  ~HttpSession() { server_->Forget(this); }

  void Start() {
    server_->Track(this, weak_from_this());
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->ReadHeader(); });
  }

  // Graceful shutdown: an idle connection closes now; a busy one after its
  // answer.
  void OnShutdown() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      if (!self->busy_) self->CloseNow();
    });
  }

 private:
  void ReadHeader() {
    if (server_->stopping()) return CloseNow();
    busy_ = false;
    parser_.emplace();
    parser_->header_limit(server_->options_.max_header_bytes);
    parser_->body_limit(server_->options_.max_body_bytes);
    stream_.expires_after(absl::ToChronoMilliseconds(server_->options_.idle_timeout));
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    busy_ = true;
    if (ec) return OnReadError(ec);
    stream_.expires_after(absl::ToChronoMilliseconds(server_->options_.request_timeout));
    if (beast::iequals(parser_->get()[http::field::expect], "100-continue") &&
        !parser_->is_done()) {
      // curl asks before sending a larger body; answering saves it a 1 s wait.
      static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      asio::async_write(stream_, asio::buffer(kContinue, sizeof(kContinue) - 1),
                        [self = shared_from_this()](beast::error_code ec, size_t) {
                          if (ec) return self->CloseNow();
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->OnReadError(ec);
                       self->Handle();
                     });
  }

  void OnReadError(beast::error_code ec) {
    // The client may still be sending what we refused: read and drop it after
    // the answer, so closing does not reset the connection under the answer.
    linger_ = true;
    if (ec == http::error::body_limit) {
      return Send(ErrorResponse(413, "payload_too_large",
                                absl::StrCat("the request body is over ",
                                             server_->options_.max_body_bytes, " bytes")),
                  false);
    }
    if (ec == http::error::header_limit) {
      return Send(ErrorResponse(431, "headers_too_large", "the request headers are too large"),
                  false);
    }
    if (ec.category() == http::make_error_code(http::error::bad_target).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      return Send(ErrorResponse(400, "bad_request", "malformed HTTP request"), false);
    }
    CloseNow();  // timeout, hang-up, reset: nobody to answer
  }

  HttpRequest ToRequest() const {
    const http::request<http::string_body>& m = parser_->get();
    HttpRequest r;
    r.method = std::string(m.method_string());
    std::string target(m.target());
    size_t q = target.find('?');
    r.path = target.substr(0, q);
    if (q != std::string::npos) r.query = ParseQuery(target.substr(q + 1));
    r.body = m.body();
    r.authorization = std::string(m[http::field::authorization]);
    r.accept = std::string(m[http::field::accept]);
    r.content_type = std::string(m[http::field::content_type]);
    auto last = m.find("Last-Event-ID");
    r.has_last_event_id = last != m.end();
    if (r.has_last_event_id) r.last_event_id = std::string(last->value());
    if (auto tp = m.find("traceparent"); tp != m.end()) r.traceparent = std::string(tp->value());
    return r;
  }

  void Handle() {
    const absl::Time start = server_->engine_->clock()->Now();
    HttpRequest request = ToRequest();
    Dispatched d;
    try {
      d = server_->api_.Handle(request);
    } catch (const std::exception&) {
      // A handler's parser threw: a bug, not the client's; nothing to leak.
      d.result.response = ErrorResponse(500, "internal", "internal error");
    }
    const int status = d.result.stream ? 200 : d.result.response.status;
    server_->metrics_->ObserveRequest(
        d.route, request.method, status,
        absl::ToDoubleSeconds(server_->engine_->clock()->Now() - start));
    if (d.result.stream) return StartStream(*d.result.stream);
    Send(std::move(d.result.response), parser_->get().keep_alive());
  }

  void StartStream(const StreamRequest& request) {
    stream_.expires_never();
    auto s = std::make_shared<SseStream>(std::move(stream_), &server_->hub_, request);
    if (server_->hub_.Add(s)) s->Start();
    // Else shutting down: dropping `s` closes the connection.
  }

  void Send(HttpResponse r, bool keep_alive) {
    keep_alive = keep_alive && !server_->stopping();
    res_ = {};
    res_.result(static_cast<unsigned>(r.status));
    res_.version(11);
    res_.set(http::field::content_type, r.content_type);
    res_.set(http::field::cache_control, "no-store");
    res_.body() = std::move(r.body);
    res_.keep_alive(keep_alive);
    res_.prepare_payload();
    stream_.expires_after(absl::ToChronoMilliseconds(server_->options_.write_timeout));
    http::async_write(stream_, res_,
                      [self = shared_from_this(), keep_alive](beast::error_code ec, size_t) {
                        if (ec) return self->CloseNow();
                        if (!keep_alive) return self->linger_ ? self->Linger() : self->CloseNow();
                        self->ReadHeader();
                      });
  }

  // Half-closes, then discards what the client still sends (at most
  // kMaxLingerBytes, for at most kLingerTime) before closing.
  void Linger() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(kLingerTime);
    DrainSome();
  }

  void DrainSome() {
    stream_.async_read_some(asio::buffer(drain_),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->drained_ += n;
                              if (ec || self->drained_ > kMaxLingerBytes) return self->CloseNow();
                              self->DrainSome();
                            });
  }

  void CloseNow() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.close();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  Server::Impl* const server_;
  bool busy_ = false;
  bool closed_ = false;
  bool linger_ = false;
  uint64_t drained_ = 0;
  std::array<char, 8192> drain_{};
};

absl::Status Server::Impl::Listen() {
  beast::error_code ec;
  asio::ip::address address = asio::ip::make_address(options_.address, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address '", options_.address, "': ", ec.message()));
  }
  tcp::endpoint endpoint(address, options_.port);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.address, ":",
                                               options_.port, ": ", ec.message()));
  }
  port_ = acceptor_.local_endpoint(ec).port();
  Accept();
  return absl::OkStatus();
}

void Server::Impl::Accept() {
  acceptor_.async_accept(asio::make_strand(ioc_), [this](beast::error_code ec, tcp::socket s) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) {
      std::make_shared<HttpSession>(std::move(s), this)->Start();
      return Accept();
    }
    // Out of descriptors or memory: retrying at once would spin; wait a little.
    accept_retry_.expires_after(kAcceptRetry);
    accept_retry_.async_wait([this](beast::error_code wait_ec) {
      if (!wait_ec && acceptor_.is_open()) Accept();
    });
  });
}

void Server::Impl::RunThreads() {
  for (int i = 0; i < options_.threads; ++i) {
    threads_.emplace_back([this] {
      // A handler that throws (a bug: handlers catch what they call) must
      // not take its io thread with it.
      for (;;) {
        try {
          ioc_.run();
          return;
        } catch (const std::exception& e) {
          Log(DefaultLogger(), LogLevel::kError, "http: handler threw: ", e.what());
        }
      }
    });
  }
}

void Server::Impl::Shutdown() {
  std::vector<std::shared_ptr<HttpSession>> live;
  {
    runloom::MutexLock l(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    stopping_.store(true);
    for (auto& [p, w] : sessions_) {
      if (auto s = w.lock()) live.push_back(std::move(s));
    }
  }
  asio::post(acceptor_.get_executor(), [this] {
    beast::error_code ignored;
    acceptor_.close(ignored);
    accept_retry_.cancel();
  });
  hub_.CloseAll();
  for (auto& s : live) s->OnShutdown();
  live.clear();
  // In-flight requests finish, then their connections close; poll the two
  // tables (the hub's count changes under its own lock) up to drain_timeout.
  constexpr absl::Duration kPoll = absl::Milliseconds(20);
  for (absl::Duration waited; waited < options_.drain_timeout; waited += kPoll) {
    runloom::MutexLock l(&mu_);
    if (sessions_.empty() && hub_.open() == 0) break;
    session_gone_.WaitWithTimeout(&mu_, kPoll);
  }
  work_.reset();
  ioc_.stop();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Shutdown(); }

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options, Engine* engine,
                                                      Authenticator* auth,
                                                      prometheus::Registry* metrics) {
  if (engine == nullptr) return absl::InvalidArgumentError("server: no engine");
  if (options.threads < 1) return absl::InvalidArgumentError("server: threads must be >= 1");
  if (options.stream_window_events < 1) {
    return absl::InvalidArgumentError("server: stream_window_events must be >= 1");
  }
  absl::StatusOr<std::unique_ptr<HttpMetrics>> m = HttpMetrics::Create(metrics);
  if (!m.ok()) return m.status();
  auto impl = std::make_unique<Impl>(options, engine, auth, metrics, *std::move(m));
  absl::Status s = impl->Listen();
  if (!s.ok()) return s;
  impl->RunThreads();
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

uint16_t Server::port() const { return impl_->port(); }

const Api& Server::api() const { return impl_->api_; }

void Server::Shutdown() { impl_->Shutdown(); }

}  // namespace runloom::api
