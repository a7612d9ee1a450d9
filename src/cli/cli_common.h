// What the `runloom` subcommands share: error lines and their exit codes,
// the backend flags (--db, --queue and their environment variables), opening
// a backend or an engine, and the SIGINT/SIGTERM watcher.
#pragma once

#include "runloom/backend.h"
#include "runloom/engine.h"

#include "cli/commands.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <signal.h>
#include <string>
#include <thread>
#include <vector>

namespace runloom::cli {

// Prints one line of the command's own (a notice, a warning, an error) to
// stderr: `text` as it is with the text log format; with the json format, a
// log line whose msg is `text` (runloom/env.h), so that stderr stays one JSON
// object per line. Not filtered by RUNLOOM_LOG_LEVEL.
void PrintStderr(LogLevel level, const std::string& text);
// The format PrintStderr writes (main sets it once, before any command).
void SetStderrFormat(LogFormat format);

// Prints "runloom: error: <message>" and returns kExitBadInput.
int BadInput(const std::string& message);
// Prints "runloom: error: <message>" and returns kExitNotCompleted.
int Failure(const std::string& message);
// Prints the error of an engine call on a command that names a run and
// returns its exit code: 2 for kNotFound/kInvalidArgument, 4 for
// kAborted/kFailedPrecondition, else 1.
int ExitForError(const absl::Status& s);

// The inputs of --input NAME=VALUE flags (each key once; values are strings,
// converted to the declared types at admission) over an --input-file JSON
// object. kInvalidArgument naming the flag.
absl::StatusOr<nlohmann::json> ParseInputFlags(const std::vector<std::string>& inputs,
                                               const std::string& input_file);
// The exit code for a failed read of the run `run_id` names.
int RunReadFailure(const CommonFlags& c, const std::string& run_id, const absl::Status& s);

// The first line of a multi-line message (an exec error carries its stderr).
std::string FirstLine(const std::string& s);
// `s` as one shell word: as is when it holds only characters no shell
// treats specially, else in single quotes.
std::string ShellQuote(const std::string& s);
// " --db DB" and, with a queue URL, " --queue URL": the backend flags of a
// command the CLI prints for the user to run next.
std::string BackendArgs(const CommonFlags& c);
// $USER, or "cli".
std::string DefaultReviewer();

// A flag that must be a positive duration ("30s", "2m").
// HOST:PORT as a listen address: the host (brackets of "[::1]" removed) and
// a port 0-65535. nullopt when it is not of that form; each flag says what
// it wants in its own message.
struct HostPort {
  std::string host;
  uint16_t port = 0;
};
std::optional<HostPort> ParseHostPort(const std::string& address);

absl::StatusOr<absl::Duration> PositiveDurationFlag(const char* flag, const std::string& value);
// --sync is normal or full.
absl::Status CheckSyncFlag(const CommonFlags& c);
// The most runs one process may hold (--runs-in-flight): each is a fiber
// whose stack is two memory mappings, and Linux allows 65,530 by default.
inline constexpr int kMaxRunsInFlight = 20000;
// --runs-in-flight is from 0 to kMaxRunsInFlight.
absl::Status CheckRunsInFlight(int runs_in_flight);
// The queue URL's form: "" (the store's own queue) or redis://host:port[/n].
// kInvalidArgument names where it came from (--queue or RUNLOOM_QUEUE), the
// value and the accepted form.
absl::Status CheckQueueUrl(const CommonFlags& c);

// The log line format (runloom/env.h): `flag` (--log-format) when given, else
// $RUNLOOM_LOG_FORMAT when set and not empty, else text. kInvalidArgument
// naming the flag or the variable, the value and the accepted ones.
absl::StatusOr<LogFormat> LogFormatSetting(const std::optional<std::string>& flag);

// Opens the backend `c` names (creating an SQLite file that is not there).
// Checks the queue URL first; errors are prefixed with the URL and where it
// came from. `long_lived`: BackendOptions::long_lived (worker, serve, bench).
absl::StatusOr<Backend> OpenDb(const CommonFlags& c, const TransportOptions& transport = {},
                               bool long_lived = false);
// OpenDb over an existing database: kNotFound when `c` names an SQLite file
// that is not there (nothing is created).
absl::StatusOr<Backend> OpenExistingDb(const CommonFlags& c);
// An engine over an existing database, for every command but run, worker
// and bench: never started, so it executes nothing; its watches wake on
// commits from the process that executes the run. kNotFound when `c` names
// an SQLite file that is not there (nothing is created); a refused
// Engine::Open is kInternal.
absl::StatusOr<std::unique_ptr<Engine>> OpenEngine(const CommonFlags& c);

// Blocks SIGINT/SIGTERM in every thread and turns them into a flag that a
// dedicated thread sets, so shutdown runs as ordinary code, not in a handler.
class SignalWatcher {
 public:
  SignalWatcher();
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  // Called on the watcher's thread at each signal; nullptr = none.
  void OnSignal(std::function<void()> fn);
  bool signalled() const { return signalled_.load(); }

 private:
  sigset_t set_;
  std::atomic<bool> done_{false};
  std::atomic<bool> signalled_{false};
  std::mutex mu_;
  std::function<void()> on_signal_;
  std::thread thread_;
};

}  // namespace runloom::cli
