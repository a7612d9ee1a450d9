#include "testing/scripted_http_server.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace runloom::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct ScriptedHttpServer::Impl {
  ScriptedHttpServer* owner = nullptr;
  Handler handler;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::thread thread;

  void Accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec) return;  // closed: the server is stopping
      std::make_shared<Session>(this, std::move(socket))->Read();
      Accept();
    });
  }

  // One connection: read a request, answer as scripted, repeat.
  struct Session : std::enable_shared_from_this<Session> {
    Session(Impl* impl, tcp::socket socket)
        : impl(impl), stream(std::move(socket)), timer(impl->io) {}

    void Read() {
      request = {};
      http::async_read(stream, buffer, request,
                       [self = shared_from_this()](beast::error_code ec, size_t) {
                         if (!ec) self->OnRequest();
                       });
    }

    void OnRequest() {
      Request r{.method = std::string(request.method_string()),
                .target = std::string(request.target()),
                .body = request.body()};
      for (const auto& field : request) {
        r.headers[absl::AsciiStrToLower(std::string(field.name_string()))] =
            std::string(field.value());
      }
      impl->owner->Record(r);
      reply = impl->handler(r);
      timer.expires_after(std::chrono::milliseconds(absl::ToInt64Milliseconds(reply.delay)));
      timer.async_wait([self = shared_from_this()](beast::error_code) { self->Answer(); });
    }

    void Answer() {
      if (reply.drop) {
        beast::error_code ignored;
        stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
        stream.socket().close(ignored);
        return;
      }
      if (!reply.chunks.empty()) {
        StartStream();
        return;
      }
      response = {};
      response.version(11);
      response.result(static_cast<unsigned>(reply.status));
      response.keep_alive(request.keep_alive());
      for (const auto& [name, value] : reply.headers) response.set(name, value);
      if (response.find(http::field::content_type) == response.end()) {
        response.set(http::field::content_type, "application/json");
      }
      response.body() = reply.body;
      response.prepare_payload();
      http::async_write(stream, response,
                        [self = shared_from_this()](beast::error_code ec, size_t) {
                          if (!ec && self->response.keep_alive()) self->Read();
                        });
    }

    // A streamed reply: the head, then each chunk on its own write with
    // chunk_interval before it, then the last chunk and a close (or only the
    // close, when cut).
    void StartStream() {
      std::string head = absl::StrCat(
          "HTTP/1.1 ", reply.status, " ",
          std::string(http::obsolete_reason(static_cast<http::status>(reply.status))), "\r\n");
      bool has_type = false;
      for (const auto& [name, value] : reply.headers) {
        has_type = has_type || absl::AsciiStrToLower(name) == "content-type";
        absl::StrAppend(&head, name, ": ", value, "\r\n");
      }
      if (!has_type) absl::StrAppend(&head, "Content-Type: text/event-stream\r\n");
      absl::StrAppend(&head, "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
      WriteThen(std::move(head), [](Session& s) { s.NextChunk(0); });
    }

    void NextChunk(size_t i) {
      if (reply.cut_after >= 0 && i >= static_cast<size_t>(reply.cut_after)) {
        Close();
        return;
      }
      if (i == reply.chunks.size()) {
        WriteThen("0\r\n\r\n", [](Session& s) { s.Close(); });
        return;
      }
      const absl::Duration wait = i == 0 ? absl::ZeroDuration() : reply.chunk_interval;
      timer.expires_after(std::chrono::microseconds(absl::ToInt64Microseconds(wait)));
      timer.async_wait([self = shared_from_this(), i](beast::error_code ec) {
        if (ec) return;
        const std::string& piece = self->reply.chunks[i];
        if (piece.empty()) {  // an empty chunk would end the body: skip it
          self->NextChunk(i + 1);
          return;
        }
        self->WriteThen(absl::StrCat(absl::Hex(piece.size()), "\r\n", piece, "\r\n"),
                        [i](Session& s) { s.NextChunk(i + 1); });
      });
    }

    void WriteThen(std::string bytes, std::function<void(Session&)> next) {
      auto data = std::make_shared<std::string>(std::move(bytes));
      asio::async_write(
          stream.socket(), asio::buffer(*data),
          [self = shared_from_this(), data, next = std::move(next)](beast::error_code ec, size_t) {
            if (!ec) next(*self);
          });
    }

    void Close() {
      beast::error_code ignored;
      stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
      stream.socket().close(ignored);
    }

    Impl* impl;
    beast::tcp_stream stream;
    asio::steady_timer timer;
    beast::flat_buffer buffer;
    http::request<http::string_body> request;
    http::response<http::string_body> response;
    Reply reply;
  };
};

absl::StatusOr<std::unique_ptr<ScriptedHttpServer>> ScriptedHttpServer::Start(Handler handler) {
  std::unique_ptr<ScriptedHttpServer> server(new ScriptedHttpServer());
  server->impl_ = std::make_unique<Impl>();
  Impl& impl = *server->impl_;
  impl.owner = server.get();
  impl.handler = std::move(handler);
  beast::error_code ec;
  const tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), 0);
  impl.acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl.acceptor.bind(endpoint, ec);
  if (!ec) impl.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("scripted HTTP server: ", ec.message()));
  server->port_ = impl.acceptor.local_endpoint().port();
  impl.Accept();
  impl.thread = std::thread([&impl] { impl.io.run(); });
  return server;
}

ScriptedHttpServer::~ScriptedHttpServer() {
  impl_->io.stop();  // drops the sessions with the io_context's handlers
  impl_->thread.join();
}

std::string ScriptedHttpServer::url() const { return absl::StrCat("http://127.0.0.1:", port_); }

std::vector<ScriptedHttpServer::Request> ScriptedHttpServer::requests() const {
  MutexLock l(&mu_);
  return requests_;
}

void ScriptedHttpServer::Record(const Request& r) {
  MutexLock l(&mu_);
  requests_.push_back(r);
}

}  // namespace runloom::testing
