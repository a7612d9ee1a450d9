// `runloom serve`: the HTTP API (src/api), the executors and the sweeper in
// one process, until SIGINT/SIGTERM; then a graceful stop: the server stops
// accepting, finishes in-flight requests and ends its streams, then the
// engine releases the runs it holds.
#include "runloom/engine.h"
#include "runloom/http_server.h"
#include "runloom/mutex.h"

#include "cli/cli_common.h"
#include "cli/commands.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "auth/tokens.h"
#include "prometheus/registry.h"

#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <sys/resource.h>
#include <vector>

namespace runloom::cli {
namespace {

// "host:port" (or "[v6]:port") -> address and port.
absl::Status ParseListen(const std::string& listen, api::ServerOptions& out) {
  std::optional<HostPort> hp = ParseHostPort(listen);
  if (!hp.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen '", listen, "': use host:port, e.g. 127.0.0.1:8080 (port 0 = any free port)"));
  }
  out.address = hp->host;
  out.port = hp->port;
  return absl::OkStatus();
}

// Each open connection and event stream is a descriptor; the usual soft
// limit (1024) would cap a server at about a thousand streams. Raise it to
// the hard limit (best effort: a failure leaves the soft limit).
void RaiseDescriptorLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

// --allow-kinds: known kind names (KnownStepKinds), comma-separated; ""
// allows none.
absl::StatusOr<std::set<std::string>> AllowedKinds(const std::string& flag,
                                                   const StepRegistry& registry) {
  const std::vector<std::string> kinds = KnownStepKinds(registry);
  const std::set<std::string> known(kinds.begin(), kinds.end());
  std::set<std::string> out;
  for (absl::string_view k : absl::StrSplit(flag, ',', absl::SkipWhitespace())) {
    const std::string name(absl::StripAsciiWhitespace(k));
    if (!known.contains(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--allow-kinds: unknown step kind '", name,
                       "'; use a comma-separated list of ", absl::StrJoin(known, ", ")));
    }
    out.insert(name);
  }
  return out;
}

}  // namespace

int ServeCommand(const ServeFlags& f) {
  api::ServerOptions so;
  if (absl::Status s = ParseListen(f.listen, so); !s.ok()) {
    return BadInput(std::string(s.message()));
  }
  if (f.executors < 1) return BadInput("--executors must be at least 1");
  if (absl::Status s = CheckRunsInFlight(f.runs_in_flight); !s.ok()) {
    return BadInput(std::string(s.message()));
  }
  if (f.threads < 1) return BadInput("--http-threads must be at least 1");
  so.threads = f.threads;
  if (absl::Status s = CheckSyncFlag(f.common); !s.ok()) return BadInput(std::string(s.message()));
  if (absl::Status s = CheckQueueUrl(f.common); !s.ok()) return BadInput(std::string(s.message()));
  auto registry = std::make_shared<prometheus::Registry>();
  EngineOptions base;
  base.executors = f.executors;
  base.runs_in_flight = f.runs_in_flight;
  base.env.metrics = registry.get();
  auto opts = ExecutingEngineOptions(std::move(base), f.exec);
  if (!opts.ok()) return BadInput(std::string(opts.status().message()));
  if (f.allow_kinds.has_value()) {
    absl::StatusOr<std::set<std::string>> kinds = AllowedKinds(*f.allow_kinds, *opts->registry);
    if (!kinds.ok()) return BadInput(std::string(kinds.status().message()));
    so.allow_kinds = *std::move(kinds);
  }
  RaiseDescriptorLimit();
  SignalWatcher signals;
  auto backend = OpenDb(f.common, {}, /*long_lived=*/true);
  if (!backend.ok()) return DbOpenFailure(f.common, backend.status());
  auto engine = Engine::Open(*std::move(opts), *std::move(backend));
  if (!engine.ok()) return Failure(std::string(engine.status().message()));
  Engine* e = engine->get();
  // Bearer tokens are checked against the store's token table (`runloom
  // token create`); --insecure-no-auth (a local demo) checks none.
  std::unique_ptr<StoreAuthenticator> auth;
  if (f.insecure_no_auth) {
    PrintStderr(LogLevel::kWarning,
                "runloom serve: WARNING: --insecure-no-auth: no token is checked; every caller "
                "acts as admin \"local\". Do not expose this server.");
  } else {
    auth = std::make_unique<StoreAuthenticator>(e->tokens());
  }
  auto server = api::Server::Start(so, e, auth.get(), registry.get());
  if (!server.ok()) return Failure(std::string(server.status().message()));
  if (!f.no_executors) e->Start();
  PrintStderr(LogLevel::kInfo,
              absl::StrCat("runloom serve: listening on http://", so.address, ":",
                           (*server)->port(), " (", RedactedUrl(f.common.db), "; ",
                           (f.no_executors ? std::string("no executors")
                                           : absl::StrCat(f.executors, " executors")),
                           "); Ctrl-C to stop"));
  runloom::Notification stop;
  signals.OnSignal([&stop] {
    if (!stop.HasBeenNotified()) stop.Notify();
  });
  stop.WaitForNotification();
  signals.OnSignal(nullptr);  // `stop` goes before `signals`
  PrintStderr(LogLevel::kInfo, "runloom serve: stopping: finishing requests, ending streams");
  (*server)->Shutdown();
  e->Stop();
  EngineStats st = e->stats();
  PrintStderr(LogLevel::kInfo,
              absl::StrCat("runloom serve: stopped; ", st.runs_finished, " runs finished, ",
                           st.runs_released, " released to the queue"));
  return 0;
}

}  // namespace runloom::cli
