// ScriptedHttpServer: an HTTP/1.1 server on loopback whose answers a test
// scripts, standing in for a model provider or an external API.
//
// The handler sees each request and returns a Reply: a response, a response
// after a delay (to run a client into its timeout), or a dropped connection
// (closed after the request was read, with nothing sent: a lost response),
// or a streamed response: its body in `chunks`, sent with HTTP/1.1 chunked
// transfer-encoding `chunk_interval` apart, optionally cut (the connection
// closed without the last chunk) after `cut_after` of them.
// Connections are kept alive as HTTP/1.1 allows (a streamed reply closes
// its connection). Every request is recorded.
//
// Thread-safety: the handler runs on the server's one thread; the other
// methods may be called from any thread. The destructor stops the server,
// drops its connections and joins the thread.
//
// Example:
//   Reply{.chunks = {"data: {..}\n\n", "data: [DONE]\n\n"},
//         .chunk_interval = absl::Milliseconds(10)};
//   auto server = ScriptedHttpServer::Start([](const ScriptedHttpServer::Request& r) {
//     return ScriptedHttpServer::Reply{.status = 429, .headers = {{"retry-after", "1"}}};
//   });
//   SendHttp({.url = (*server)->url() + "/v1/chat/completions"});
#pragma once

#include "runloom/mutex.h"

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace runloom::testing {

class ScriptedHttpServer {
 public:
  struct Request {
    std::string method;
    std::string target;                          // path and query, as sent
    std::map<std::string, std::string> headers;  // names lower-cased
    std::string body;
  };
  struct Reply {
    int status = 200;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
    absl::Duration delay = absl::ZeroDuration();  // wait before answering
    bool drop = false;                            // close the connection without answering
    // Not empty: a streamed reply (`body` is ignored), one chunk each.
    std::vector<std::string> chunks;
    absl::Duration chunk_interval = absl::ZeroDuration();  // wait before each chunk after the first
    int cut_after = -1;  // >= 0: close after that many chunks, without the end of the body
  };
  using Handler = std::function<Reply(const Request&)>;

  // Listens on 127.0.0.1 on a free port. kUnavailable when it cannot.
  static absl::StatusOr<std::unique_ptr<ScriptedHttpServer>> Start(Handler handler);
  ~ScriptedHttpServer();
  ScriptedHttpServer(const ScriptedHttpServer&) = delete;
  ScriptedHttpServer& operator=(const ScriptedHttpServer&) = delete;

  int port() const { return port_; }
  std::string url() const;  // "http://127.0.0.1:PORT"
  // The requests read so far, in arrival order.
  std::vector<Request> requests() const ABSL_LOCKS_EXCLUDED(mu_);

  struct Impl;  // the Asio side, in the .cc

 private:
  ScriptedHttpServer() = default;
  void Record(const Request& r) ABSL_LOCKS_EXCLUDED(mu_);

  int port_ = 0;
  std::unique_ptr<Impl> impl_;
  mutable Mutex mu_;
  std::vector<Request> requests_ ABSL_GUARDED_BY(mu_);
};

}  // namespace runloom::testing
