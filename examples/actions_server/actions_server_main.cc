// runloom-example-actions: the example actions server (actions_server.h) as
// a program, for examples/triage.yaml.
//
//   runloom-example-actions [--port 8765] [--address 127.0.0.1]
//                           [--port-file PATH] [--drop-responses N] [--hold 5s]
//
// Prints "listening on http://ADDRESS:PORT" once it serves (and writes the
// port to --port-file, for scripts that ask for an ephemeral port with
// --port 0); serves until SIGINT or SIGTERM, then prints the applied actions.
#include "CLI/CLI.hpp"
#include "core/duration.h"

#include "actions_server/actions_server.h"

#include <csignal>
#include <fstream>
#include <iostream>

int main(int argc, char** argv) {
  CLI::App app{"runloom example actions server: applies each action once per Idempotency-Key"};
  runloom::examples::ActionsServerOptions options;
  options.port = 8765;
  std::string port_file;
  std::string hold;
  app.add_option("--address", options.address, "address to bind (default 127.0.0.1)");
  app.add_option("--port", options.port, "port (default 8765; 0 = any free port)");
  app.add_option("--port-file", port_file, "write the bound port to this file");
  app.add_option("--drop-responses", options.drop_responses,
                 "drop the responses of the first N applied writes (a lost response)")
      ->check(CLI::Range(0, 1000));
  app.add_option("--hold", hold, "hold each applied write's response this long, e.g. 5s");
  CLI11_PARSE(app, argc, argv);
  if (!hold.empty()) {
    absl::StatusOr<absl::Duration> d = runloom::ParseDuration(hold);
    if (!d.ok()) {
      std::cerr << "--hold: " << d.status().message() << "\n";
      return 2;
    }
    options.hold = *d;
  }

  // Block the stop signals before any thread starts, then wait for one.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  absl::StatusOr<std::unique_ptr<runloom::examples::ActionsServer>> server =
      runloom::examples::ActionsServer::Start(options);
  if (!server.ok()) {
    std::cerr << server.status().message() << "\n";
    return 1;
  }
  if (!port_file.empty()) {
    std::ofstream(port_file) << (*server)->port() << "\n";
  }
  std::cout << "listening on " << (*server)->url() << std::endl;
  int sig = 0;
  sigwait(&stop, &sig);
  (*server)->Stop();
  for (const nlohmann::json& a : (*server)->Applied()) std::cout << a.dump() << "\n";
  return 0;
}
