// Secrets of a run: resolving secret://NAME references, and scrubbing the
// resolved values out of everything an execution writes.
//
// A secret input is stored as a reference (FreezeInputs), never as a value,
// so any process executing the run (a worker after a crash, after a gate)
// resolves it when a step needs it, from, in order:
//   1. the environment variable RUNLOOM_SECRET_<NAME>;
//   2. the file named by RUNLOOM_SECRETS_FILE: lines NAME=value ('#' starts a
//      comment line); the file must be a regular file owned by this process's
//      user and readable by no one else (mode 0600 or 0400), or it is refused.
// Only names exposed this way resolve: a run cannot read other environment
// variables of the worker through a reference.
//
// Every value an execution resolved (or was given in memory) is replaced by
// "[secret]" in every text it writes: step outputs, errors and stderr tails,
// event data, the run's error, outcome and context. A secret never reaches
// the database, the CLI's output or a log line that comes from those.
//
// RunSecrets holds the secret inputs given in memory at admission, by run id,
// for this process's executions of those runs.
//
// Thread-safety: ResolveSecret is thread-safe; SecretScrubber and RunSecrets
// are thread-safe.
#pragma once

#include "runloom/env.h"
#include "runloom/mutex.h"
#include "runloom/store.h"

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

#include <map>
#include <string>
#include <vector>

namespace runloom::engine_internal {

// The value of secret NAME (see above). kNotFound names where it looked and
// how to provide it; kPermissionDenied for a secrets file others can read.
absl::StatusOr<std::string> ResolveSecret(const std::string& name);

inline constexpr char kScrubbed[] = "[secret]";

class SecretScrubber {
 public:
  // Values to scrub from now on (empty strings are ignored).
  void Add(const std::string& value) ABSL_LOCKS_EXCLUDED(mu_);
  // Replaces every known value in every text field of `write` (strings and
  // keys inside JSON too).
  void Scrub(RunWrite& write) const ABSL_LOCKS_EXCLUDED(mu_);
  // The same for one JSON value (e.g. a write's recorded response).
  void Scrub(nlohmann::json& value) const ABSL_LOCKS_EXCLUDED(mu_);
  // The same for one text (e.g. a log line).
  void Scrub(std::string& text) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void ScrubLocked(std::string& text) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void ScrubLocked(nlohmann::json& value) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  mutable runloom::Mutex mu_;
  std::vector<std::string> values_ ABSL_GUARDED_BY(mu_);  // longest first
};

// A Logger that replaces every value `scrubber` knows in each message before
// passing it on to `base`: a step kind logs through one,
// so a secret in an error it logs (a URL, a response) never reaches a log
// line, whichever format writes it. Neither pointer is owned; both must
// outlive it. Thread-safe as `base` is.
class ScrubbingLogger final : public Logger {
 public:
  ScrubbingLogger(Logger* base, const SecretScrubber* scrubber)
      : base_(base), scrubber_(scrubber) {}

  void Log(LogLevel level, std::string_view message) override { LogWithFields(level, message, {}); }
  void LogWithFields(LogLevel level, std::string_view message, const LogFields& fields) override;
  LogLevel min_level() const override { return base_->min_level(); }

 private:
  Logger* const base_;
  const SecretScrubber* const scrubber_;
};

// Secret inputs by run id, for the executions of runs admitted here.
class RunSecrets {
 public:
  RunSecrets() = default;
  RunSecrets(const RunSecrets&) = delete;
  RunSecrets& operator=(const RunSecrets&) = delete;

  void Put(const std::string& run_id, nlohmann::json secrets) ABSL_LOCKS_EXCLUDED(mu_);
  // The run's secrets; an empty object when there are none.
  nlohmann::json Get(const std::string& run_id) const ABSL_LOCKS_EXCLUDED(mu_);
  void Erase(const std::string& run_id) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable runloom::Mutex mu_;
  std::map<std::string, nlohmann::json> secrets_ ABSL_GUARDED_BY(mu_);
};

}  // namespace runloom::engine_internal
