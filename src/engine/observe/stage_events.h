// StageEventPublisher: stage events (reference 004) through a
// MessagePublisher (runloom/engine.h; Redis pub/sub in `runloom`).
//
// For a workflow with a `stage_events:` block, the engine publishes
//   {prefix}:{tenant_id}:{node_id}  <-  {"correlation_id": run id,
//     "document_id", "tenant_id", "node_id", "stage", "status",
//     "timestamp": ISO-8601 UTC with milliseconds, ["error"]}
// when a step naming a `stage:` starts (status "started") and when the run
// ends ({completed, succeeded} or {failed, failed, error}). The ids are the
// values of the three inputs the block names; no other input value, output
// or config goes into an event.
//
// Publishing never fails the caller: a run without its tenant or node input
// is skipped with a warning, a Redis failure is a warning, and after a
// failure that left the publisher disconnected, it waits (1 s doubling to
// 30 s, by the engine's clock) before it lets it connect again, dropping
// events meanwhile with a warning each.
//
// Thread-safety: thread-safe; sends under mu_ (callers publishing at once
// wait for each other, each for at most about the publisher's connect and
// send timeouts).
#pragma once

#include "runloom/clock.h"
#include "runloom/stage_events.h"
#include "runloom/env.h"
#include "runloom/mutex.h"
#include "runloom/run.h"
#include "runloom/workflow.h"

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

#include <memory>
#include <optional>
#include <string>

namespace runloom::engine_internal {

// The run's end as reported to stage-event subscribers (reference 004 has
// two terminal stages): completed -> {completed, succeeded}; every other
// terminal status -> {failed, failed, error}.
struct StageUpdate {
  std::string stage;
  std::string status;
  std::string error;  // "" = no error field
};
StageUpdate TerminalStageUpdate(RunStatus status, const std::string& error);

// The value of the id input `name` of a run as text: a non-empty string, or
// an integer; anything else (missing, null, empty, another type) is
// nullopt. (Budgets use the tenant input the same way.)
std::optional<std::string> StageIdValue(const nlohmann::json& inputs, const std::string& name);

// One event, ready to publish.
struct StageEvent {
  std::string correlation_id;
  std::string document_id;
  std::string tenant_id;
  std::string node_id;
  StageUpdate update;
  absl::Time at;
};

// The message body: exactly the fields above (error only when not empty).
nlohmann::json StageEventPayload(const StageEvent& e);
// "2026-04-23T10:00:12.345Z"
std::string StageTimestamp(absl::Time t);

class StageEventPublisher {
 public:
  // Checks the options (kInvalidArgument for no publisher or an empty
  // prefix); connects to nothing. `clock` and `logger` must outlive it.
  static absl::StatusOr<std::unique_ptr<StageEventPublisher>> Create(
      const StageEventOptions& options, Clock* clock, Logger* logger);
  StageEventPublisher(const StageEventPublisher&) = delete;
  StageEventPublisher& operator=(const StageEventPublisher&) = delete;

  // Publishes `update` for `run` of `wf` (a no-op when wf has no
  // stage_events block). Never fails; problems are logged warnings.
  void Publish(const RunRecord& run, const Workflow& wf, const StageUpdate& update)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  StageEventPublisher(const StageEventOptions& options, Clock* clock, Logger* logger);
  // Publishes, or says why not (connecting again only once the backoff passed).
  absl::Status Send(const std::string& channel, const std::string& payload)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  const std::string prefix_;
  Clock* const clock_;
  Logger* const logger_;

  const std::shared_ptr<MessagePublisher> publisher_;

  runloom::Mutex mu_;
  absl::Time retry_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Duration backoff_ ABSL_GUARDED_BY(mu_);
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace runloom::engine_internal
