// The example actions server: a small HTTP service that applies "actions"
// (the remediations examples/triage.yaml approves) exactly once per
// Idempotency-Key, so the triage example's apply step has an external write
// to make, offline. Tests run it in-process; `runloom-example-actions`
// (actions_server_main.cc) runs it as a program.
//
// Endpoints (JSON in and out):
//   POST /actions          apply the action in the body. Needs an
//                          Idempotency-Key header (400 without). A new key:
//                          the action is applied, 201 {"id", "idempotency_key",
//                          "request"}. A key seen before: nothing is applied,
//                          200 with the first answer's record and the header
//                          Idempotent-Replayed: true.
//   GET  /actions/lookup   the action applied under the request's
//                          Idempotency-Key: 200 and its record, or 404.
//   GET  /actions          every applied action, in order: {"actions": [...]}.
//   GET  /healthz          200 {"ok": true}.
// Bounds: request headers 16 KiB, body 64 KiB (413 beyond), a body must be a
// JSON object (400 otherwise); keys at most 200 bytes. State is in memory.
//
// Faults, for the lost-response tests (ActionsServerOptions): drop the
// response of the next N applied writes (the connection is closed after the
// action was applied, as a lost response looks to the client), or hold each
// applied write's response for a while (a client killed in that window never
// records the answer).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include "runloom/mutex.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace runloom::examples {

struct ActionsServerOptions {
  std::string address = "127.0.0.1";  // loopback by default
  uint16_t port = 0;                  // 0 = an ephemeral port (see port())
  // The responses of the next this many applied writes are dropped.
  int drop_responses = 0;
  // Each applied write's response waits this long (or until Stop()).
  absl::Duration hold = absl::ZeroDuration();
  // Called (on the connection's thread) after each newly applied action,
  // with its record, before the response is sent, dropped or held.
  std::function<void(const nlohmann::json&)> on_applied;
};

class ActionsServer {
 public:
  // Binds and starts serving. kUnavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<ActionsServer>> Start(ActionsServerOptions options);
  ~ActionsServer();
  ActionsServer(const ActionsServer&) = delete;
  ActionsServer& operator=(const ActionsServer&) = delete;

  uint16_t port() const { return port_; }
  // "http://<address>:<port>".
  std::string url() const;
  // Every applied action's record, in order.
  std::vector<nlohmann::json> Applied() const ABSL_LOCKS_EXCLUDED(mu_);
  // Stops accepting, ends held responses and open connections, joins the
  // threads. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Impl;
  explicit ActionsServer(ActionsServerOptions options);
  // The accept loop, and each connection's loop (on its own thread).
  void AcceptLoop();
  // After a newly applied write: false when its response is to be dropped;
  // waits out `hold` first (until Stop()).
  bool DeliverAfterApply() ABSL_LOCKS_EXCLUDED(mu_);
  // Registers/unregisters a connection's socket so Stop() can shut it down.
  bool Track(int fd) ABSL_LOCKS_EXCLUDED(mu_);
  void Untrack(int fd) ABSL_LOCKS_EXCLUDED(mu_);
  // The answer to one request: status, body, extra headers; `applied` set
  // when this request applied a new action.
  struct Answer {
    int status = 200;
    nlohmann::json body;
    bool replayed = false;
    bool applied = false;
  };
  Answer Handle(const std::string& method, const std::string& target, const std::string& key,
                const std::string& body) ABSL_LOCKS_EXCLUDED(mu_);
  bool stopping() const ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after Start().
  const ActionsServerOptions options_;
  uint16_t port_ = 0;
  std::unique_ptr<Impl> impl_;  // the acceptor (its own thread)
  std::thread acceptor_thread_;

  mutable runloom::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int drops_left_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<nlohmann::json> applied_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, size_t> by_key_ ABSL_GUARDED_BY(mu_);  // -> index in applied_
  std::vector<int> open_fds_ ABSL_GUARDED_BY(mu_);             // connections being served
  std::vector<std::thread> connections_ ABSL_GUARDED_BY(mu_);
};

}  // namespace runloom::examples
