// Test-only: a small blocking HTTP/1.1 client and Server-Sent Events reader
// over Boost.Beast, for the API tests (real sockets on 127.0.0.1).
#pragma once

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "nlohmann/json.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace runloom::api::testing {

struct ClientResponse {
  int status = 0;
  std::string body;
  std::string content_type;
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

// One request per connection; `token` "" = no Authorization header.
inline ClientResponse Request(
    uint16_t port, const std::string& method, const std::string& target,
    const std::string& body = "", const std::string& token = "",
    const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  boost::asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.method_string(method);
  req.set(http::field::host, "127.0.0.1");
  if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  for (const auto& [name, value] : headers) req.set(name, value);
  if (!body.empty()) req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  beast::error_code ec;
  http::write(stream, req, ec);  // a refused body may be cut short; read the answer anyway
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  http::read(stream, buffer, parser, ec);
  ClientResponse out;
  if (ec) {
    out.status = -1;
    out.body = ec.message();
    return out;
  }
  out.status = static_cast<int>(parser.get().result_int());
  out.body = parser.get().body();
  out.content_type = std::string(parser.get()[http::field::content_type]);
  return out;
}

struct SseEvent {
  std::string id;
  std::string event;
  std::string data;
};

// Opens an event stream and reads it in pieces, with a deadline per read.
class SseReader {
 public:
  SseReader(uint16_t port, const std::string& target, const std::string& token,
            std::optional<std::string> last_event_id = std::nullopt)
      : socket_(ioc_) {
    socket_.connect({boost::asio::ip::make_address("127.0.0.1"), port});
    std::string req =
        "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "Accept: text/event-stream\r\n";
    if (!token.empty()) req += "Authorization: Bearer " + token + "\r\n";
    if (last_event_id) req += "Last-Event-ID: " + *last_event_id + "\r\n";
    req += "\r\n";
    boost::asio::write(socket_, boost::asio::buffer(req));
  }

  // Reads until `n` events arrived (or the stream ended, or `timeout`).
  std::vector<SseEvent> ReadEvents(size_t n, std::chrono::milliseconds timeout) {
    std::vector<SseEvent> out;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (out.size() < n) {
      if (TakeEvent(out)) continue;
      if (ended_ || std::chrono::steady_clock::now() >= deadline) break;
      ReadSome(deadline);
    }
    return out;
  }
  // Reads everything until the server ends the stream (or `timeout`).
  std::vector<SseEvent> ReadToEnd(std::chrono::milliseconds timeout) {
    return ReadEvents(SIZE_MAX, timeout);
  }
  // The headers and comments seen so far (raw text that is not an event).
  const std::string& raw() const { return raw_; }
  bool ended() const { return ended_; }
  void Cut() {
    boost::system::error_code ignored;
    socket_.close(ignored);
  }

 private:
  void ReadSome(std::chrono::steady_clock::time_point deadline) {
    char buf[4096];
    bool done = false;
    socket_.async_read_some(boost::asio::buffer(buf), [&](boost::system::error_code ec, size_t n) {
      done = true;
      if (ec && ec != boost::asio::error::operation_aborted) ended_ = true;
      pending_.append(buf, n);
      raw_.append(buf, n);
    });
    ioc_.restart();
    ioc_.run_until(deadline);
    if (!done) {
      socket_.cancel();
      ioc_.restart();
      ioc_.run();
    }
  }

  // Moves one complete event out of pending_ (skipping the headers and
  // comments); false when none is complete yet.
  bool TakeEvent(std::vector<SseEvent>& out) {
    if (!headers_done_) {
      size_t end = pending_.find("\r\n\r\n");
      if (end == std::string::npos) return false;
      pending_.erase(0, end + 4);
      headers_done_ = true;
    }
    while (true) {
      size_t end = pending_.find("\n\n");
      if (end == std::string::npos) return false;
      std::string block = pending_.substr(0, end);
      pending_.erase(0, end + 2);
      SseEvent e;
      bool any = false;
      for (absl::string_view line : absl::StrSplit(block, '\n')) {
        if (absl::ConsumePrefix(&line, "id: ")) e.id = std::string(line), any = true;
        if (absl::ConsumePrefix(&line, "event: ")) e.event = std::string(line), any = true;
        if (absl::ConsumePrefix(&line, "data: ")) e.data = std::string(line), any = true;
      }
      if (any) {
        out.push_back(std::move(e));
        return true;
      }
    }
  }

  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::socket socket_;
  std::string pending_;
  std::string raw_;
  bool headers_done_ = false;
  bool ended_ = false;
};

}  // namespace runloom::api::testing
