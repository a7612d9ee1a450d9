// EngineDriver: the engine's services one call at a time, with no thread
// started: what the deterministic simulation (src/sim/) drives in place of
// Engine::Start(). Each call is the body of one of the engine's loops: the
// executor loop's claim-lease-run-ack for one message, one heartbeat of the
// lease keeper, one pass of the cancel watch; Engine::SweepOnce is the
// sweeper's. The code below them is the production code.
//
// Thread-safety: as Engine's methods; the simulator calls from one thread.
#pragma once

#include "runloom/engine.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include <string>

namespace runloom::engine_internal {

class EngineDriver {
 public:
  // Claims at most one queue message as `consumer` and executes its run as
  // an executor thread does (the message acked once the lease is held, or
  // when the run is not runnable). Returns the run id ("" = no message)
  // and the execution's status.
  struct Executed {
    std::string run_id;
    absl::Status status;
  };
  static absl::StatusOr<Executed> ExecuteNext(Engine& engine, absl::Duration visibility);
  // One heartbeat: renews the lease of every execution held now.
  static void RenewLeases(Engine& engine);
  // One pass of the cancel watch over the executions held now.
  static int CheckCancels(Engine& engine);
};

}  // namespace runloom::engine_internal
