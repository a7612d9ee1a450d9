#include "actions_server/actions_server.h"

#include "core/bounded_json.h"

#include "absl/strings/str_cat.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"

#include <algorithm>
#include <sys/socket.h>
#include <utility>

namespace runloom::examples {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr uint32_t kMaxHeaderBytes = 16 * 1024;
constexpr uint64_t kMaxBodyBytes = 64 * 1024;
constexpr size_t kMaxKeyBytes = 200;

nlohmann::json Error(const std::string& what) { return {{"error", what}}; }

}  // namespace

struct ActionsServer::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
};

ActionsServer::ActionsServer(ActionsServerOptions options)
    : options_(std::move(options)), impl_(std::make_unique<Impl>()) {
  runloom::MutexLock l(&mu_);
  drops_left_ = options_.drop_responses;
}

absl::StatusOr<std::unique_ptr<ActionsServer>> ActionsServer::Start(ActionsServerOptions options) {
  std::unique_ptr<ActionsServer> s(new ActionsServer(std::move(options)));
  boost::system::error_code ec;
  const asio::ip::address addr = asio::ip::make_address(s->options_.address, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("actions server: bad address '", s->options_.address, "': ", ec.message()));
  }
  tcp::acceptor& a = s->impl_->acceptor;
  const tcp::endpoint ep(addr, s->options_.port);
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("actions server: cannot listen on ",
                                               s->options_.address, ":", s->options_.port, ": ",
                                               ec.message()));
  }
  s->port_ = a.local_endpoint().port();
  s->acceptor_thread_ = std::thread([p = s.get()] { p->AcceptLoop(); });
  return s;
}

ActionsServer::~ActionsServer() { Stop(); }

std::string ActionsServer::url() const {
  return absl::StrCat("http://", options_.address, ":", port_);
}

std::vector<nlohmann::json> ActionsServer::Applied() const {
  runloom::MutexLock l(&mu_);
  return applied_;
}

bool ActionsServer::stopping() const {
  runloom::MutexLock l(&mu_);
  return stopping_;
}

bool ActionsServer::Track(int fd) {
  runloom::MutexLock l(&mu_);
  if (stopping_) return false;
  open_fds_.push_back(fd);
  return true;
}

void ActionsServer::Untrack(int fd) {
  runloom::MutexLock l(&mu_);
  open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), fd), open_fds_.end());
}

void ActionsServer::Stop() {
  std::vector<std::thread> threads;
  {
    runloom::MutexLock l(&mu_);
    if (stopping_) return;
    stopping_ = true;
    // Unblocks connection threads in read/write; their sockets close there.
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
  }
  // Unblocks accept(): shutdown on a listening socket makes it return.
  ::shutdown(impl_->acceptor.native_handle(), SHUT_RDWR);
  if (acceptor_thread_.joinable()) acceptor_thread_.join();
  {
    runloom::MutexLock l(&mu_);
    threads.swap(connections_);
  }
  for (std::thread& t : threads) t.join();
  boost::system::error_code ec;
  impl_->acceptor.close(ec);
}

bool ActionsServer::DeliverAfterApply() {
  runloom::MutexLock l(&mu_);
  if (options_.hold > absl::ZeroDuration()) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.hold);
  }
  if (drops_left_ > 0) {
    --drops_left_;
    return false;
  }
  return !stopping_;
}

ActionsServer::Answer ActionsServer::Handle(const std::string& method, const std::string& target,
                                            const std::string& key, const std::string& body) {
  Answer a;
  if (method == "GET" && target == "/healthz") {
    a.body = {{"ok", true}};
    return a;
  }
  if (method == "GET" && target == "/actions") {
    runloom::MutexLock l(&mu_);
    a.body = {{"actions", applied_}};
    return a;
  }
  if (target != "/actions" && target != "/actions/lookup") {
    a.status = 404;
    a.body = Error("no such endpoint; see POST /actions, GET /actions/lookup, GET /actions");
    return a;
  }
  if (key.empty() || key.size() > kMaxKeyBytes) {
    a.status = 400;
    a.body =
        Error(absl::StrCat("an Idempotency-Key header of 1-", kMaxKeyBytes, " bytes is required"));
    return a;
  }
  if (method == "GET" && target == "/actions/lookup") {
    runloom::MutexLock l(&mu_);
    auto it = by_key_.find(key);
    if (it == by_key_.end()) {
      a.status = 404;
      a.body = Error("no action was applied under this Idempotency-Key");
    } else {
      a.body = applied_[it->second];
    }
    return a;
  }
  if (method != "POST" || target != "/actions") {
    a.status = 405;
    a.body = Error("use POST /actions or GET /actions/lookup");
    return a;
  }
  absl::StatusOr<nlohmann::json> request = ParseJsonBounded(body, "request body");
  if (!request.ok() || !request->is_object()) {
    a.status = 400;
    a.body = Error("the body must be a JSON object");
    return a;
  }
  runloom::MutexLock l(&mu_);
  auto it = by_key_.find(key);
  if (it != by_key_.end()) {
    a.body = applied_[it->second];
    a.replayed = true;
    return a;
  }
  nlohmann::json record = {{"id", absl::StrCat("A-", applied_.size() + 1)},
                           {"idempotency_key", key},
                           {"request", *request}};
  by_key_[key] = applied_.size();
  applied_.push_back(record);
  a.status = 201;
  a.body = std::move(record);
  a.applied = true;
  return a;
}

void ActionsServer::AcceptLoop() {
  while (true) {
    auto socket = std::make_shared<tcp::socket>(impl_->io);
    boost::system::error_code ec;
    impl_->acceptor.accept(*socket, ec);
    if (ec || stopping()) return;
    const int fd = socket->native_handle();
    if (!Track(fd)) return;
    runloom::MutexLock l(&mu_);
    connections_.emplace_back([this, socket, fd] {
      beast::flat_buffer buffer;
      while (true) {
        http::request_parser<http::string_body> parser;
        parser.header_limit(kMaxHeaderBytes);
        parser.body_limit(kMaxBodyBytes);
        boost::system::error_code rec;
        http::read(*socket, buffer, parser, rec);
        if (rec == http::error::body_limit) {
          http::response<http::string_body> res{http::status::payload_too_large, 11};
          res.body() = Error("the body is over 64 KiB").dump();
          res.prepare_payload();
          http::write(*socket, res, rec);
          break;
        }
        if (rec) break;
        const auto& req = parser.get();
        Answer a = Handle(std::string(req.method_string()), std::string(req.target()),
                          std::string(req["Idempotency-Key"]), req.body());
        if (a.applied && options_.on_applied) options_.on_applied(a.body);
        if (a.applied && !DeliverAfterApply()) break;  // the response is lost
        http::response<http::string_body> res{static_cast<http::status>(a.status), req.version()};
        res.set(http::field::content_type, "application/json");
        if (a.replayed) res.set("Idempotent-Replayed", "true");
        res.keep_alive(req.keep_alive());
        res.body() = a.body.dump();
        res.prepare_payload();
        http::write(*socket, res, rec);
        if (rec || !req.keep_alive()) break;
      }
      Untrack(fd);
      boost::system::error_code cec;
      socket->shutdown(tcp::socket::shutdown_both, cec);
      socket->close(cec);
    });
  }
}

}  // namespace runloom::examples
